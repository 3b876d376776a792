//! Owns verify: the proof that the archive (and, given a table, the table) still says what the
//! signed, chained digests say (docs/auditctl.md "Proving the trail unchanged: verify"). Must not
//! know the SDK, flags or words for people: the archive (`crate::archive`), the digest key and
//! the table are ports (`ports`) with adapters (`kms` here; the table's is the caller's) and,
//! for the tests, in-memory twins (`ports::memory`; the archive's is `crate::archive::S3Archive`
//! over `audit_aws`'s in-memory bucket, written and sealed in the tests by the archiver itself).
//!
//! The flow: `walk` goes through the range's periods in order; for each, `digests` loads and
//! checks the period's digest (versions, signature with `key`, fields, link to the previous
//! period's), `walk` checks the objects it lists (`content` reads each version's bytes) against
//! every version S3 holds in the period's partitions, and `table` compares the archived events
//! with the table; `log` checks the transparency log of the digests that carry its tree, from
//! the lines `content` hashes as they pass; `seen` remembers each record read (a fingerprint and
//! its first object) to find one archived twice. Every finding is a `report::Problem`, printed
//! as it is found.

pub mod attest;
pub mod content;
pub mod digests;
pub mod key;
pub mod kms;
pub mod log;
pub mod ports;
pub mod report;
pub mod seen;
pub mod table;
pub mod walk;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use audit_model::archive::PeriodLength;
use chrono::{DateTime, Utc};

use audit_model::range::TimeRange;

/// How long after a period may be sealed (`Period::sealable_at`) its digest may still be absent
/// without being missing: the archiver seals on a schedule (every 5 minutes in AWS), and a run can
/// fail and be retried by the next. The default grace is this plus one period.
pub const SEAL_GRACE_SECONDS: i64 = 600;

/// How often the archiver's sealing runs (the template's `DigestSchedule`: every 5 minutes; the
/// local stack's schedule runs every few seconds, within one of its short periods): a period that
/// may be sealed from `sealable_at` on is sealed by the next run, so by `sealable_at` plus this or
/// one period, whichever is shorter (`Period::sealed_by`).
pub const SEAL_SCHEDULE_SECONDS: i64 = 300;

/// When a period that may be sealed from `sealable_at` on is sealed by the archiver's next
/// scheduled run (docs/archive.md "Digests").
pub fn sealed_by(period: &audit_model::archive::Period) -> i64 {
    period.sealable_at() + SEAL_SCHEDULE_SECONDS.min(i64::from(period.length.seconds()))
}

/// The default of `--archive-lag`: an item is archived by the archiver within this time after the
/// function wrote it (its `receivedAt`): the stream and the archiver's batching and retries.
pub const ARCHIVE_LAG_SECONDS: i64 = 900;

/// How long DynamoDB Streams keeps a record: 24 hours.
pub const STREAM_RETENTION_SECONDS: i64 = 24 * 3600;

/// How long after its `receivedAt` an item can still be archived, however late: the template's
/// mapping (`AuditArchiverFunction`'s stream event) has `MaximumRecordAgeInSeconds: -1`, so a
/// failing batch is retried (`ArchiveRetryAttempts` times, bisected) for as long as the stream
/// holds its records, 24 hours after they were written; the last attempt then archives within
/// the usual lag (`ARCHIVE_LAG_SECONDS`: the invocation, its writes, clock skew). An item found
/// in a period after `--archive-lag` but within this bound is counted as archived late, not a
/// problem. A template test keeps the mapping's settings to what this assumes.
pub const LATE_ARCHIVE_SECONDS: i64 = STREAM_RETENTION_SECONDS + ARCHIVE_LAG_SECONDS;

/// How far the archiver's clock may be behind the function's: an event may be archived in a
/// period that starts up to this much before its `receivedAt`.
pub const CLOCK_SKEW_SECONDS: i64 = 60;

/// What one run of `verify` checks, and against what.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The archive bucket (digests name it).
    pub bucket: String,
    pub length: PeriodLength,
    /// The events' times asked for (both included), as `auditctl query` reads them.
    pub range: TimeRange,
    pub now: DateTime<Utc>,
    /// Seconds after `sealable_at` during which a period without a digest is "not sealed yet".
    pub grace_seconds: i64,
    /// Seconds after `receivedAt` within which an item is archived (`--table`).
    pub lag_seconds: i64,
    /// Object reads in flight at most.
    pub concurrency: usize,
    /// The receiver's attestation key, when given: every archived trail line (and, with the
    /// table, every item of the range) is checked against it (`item not attested`).
    pub attestations: Option<Arc<attest::Attestations>>,
}

impl Settings {
    /// The default grace for a period length: `SEAL_GRACE_SECONDS` plus one period.
    pub fn default_grace(length: PeriodLength) -> i64 {
        SEAL_GRACE_SECONDS + i64::from(length.seconds())
    }
}
