//! Owns what can go wrong reading the trail or working the dead-letter queue, as types
//! (docs/architecture.md "The crates": a library owns its errors as types, the binary words them).
//! Must not know flags, environment variables or the words a person reads (auditctl's words.rs).

use audit_aws::{AwsError, ErrorKind};

/// A read of the table or a call on the dead-letter queue that failed. Each variant says what
/// and where; `auditctl` adds the fix in words.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The table is not there: `at` is where it was looked for (endpoint or region).
    #[error("table {table} not found at {at}")]
    TableNotFound { table: String, at: String },
    /// The table has no `byAuditTime` index.
    #[error("table {table} has no index {index}")]
    NoTimeIndex { table: String, index: String },
    /// The table has no index for lookups by `field`.
    #[error("table {table} has no index {index} for lookups by {field}")]
    NoLookupIndex {
        table: String,
        index: String,
        field: &'static str,
    },
    /// The index is being built (or removed): `status` is DynamoDB's.
    #[error("index {index} of table {table} is {status}, not ACTIVE")]
    IndexNotActive {
        table: String,
        index: String,
        status: String,
    },
    /// BatchGetItem still left `left` of `asked` keys unprocessed after `tries` requests.
    #[error(
        "BatchGetItem on table {table} left {left} of {asked} items unread after {tries} tries"
    )]
    Unprocessed {
        table: String,
        left: usize,
        asked: usize,
        tries: u32,
    },
    /// The dead-letter queue is not there.
    #[error("queue {url} not found")]
    QueueNotFound { url: String },
    /// The dead-letter queue refused the caller.
    #[error("not allowed to work the dead-letter queue {url}: {detail}")]
    QueueDenied { url: String, detail: String },
    /// Messages held by a command that could not be made visible again; they will be after
    /// `seconds`.
    #[error("{failed} message(s) could not be made visible again; they will be after {seconds} s")]
    NotReleased { failed: usize, seconds: i32 },
    /// A request that could not be built (the SDK's builder refused it).
    #[error("{0}")]
    Request(String),
    /// Any other failed AWS call, classified once (`audit_aws::error`).
    #[error(transparent)]
    Aws(AwsError),
}

impl Error {
    /// The error's kind, short: what failed, or for any other AWS call its class
    /// (`audit_aws::ErrorKind`).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TableNotFound { .. } => "table_not_found",
            Self::NoTimeIndex { .. } | Self::NoLookupIndex { .. } => "no_index",
            Self::IndexNotActive { .. } => "index_not_active",
            Self::Unprocessed { .. } => "unprocessed",
            Self::QueueNotFound { .. } => "queue_not_found",
            Self::QueueDenied { .. } => "denied",
            Self::NotReleased { .. } => "not_released",
            Self::Request(_) => "request",
            Self::Aws(error) => match error.kind {
                ErrorKind::NotFound => "not_found",
                ErrorKind::Denied => "denied",
                ErrorKind::Throttled => "throttled",
                ErrorKind::Unavailable => "unavailable",
                ErrorKind::TimedOut => "timed_out",
                ErrorKind::Rejected => "rejected",
            },
        }
    }
}
