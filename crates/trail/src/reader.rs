//! Owns the audit table as read (docs/architecture.md "The crates", trail): the client, the table
//! and where it was looked for, the requests counted, a failed read classified. Must not know
//! indexes, filters or output (query.rs, fetch.rs).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as Atomic};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;

use crate::Error;
use audit_aws::error::{AwsError, ErrorKind};

/// Requests made and items read, for the progress line and `--stats`.
#[derive(Debug, Default)]
pub struct Stats {
    pub describe_table: AtomicU64,
    pub query: AtomicU64,
    pub batch_get_item: AtomicU64,
    /// Index items read (DynamoDB's ScannedCount: before the filters; what is paid for).
    pub items_read: AtomicU64,
    /// Items a lookup's index listed that the table no longer held when read (expired by TTL, or
    /// deleted).
    pub missing: AtomicU64,
}

impl Stats {
    /// Every request, whatever its operation.
    pub fn requests(&self) -> u64 {
        self.describe_table() + self.query() + self.batch_get_item()
    }
    pub fn describe_table(&self) -> u64 {
        self.describe_table.load(Atomic::Relaxed)
    }
    pub fn query(&self) -> u64 {
        self.query.load(Atomic::Relaxed)
    }
    pub fn batch_get_item(&self) -> u64 {
        self.batch_get_item.load(Atomic::Relaxed)
    }
    pub fn items_read(&self) -> u64 {
        self.items_read.load(Atomic::Relaxed)
    }
    pub fn missing(&self) -> u64 {
        self.missing.load(Atomic::Relaxed)
    }

    /// The `--stats` line: rows, requests by operation, items read, time, rate.
    pub fn line(&self, rows: u64, elapsed: std::time::Duration) -> String {
        let seconds = elapsed.as_secs_f64();
        let missing = match self.missing() {
            0 => String::new(),
            n => format!(", {n} listed by the index but no longer in the table"),
        };
        format!(
            "{rows} rows, {} requests: {} DescribeTable + {} Query + {} BatchGetItem, {} items read, {seconds:.2} s, {:.0} rows/s{missing}",
            self.requests(),
            self.describe_table(),
            self.query(),
            self.batch_get_item(),
            self.items_read(),
            rows as f64 / seconds.max(1e-9)
        )
    }
}

/// The audit table, read.
#[derive(Debug, Clone)]
pub struct Reader {
    pub(crate) client: Client,
    pub(crate) table: String,
    /// Where the table was looked for (endpoint or region), for error messages.
    pub(crate) location: String,
    pub stats: Arc<Stats>,
    /// Whether each shard reads its next page before the merge asks for it (throughput: a whole
    /// range), or only when asked (a page of rows for a person: one Query per shard when its
    /// first page holds enough).
    pub(crate) read_ahead: bool,
}

impl Reader {
    pub fn new(client: Client, table: impl Into<String>, location: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            location: location.into(),
            stats: Arc::default(),
            read_ahead: true,
        }
    }

    /// The same reader, each shard reading a further page only when the merge needs its rows
    /// (its first page is read at once, all shards concurrently).
    pub fn on_demand(mut self) -> Self {
        self.read_ahead = false;
        self
    }

    /// The DynamoDB client it reads with (the stack's tags are read with it too).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// A failed DynamoDB read, classified once (`audit_aws::error`): a table that is not there
    /// says where it was looked for; anything else is the classified error.
    pub(crate) fn failed<E>(&self, error: &SdkError<E>) -> Error
    where
        E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::error::Error + 'static,
    {
        self.failed_aws(AwsError::from_sdk(error))
    }

    /// A failed call's classified error: a missing table named with where it was looked for.
    pub(crate) fn failed_aws(&self, error: AwsError) -> Error {
        match error.kind {
            ErrorKind::NotFound => Error::TableNotFound {
                table: self.table.clone(),
                at: self.location.clone(),
            },
            _ => Error::Aws(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::config::http::HttpResponse;
    use aws_sdk_dynamodb::operation::batch_get_item::BatchGetItemError;
    use aws_sdk_dynamodb::operation::describe_table::DescribeTableError;
    use aws_sdk_dynamodb::operation::query::QueryError;
    use aws_sdk_dynamodb::types::error::{
        ProvisionedThroughputExceededException, ResourceNotFoundException,
    };
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::error::ErrorMetadata;

    use super::*;

    fn reader() -> Reader {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .build();
        Reader::new(
            Client::from_conf(config),
            "AuditMessages",
            "region eu-west-1",
        )
    }

    fn answer<E>(error: E) -> SdkError<E> {
        let status = 400.try_into().expect("400 is a status");
        SdkError::service_error(error, HttpResponse::new(status, SdkBody::empty()))
    }

    fn meta(code: &str, message: &str) -> ErrorMetadata {
        ErrorMetadata::builder().code(code).message(message).build()
    }

    fn not_found() -> ResourceNotFoundException {
        ResourceNotFoundException::builder()
            .message("Requested resource not found")
            .meta(meta(
                "ResourceNotFoundException",
                "Requested resource not found",
            ))
            .build()
    }

    #[test]
    fn a_missing_table_is_named_with_where_it_was_looked_for_by_every_read() {
        let reader = reader();
        // auditctl words it (commands/words.rs): "table AuditMessages not found at region
        // eu-west-1: set TABLE_NAME or --table, or deploy the stack".
        let described = answer(DescribeTableError::ResourceNotFoundException(not_found()));
        let queried = answer(QueryError::ResourceNotFoundException(not_found()));
        let fetched = answer(BatchGetItemError::ResourceNotFoundException(not_found()));
        for error in [
            reader.failed(&described),
            reader.failed(&queried),
            reader.failed(&fetched),
        ] {
            assert!(matches!(
                error,
                Error::TableNotFound { table, at } if table == "AuditMessages" && at == "region eu-west-1"
            ));
        }
    }

    #[test]
    fn any_other_failed_read_is_the_error_in_words() {
        let throttled = ProvisionedThroughputExceededException::builder()
            .message("slow down")
            .meta(meta("ProvisionedThroughputExceededException", "slow down"))
            .build();
        let error = answer(QueryError::ProvisionedThroughputExceededException(
            throttled,
        ));
        assert_eq!(
            reader().failed(&error).to_string(),
            "ProvisionedThroughputExceededException: slow down"
        );
        let denied = answer(DescribeTableError::generic(meta(
            "AccessDeniedException",
            "not authorized to perform: dynamodb:DescribeTable",
        )));
        assert_eq!(
            reader().failed(&denied).to_string(),
            "AccessDeniedException: not authorized to perform: dynamodb:DescribeTable"
        );
    }
}
