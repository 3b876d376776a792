//! Owns the outcome of one batch: which records Lambda must deliver again (the first failed one
//! and every one after it), why, and what was archived, found archived, expired or tampered
//! with. Must not know how it is logged or answered.

use chrono::{DateTime, Utc};

use audit_aws::error::AwsError;

use crate::attest::Foreign;
use crate::budget::StepError;
use crate::event::RecordError;
use crate::words;

/// Why the batch stopped short.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// A record that can never be archived as it is; it and those after it are failed, and after
    /// the mapping's retries Lambda sends it to the on-failure destination.
    #[error("record {sequence_number} cannot be archived: {error}")]
    Unarchivable {
        sequence_number: String,
        error: RecordError,
    },
    #[error("{step}: {}", words::Bucket(error))]
    Bucket { step: Step, error: AwsError },
    #[error("{0}: the invocation's deadline came first")]
    Deadline(Step),
    /// A previous attempt's object may still land (its marker's `writeBy` is after the deadline):
    /// nothing is written until it has or never can.
    #[error("a previous attempt's write may still be in flight until {0}")]
    PreviousWriteInFlight(DateTime<Utc>),
    /// The marker key held a different marker (someone else writes under `state/`, or an earlier
    /// attempt's marker write landed after its time-out): the retry reads it and moves on.
    #[error("marker {0} already holds another attempt's marker")]
    MarkerConflict(String),
    /// A name the archiver meant to write held other bytes (a 412 whose SHA-256 is neither what
    /// it meant to write nor what a marker of the run listed there), or the name was void: the
    /// records fail and the retry writes under the next attempt number.
    #[error("archive object {0} already holds other bytes")]
    ArchiveConflict(String),
    /// A marker that cannot be read (not written by this archiver).
    #[error("marker {key} cannot be read: {error}")]
    BadMarker { key: String, error: String },
    /// The marker took so long that an object's write would start after its period's slack.
    #[error("the marker took longer than the write-start slack; objects not written")]
    SlowMarker,
    /// The record is in no object that was written (a write that was not attempted).
    #[error("the record's object was not written")]
    Unwritten,
    /// Compressing the objects failed (out of memory).
    #[error("encoding failed: {0}")]
    Encoding(String),
}

/// The step a bucket failure happened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    ReadMarker,
    CheckObject,
    WriteMarker,
    WriteObject,
    WriteCarry,
    WriteVoid,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::ReadMarker => "reading the marker",
            Self::CheckObject => "checking an object",
            Self::WriteMarker => "writing the marker",
            Self::WriteObject => "writing an object",
            Self::WriteCarry => "writing the carried marker",
            Self::WriteVoid => "writing a void marker",
        })
    }
}

impl Failure {
    pub fn from_step(step: Step, error: StepError) -> Self {
        match error {
            StepError::Bucket(error) => Self::Bucket { step, error },
            StepError::Deadline => Self::Deadline(step),
        }
    }

    /// A short code for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unarchivable { error, .. } => error.code(),
            Self::Bucket { .. } => "bucket",
            Self::Deadline(_) => "deadline",
            Self::PreviousWriteInFlight(_) => "previous_write_in_flight",
            Self::MarkerConflict(_) => "marker_conflict",
            Self::ArchiveConflict(_) => "archive_conflict",
            Self::BadMarker { .. } => "bad_marker",
            Self::SlowMarker => "slow_marker",
            Self::Unwritten => "unwritten",
            Self::Encoding(_) => "encoding",
        }
    }
}

/// A tamper event found in the batch (not archived before), for the alarm's log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TamperEvent {
    pub sequence_number: String,
    pub event_name: &'static str,
    /// The item's key as plain JSON (`{"auditTime":…,"messageId":…}`): never the audit text.
    pub keys: String,
}

/// Something the archiver read or found at a name it meant to write that is not what it claims
/// (`ArchiveConflict`): a marker that does not parse, a listed object whose bytes, lines or
/// marker are not what the listing says, a name taken by other bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub key: String,
    pub reason: String,
}

/// An object this batch wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenObject {
    pub key: String,
    pub events: usize,
    pub bytes: usize,
}

/// The outcome of one batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchReport {
    /// Every record's sequence number, in order.
    pub sequence_numbers: Vec<String>,
    /// The first record Lambda must deliver again: it and every later one are reported failed.
    pub failed_from: Option<usize>,
    pub failure: Option<Failure>,
    /// Events written to the archive by this batch (trail and tamper).
    pub archived: usize,
    /// Events this batch found already archived (a retry).
    pub already_archived: usize,
    /// TTL deletions.
    pub expired: usize,
    /// MODIFY and user REMOVE records not archived before this batch.
    pub tampered: Vec<TamperEvent>,
    pub objects: Vec<WrittenObject>,
    /// Keys found not to be what they claim (the `ArchiveConflict` metric).
    pub conflicts: Vec<Conflict>,
    /// Void markers this batch wrote (objects missing after their marker's writeBy).
    pub voided: Vec<String>,
    /// The oldest `ApproximateCreationDateTime` of the batch.
    pub oldest_created: Option<DateTime<Utc>>,
    /// INSERTs of items the receiver did not write (their lines marked `notAttested`), among
    /// the records read; counted again when Lambda delivers them again.
    pub foreign: Vec<Foreign>,
}

impl BatchReport {
    /// The sequence numbers reported failed, in order.
    pub fn failed(&self) -> &[String] {
        match self.failed_from {
            Some(from) => self.sequence_numbers.get(from..).unwrap_or_default(),
            None => &[],
        }
    }

    pub fn bytes_written(&self) -> usize {
        self.objects.iter().map(|o| o.bytes).sum()
    }
}
