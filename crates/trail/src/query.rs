//! Owns reading items from the table: a time query fans out over the 32 shards of each UTC day of
//! the `byAuditTime` index, a lookup over the 4 shards of one value of a lookup index (Query,
//! never Scan), both merged in (auditTime, messageId) order; a lookup then reads the full items
//! (`fetch.rs`), keeps those that are exactly what it asked for, and warns of those the table
//! lacks; `get` reads one `messageId` (docs/architecture.md "The crates", trail). Must not know
//! output formats.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering as Atomic;

use aws_sdk_dynamodb::types::{AttributeValue, IndexStatus};
use futures::{Stream, StreamExt};
use tokio::sync::{Semaphore, mpsc};

use crate::Error;
use crate::fetch::BATCH_GET_KEYS;
use crate::filter::{Filter, Plan, Source};
use crate::item::TrailItem;
use crate::merge::{Order, merge};
use crate::reader::Reader;
use audit_model::keys::{
    AUDIT_BUCKET, LOOKUP_SHARDS, LookupIndex, PARTITION_KEY, SORT_KEY, TIME_INDEX, lookup_index,
    lookup_key_of_shard,
};
use audit_model::message::AUDIT_BUCKET_SHARDS;
use audit_model::range::TimeRange;

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

impl QueryOptions {
    /// The Query `Limit`: `page_size`, or `limit` when that is smaller.
    fn page_size(&self) -> i32 {
        match self.limit {
            Some(limit) => self
                .page_size
                .min(i32::try_from(limit).unwrap_or(i32::MAX))
                .max(1),
            None => self.page_size.max(1),
        }
    }
}

type Page = Result<Vec<TrailItem>, Error>;

/// A lookup to read: the index and value, the filters DynamoDB applies to the index, and the
/// checks made on the full items.
#[derive(Debug, Clone)]
struct Lookup {
    index: &'static LookupIndex,
    value: String,
    filter: Option<Arc<Filter>>,
    checks: Arc<Vec<(&'static str, String)>>,
}

/// One shard of an index to read: the partition key's attribute and value, the range, and the
/// filters.
#[derive(Debug, Clone)]
struct Shard {
    index: &'static str,
    key_attribute: &'static str,
    key: String,
    range: TimeRange,
    filter: Option<Arc<Filter>>,
}

impl Reader {
    /// The table exists and has the index the plan reads, built (one DescribeTable), so that a
    /// missing one is reported as such rather than as failing Queries.
    pub async fn check_index(&self, plan: &Plan) -> Result<(), Error> {
        self.stats.describe_table.fetch_add(1, Atomic::Relaxed);
        let described = self
            .client
            .describe_table()
            .table_name(&self.table)
            .send()
            .await
            .map_err(|error| self.failed(&error))?;
        let wanted = plan.index();
        let index = described
            .table()
            .map(|t| t.global_secondary_indexes())
            .unwrap_or_default()
            .iter()
            .find(|index| index.index_name() == Some(wanted));
        let status = index.and_then(|i| i.index_status());
        match (index, &plan.source) {
            (None, Source::Time) => Err(Error::NoTimeIndex {
                table: self.table.clone(),
                index: wanted.to_owned(),
            }),
            (None, Source::Lookup { field, .. }) => Err(Error::NoLookupIndex {
                table: self.table.clone(),
                index: wanted.to_owned(),
                field: field.attribute(),
            }),
            // Being built from the table's items (or removed): not readable yet.
            (Some(_), _)
                if matches!(
                    status,
                    Some(IndexStatus::Creating) | Some(IndexStatus::Deleting)
                ) =>
            {
                Err(Error::IndexNotActive {
                    table: self.table.clone(),
                    index: wanted.to_owned(),
                    status: status.map(|s| s.as_str().to_owned()).unwrap_or_default(),
                })
            }
            (Some(_), _) => Ok(()),
        }
    }

    /// What the plan asks for: a time query or a lookup, with its filters and checks.
    pub fn read(
        &self,
        plan: &Plan,
        range: TimeRange,
        options: QueryOptions,
    ) -> std::pin::Pin<Box<dyn Stream<Item = Result<TrailItem, Error>> + Send>> {
        let filter = plan.filter().map(Arc::new);
        match &plan.source {
            Source::Time => Box::pin(self.query(range, options, filter)),
            Source::Lookup { field, value } => {
                let lookup = Lookup {
                    index: lookup_index(*field),
                    value: value.clone(),
                    filter,
                    checks: Arc::new(plan.checks.clone()),
                };
                // When the checks drop rows, N keys are not N rows: the caller stops at its
                // limit, and pages are not cut to it.
                let options = if plan.index_keeps_only_rows() {
                    options
                } else {
                    QueryOptions {
                        limit: None,
                        ..options
                    }
                };
                Box::pin(self.lookup(lookup, range, options))
            }
        }
    }

    /// Every item with `range.from <= auditTime <= range.to`, ordered by (auditTime, messageId)
    /// in `options.order`. Days are read one after the other; within a day the 32 shards are
    /// read concurrently (at most `options.concurrency` requests in flight), each a page ahead of
    /// the merge. Dropping the stream stops the reading.
    /// With `filter`, only the items that match it (a FilterExpression: DynamoDB reads the
    /// others and leaves them out of the page).
    pub fn query(
        &self,
        range: TimeRange,
        options: QueryOptions,
        filter: Option<Arc<Filter>>,
    ) -> impl Stream<Item = Result<TrailItem, Error>> + Send + use<> {
        let mut days = range.days();
        if options.order == Order::Descending {
            days.reverse();
        }
        let permits = Arc::new(Semaphore::new(options.concurrency.max(1)));
        let page_size = options.page_size();
        let reader = self.clone();
        futures::stream::iter(days)
            .map(move |day| {
                let shards = (0..AUDIT_BUCKET_SHARDS)
                    .map(|shard| {
                        let shard = Shard {
                            index: TIME_INDEX,
                            key_attribute: AUDIT_BUCKET,
                            key: format!("{day}#{shard:02}"),
                            range: range.clone(),
                            filter: filter.clone(),
                        };
                        reader.shard_pages(shard, options.order, page_size, permits.clone())
                    })
                    .collect();
                merge(shards, options.order)
            })
            .flatten()
    }

    /// The items whose key in `lookup.index` is one of the `LOOKUP_SHARDS` keys of
    /// `lookup.value`, with `range.from <= auditTime <= range.to` (and `lookup.filter`), ordered
    /// by (auditTime, messageId) in `options.order`, each read in full from the table and kept
    /// only if it passes `lookup.checks`. The shards are read concurrently, each a page ahead of
    /// the merge; the merged keys go to BatchGetItem `BATCH_GET_KEYS` at a time, in order, and
    /// come out in that order. An item the index lists that the table no longer holds is left
    /// out with a warning on stderr naming the index and the key. Memory: the pages in flight and
    /// one chunk, whatever the range. `options.limit` stops reading once that many keys are out.
    /// Dropping the stream stops the reading.
    fn lookup(
        &self,
        lookup: Lookup,
        range: TimeRange,
        options: QueryOptions,
    ) -> impl Stream<Item = Result<TrailItem, Error>> + Send + use<> {
        let permits = Arc::new(Semaphore::new(options.concurrency.max(1)));
        let page_size = options.page_size();
        let index = lookup.index;
        let shards = if range.is_empty() {
            Vec::new()
        } else {
            (0..LOOKUP_SHARDS)
                .map(|shard| {
                    let shard = Shard {
                        index: index.name,
                        key_attribute: index.key,
                        key: lookup_key_of_shard(&lookup.value, shard),
                        range: range.clone(),
                        filter: lookup.filter.clone(),
                    };
                    self.shard_pages(shard, options.order, page_size, permits.clone())
                })
                .collect()
        };
        let keys = merge(shards, options.order);
        let keys = match options.limit {
            Some(limit) => keys
                .take(usize::try_from(limit).unwrap_or(usize::MAX))
                .left_stream(),
            None => keys.right_stream(),
        };
        let reader = self.clone();
        let checks = lookup.checks;
        keys.chunks(BATCH_GET_KEYS)
            .then(move |chunk| {
                let reader = reader.clone();
                let checks = checks.clone();
                async move {
                    // The merge ends after its first error: the keys before it are read, then
                    // the error goes out.
                    let mut wanted = Vec::with_capacity(chunk.len());
                    let mut failed = None;
                    for key in chunk {
                        match key {
                            Ok(key) => wanted.push(key),
                            Err(error) => {
                                failed = Some(error);
                                break;
                            }
                        }
                    }
                    let mut rows: Vec<Result<TrailItem, Error>> = match reader.fetch(wanted).await {
                        Ok(fetched) => {
                            for gone in &fetched.missing {
                                eprintln!("{}", reader.missing_warning(index, gone));
                            }
                            fetched
                                .items
                                .into_iter()
                                .filter(|item| item.has(&checks))
                                .map(Ok)
                                .collect()
                        }
                        Err(error) => vec![Err(error)],
                    };
                    rows.extend(failed.map(Err));
                    futures::stream::iter(rows)
                }
            })
            .flatten()
    }

    /// The warning for an item the lookup index `index` listed that the table no longer holds.
    fn missing_warning(&self, index: &LookupIndex, listed: &TrailItem) -> String {
        format!(
            "warning: index {} lists messageId {} at auditTime {} under {} {}, but table {} no longer holds it (expired by TTL or deleted since the index listed it): left out",
            index.name,
            listed.message_id,
            listed.audit_time,
            index.key,
            listed.text(index.key),
            self.table
        )
    }

    /// The pages of one shard, read by a task of its own that stays one page ahead of the merge
    /// (a channel of one page): memory per shard is the page being merged, one waiting, and one
    /// being read.
    fn shard_pages(
        &self,
        shard: Shard,
        order: Order,
        page_size: i32,
        permits: Arc<Semaphore>,
    ) -> std::pin::Pin<Box<dyn Stream<Item = Page> + Send>> {
        let (sender, receiver) = mpsc::channel::<Page>(1);
        // On demand: the stream asks for each page after the first, and the task waits for it.
        let (ask, mut asked) = mpsc::channel::<()>(1);
        let read_ahead = self.read_ahead;
        let reader = self.clone();
        tokio::spawn(async move {
            let mut start: Option<HashMap<String, AttributeValue>> = None;
            loop {
                if !read_ahead && start.is_some() && asked.recv().await.is_none() {
                    return; // the merge is gone
                }
                let Ok(permit) = permits.acquire().await else {
                    return;
                };
                if sender.is_closed() {
                    return; // the merge is gone (--limit reached, or an error): stop reading
                }
                reader.stats.query.fetch_add(1, Atomic::Relaxed);
                let mut request = reader
                    .client
                    .query()
                    .table_name(&reader.table)
                    .index_name(shard.index)
                    .key_condition_expression("#k = :k AND #t BETWEEN :from AND :to")
                    .expression_attribute_names("#k", shard.key_attribute)
                    .expression_attribute_names("#t", SORT_KEY)
                    .expression_attribute_values(":k", AttributeValue::S(shard.key.clone()))
                    .expression_attribute_values(
                        ":from",
                        AttributeValue::S(shard.range.from.clone()),
                    )
                    .expression_attribute_values(":to", AttributeValue::S(shard.range.to.clone()))
                    .scan_index_forward(order == Order::Ascending)
                    .limit(page_size)
                    .set_exclusive_start_key(start.take());
                if let Some(filter) = &shard.filter {
                    request = request.filter_expression(&filter.expression);
                    for (placeholder, name) in &filter.names {
                        request = request.expression_attribute_names(placeholder, name);
                    }
                    for (placeholder, value) in &filter.values {
                        request = request.expression_attribute_values(
                            placeholder,
                            AttributeValue::S(value.clone()),
                        );
                    }
                }
                let result = request.send().await;
                drop(permit);
                let output = match result {
                    Ok(output) => output,
                    Err(error) => {
                        let _ = sender.send(Err(reader.failed(&error))).await;
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
                let scanned = u64::try_from(output.scanned_count).unwrap_or(0);
                reader
                    .stats
                    .items_read
                    .fetch_add(scanned.max(items.len() as u64), Atomic::Relaxed);
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
            (receiver, ask, true),
            move |(mut receiver, ask, first)| async move {
                if !read_ahead && !first {
                    // The task may have ended (the shard's last page): nothing to ask then.
                    let _ = ask.send(()).await;
                }
                receiver
                    .recv()
                    .await
                    .map(|page| (page, (receiver, ask, false)))
            },
        ))
    }

    /// The item(s) of one `messageId` (a Query on the table's partition key), in auditTime order.
    pub fn get(&self, message_id: &str) -> impl Stream<Item = Result<TrailItem, Error>> + use<> {
        let reader = self.clone();
        let message_id = message_id.to_owned();
        futures::stream::unfold(Some(None), move |start| {
            let reader = reader.clone();
            let message_id = message_id.clone();
            async move {
                let start: Option<HashMap<String, AttributeValue>> = start?;
                reader.stats.query.fetch_add(1, Atomic::Relaxed);
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
                        let items: Vec<Result<TrailItem, Error>> = output
                            .items
                            .unwrap_or_default()
                            .into_iter()
                            .map(|item| Ok(TrailItem::from(item)))
                            .collect();
                        Some((futures::stream::iter(items), next.map(Some)))
                    }
                    Err(error) => Some((
                        futures::stream::iter(vec![Err(reader.failed(&error))]),
                        None,
                    )),
                }
            }
        })
        .flatten()
    }
}
