//! Owns reading items from the table: `query` fans out over the 32 shards of each UTC day of the
//! `byAuditTime` index (Query, never Scan) and merges them in time order; `get` reads one
//! `messageId`. Must not know output formats.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as Atomic};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::describe_table::DescribeTableError;
use aws_sdk_dynamodb::types::AttributeValue;
use futures::{Stream, StreamExt};
use tokio::sync::{Semaphore, mpsc};

use super::item::TrailItem;
use super::merge::{Order, merge};
use super::range::TimeRange;
use super::{TrailError, sdk_error};
use audit_model::keys::{AUDIT_BUCKET, PARTITION_KEY, SORT_KEY, TIME_INDEX};
use audit_model::message::AUDIT_BUCKET_SHARDS;

/// How a query reads.
#[derive(Debug, Clone, Copy)]
pub struct QueryOptions {
    pub order: Order,
    /// The Query `Limit`: items per request.
    pub page_size: i32,
    /// Query requests in flight at most.
    pub concurrency: usize,
    /// Rows wanted at most (pages need be no larger).
    pub limit: Option<u64>,
}

/// Requests made and rows read, for the progress line and `--stats`.
#[derive(Debug, Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub items_read: AtomicU64,
}

impl Stats {
    pub fn requests(&self) -> u64 {
        self.requests.load(Atomic::Relaxed)
    }
    pub fn items_read(&self) -> u64 {
        self.items_read.load(Atomic::Relaxed)
    }
}

/// The audit table, read.
#[derive(Debug, Clone)]
pub struct Reader {
    client: Client,
    table: String,
    /// Where the table was looked for (endpoint or region), for error messages.
    location: String,
    pub stats: Arc<Stats>,
}

type Page = Result<Vec<TrailItem>, TrailError>;

impl Reader {
    pub fn new(client: Client, table: impl Into<String>, location: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            location: location.into(),
            stats: Arc::default(),
        }
    }

    fn not_found(&self) -> TrailError {
        TrailError::TableNotFound {
            table: self.table.clone(),
            at: self.location.clone(),
        }
    }

    /// The table exists and has the `byAuditTime` index (one DescribeTable), so that a missing
    /// one is reported as such rather than as 32 failing Queries.
    pub async fn check_time_index(&self) -> Result<(), TrailError> {
        self.stats.requests.fetch_add(1, Atomic::Relaxed);
        let described = self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await
            .map_err(|error| match error.as_service_error() {
                Some(DescribeTableError::ResourceNotFoundException(_)) => self.not_found(),
                _ => TrailError::Aws(sdk_error(&error)),
            })?;
        let has_index = described
            .table()
            .map(|t| t.global_secondary_indexes())
            .unwrap_or_default()
            .iter()
            .any(|index| index.index_name() == Some(TIME_INDEX));
        if has_index {
            Ok(())
        } else {
            Err(TrailError::NoTimeIndex {
                table: self.table.clone(),
                index: TIME_INDEX.to_owned(),
            })
        }
    }

    /// Every item with `range.from <= auditTime <= range.to`, ordered by (auditTime, messageId)
    /// in `options.order`. Days are read one after the other; within a day the 32 shards are
    /// read concurrently (at most `options.concurrency` requests in flight), each a page ahead of
    /// the merge. Dropping the stream stops the reading.
    pub fn query(
        &self,
        range: TimeRange,
        options: QueryOptions,
    ) -> impl Stream<Item = Result<TrailItem, TrailError>> + use<> {
        let mut days = range.days();
        if options.order == Order::Descending {
            days.reverse();
        }
        let permits = Arc::new(Semaphore::new(options.concurrency.max(1)));
        let page_size = match options.limit {
            Some(limit) => options
                .page_size
                .min(i32::try_from(limit).unwrap_or(i32::MAX))
                .max(1),
            None => options.page_size.max(1),
        };
        let reader = self.clone();
        futures::stream::iter(days)
            .map(move |day| {
                let shards = (0..AUDIT_BUCKET_SHARDS)
                    .map(|shard| {
                        reader.shard_pages(
                            format!("{day}#{shard:02}"),
                            range.clone(),
                            options.order,
                            page_size,
                            permits.clone(),
                        )
                    })
                    .collect();
                merge(shards, options.order)
            })
            .flatten()
    }

    /// The pages of one shard, read by a task of its own that stays one page ahead of the merge
    /// (a channel of one page): memory per shard is the page being merged, one waiting, and one
    /// being read.
    fn shard_pages(
        &self,
        bucket: String,
        range: TimeRange,
        order: Order,
        page_size: i32,
        permits: Arc<Semaphore>,
    ) -> std::pin::Pin<Box<dyn Stream<Item = Page> + Send>> {
        let (sender, receiver) = mpsc::channel::<Page>(1);
        let reader = self.clone();
        tokio::spawn(async move {
            let mut start: Option<HashMap<String, AttributeValue>> = None;
            loop {
                let Ok(permit) = permits.acquire().await else {
                    return;
                };
                if sender.is_closed() {
                    return; // the merge is gone (--limit reached, or an error): stop reading
                }
                reader.stats.requests.fetch_add(1, Atomic::Relaxed);
                let result = reader
                    .client
                    .query()
                    .table_name(&reader.table)
                    .index_name(TIME_INDEX)
                    .key_condition_expression("#b = :b AND #t BETWEEN :from AND :to")
                    .expression_attribute_names("#b", AUDIT_BUCKET)
                    .expression_attribute_names("#t", SORT_KEY)
                    .expression_attribute_values(":b", AttributeValue::S(bucket.clone()))
                    .expression_attribute_values(":from", AttributeValue::S(range.from.clone()))
                    .expression_attribute_values(":to", AttributeValue::S(range.to.clone()))
                    .scan_index_forward(order == Order::Ascending)
                    .limit(page_size)
                    .set_exclusive_start_key(start.take())
                    .send()
                    .await;
                drop(permit);
                let output = match result {
                    Ok(output) => output,
                    Err(error) => {
                        let error = match error.as_service_error() {
                            Some(e) if e.is_resource_not_found_exception() => reader.not_found(),
                            _ => TrailError::Aws(sdk_error(&error)),
                        };
                        let _ = sender.send(Err(error)).await;
                        return;
                    }
                };
                let next = output.last_evaluated_key.filter(|key| !key.is_empty());
                let items: Vec<TrailItem> = output
                    .items
                    .unwrap_or_default()
                    .into_iter()
                    .map(TrailItem::from)
                    .collect();
                reader
                    .stats
                    .items_read
                    .fetch_add(items.len() as u64, Atomic::Relaxed);
                if sender.send(Ok(items)).await.is_err() {
                    return;
                }
                match next {
                    Some(key) => start = Some(key),
                    None => return,
                }
            }
        });
        Box::pin(futures::stream::unfold(
            receiver,
            |mut receiver| async move { receiver.recv().await.map(|page| (page, receiver)) },
        ))
    }

    /// The item(s) of one `messageId` (a Query on the table's partition key), in auditTime order.
    pub fn get(
        &self,
        message_id: &str,
    ) -> impl Stream<Item = Result<TrailItem, TrailError>> + use<> {
        let reader = self.clone();
        let message_id = message_id.to_owned();
        futures::stream::unfold(Some(None), move |start| {
            let reader = reader.clone();
            let message_id = message_id.clone();
            async move {
                let start: Option<HashMap<String, AttributeValue>> = start?;
                reader.stats.requests.fetch_add(1, Atomic::Relaxed);
                let result = reader
                    .client
                    .query()
                    .table_name(&reader.table)
                    .key_condition_expression("#pk = :id")
                    .expression_attribute_names("#pk", PARTITION_KEY)
                    .expression_attribute_values(":id", AttributeValue::S(message_id))
                    .set_exclusive_start_key(start)
                    .send()
                    .await;
                match result {
                    Ok(output) => {
                        let next = output.last_evaluated_key.filter(|key| !key.is_empty());
                        let items: Vec<Result<TrailItem, TrailError>> = output
                            .items
                            .unwrap_or_default()
                            .into_iter()
                            .map(|item| Ok(TrailItem::from(item)))
                            .collect();
                        Some((futures::stream::iter(items), next.map(Some)))
                    }
                    Err(error) => {
                        let error = match error.as_service_error() {
                            Some(e) if e.is_resource_not_found_exception() => reader.not_found(),
                            _ => TrailError::Aws(sdk_error(&error)),
                        };
                        Some((futures::stream::iter(vec![Err(error)]), None))
                    }
                }
            }
        })
        .flatten()
    }
}
