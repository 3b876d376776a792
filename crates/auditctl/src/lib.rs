//! Owns reading the trail and working the dead-letter queue for operators (`auditctl`): the time
//! range, the shard fan-out over the `byAuditTime` index, the k-way merge, output formats, the
//! dead-letter list and redrive, what the stack's table says of the stack in its tags, and the
//! proof that the archive and the table were not changed (`verify`). Must not know the Lambda runtime or batching; it reuses the library's item names,
//! bucket rule, `failureContext` format and digest format rather than restating them.

pub mod access;
pub mod dlq;
pub mod fetch;
pub mod filter;
pub mod item;
pub mod merge;
pub mod output;
pub mod prove;
pub mod query;
pub mod range;
pub mod repair;
pub mod stack;
pub mod tlog;
pub mod ui;
pub mod verify;
pub mod witness;

/// What went wrong, each with the fix in words. `auditctl` exits 1 on these.
#[derive(Debug, thiserror::Error)]
pub enum TrailError {
    #[error("table {table} not found at {at}: set TABLE_NAME or --table, or deploy the stack")]
    TableNotFound { table: String, at: String },
    #[error(
        "table {table} has no index {index} (the trail is read in time order from it): deploy the current template.yaml, which adds it"
    )]
    NoTimeIndex { table: String, index: String },
    #[error(
        "table {table} has no index {index} (lookups by {field} read it): deploy the current template.yaml, which adds it"
    )]
    NoLookupIndex {
        table: String,
        index: String,
        field: &'static str,
    },
    #[error(
        "index {index} of table {table} is {status}, not ACTIVE: wait until it is built (aws dynamodb describe-table --table-name {table} shows IndexStatus), then run this again"
    )]
    IndexNotActive {
        table: String,
        index: String,
        status: String,
    },
    #[error("no {what} URL: set {env} or {flag} (stack output {output})")]
    NoQueueUrl {
        what: &'static str,
        env: &'static str,
        flag: &'static str,
        output: &'static str,
    },
    #[error("queue {url} not found: check {env} or {flag}, or deploy the stack")]
    QueueNotFound {
        url: String,
        env: &'static str,
        flag: &'static str,
    },
    /// The dead-letter queue refused the caller: it is the operator's.
    #[error(
        "not allowed to work the dead-letter queue {url}: {detail}; listing and redriving it need AuditOperatorPolicy (AuditReaderPolicy reads the trail only)"
    )]
    QueueDenied { url: String, detail: String },
    /// A setting `verify` needs, absent.
    #[error(
        "{var} is not set: export it from the stack's outputs ({output}) or .local/stack.env, or pass {flag}"
    )]
    NotSet {
        var: &'static str,
        flag: &'static str,
        output: &'static str,
    },
    #[error(
        "archive bucket {bucket} not found at {at}: check ARCHIVE_BUCKET or --bucket (stack output AuditArchiveBucketName)"
    )]
    BucketNotFound { bucket: String, at: String },
    #[error(
        "digest key {key} not found at {at}: check DIGEST_KEY_ID or --key-id (stack output AuditDigestKeyArn)"
    )]
    KeyNotFound { key: String, at: String },
    #[error(
        "digest key {key} cannot check the digests: {detail}; DIGEST_KEY_ID or --key-id must name the stack's AuditDigestKey (stack output AuditDigestKeyArn)"
    )]
    KeyUnsuitable { key: String, detail: String },
    /// `verify` was given another digest period than the archiver's (its digests say theirs).
    #[error(
        "the digest {key}, signed by the digest key, is of {found} s periods, not {given}: set DIGEST_PERIOD_SECONDS or --period-seconds to the archiver's ({found})"
    )]
    PeriodMismatch { key: String, found: u32, given: u32 },
    #[error("{0}")]
    Aws(String),
    /// A listing that could not get every message: printed what it got, then this.
    #[error(transparent)]
    Incomplete(#[from] dlq::Shortfall),
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
    /// The access event could not be sent: nothing was read.
    #[error(transparent)]
    Access(#[from] access::AccessError),
    /// The stack's table's tags could not be read.
    #[error(transparent)]
    Tags(#[from] stack::TagError),
    /// The archiver did not repair (`archive repair`).
    #[error(transparent)]
    Repair(#[from] repair::RepairFailure),
    /// A proof of the transparency log could not be made (`prove`, `consistency`).
    #[error(transparent)]
    Prove(#[from] prove::ProveError),
}
