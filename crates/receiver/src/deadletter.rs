//! Owns the dead-letter port and the format of a dead-lettered message: the `failureReason` and
//! `failureContext` attributes that say why a message is there and who it was. Must not know
//! DynamoDB or batching; the SQS adapter lives in `deadletter/sqs.rs`, a twin for tests in
//! `deadletter/memory.rs`.

pub mod memory;
pub mod sqs;

use std::collections::BTreeMap;
use std::future::Future;

pub use audit_model::context::{FAILURE_CONTEXT, FAILURE_REASON, FailureContext, MalformedContext};

/// SQS allows 10 message attributes; `failureReason` and `failureContext` leave room for 8 of
/// the original's.
pub const MAX_ORIGINAL_ATTRIBUTES: usize = 8;

/// One message attribute, as SQS carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// `String`, `Number`, `Binary`, or one of those with a custom suffix (`String.json`).
    pub data_type: String,
    pub string_value: Option<String>,
    pub binary_value: Option<Vec<u8>>,
}

impl Attribute {
    pub fn string(value: impl Into<String>) -> Self {
        Self {
            data_type: "String".into(),
            string_value: Some(value.into()),
            binary_value: None,
        }
    }
}

/// What is sent to the dead-letter queue for one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The original body, byte for byte.
    pub body: String,
    /// The original attributes (without an older `failureReason`/`failureContext`) plus the two
    /// new ones.
    pub attributes: BTreeMap<String, Attribute>,
    /// FIFO only: the record's `MessageGroupId`.
    pub group_id: Option<String>,
    /// FIFO only: the original SQS message id.
    pub deduplication_id: Option<String>,
}

impl DeadLetter {
    /// The reason code carried in `failureReason`.
    pub fn reason(&self) -> Option<&str> {
        self.attributes
            .get(FAILURE_REASON)
            .and_then(|a| a.string_value.as_deref())
    }

    /// The `failureContext` carried, parsed.
    pub fn context(&self) -> Option<FailureContext> {
        self.attributes
            .get(FAILURE_CONTEXT)
            .and_then(|a| a.string_value.as_deref())
            .and_then(|text| FailureContext::parse(text).ok())
    }
}

/// Why a dead-letter send did not happen. The record is then reported failed, and SQS's own
/// redrive policy still applies to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    #[error("the dead-letter queue does not exist: {0}")]
    QueueMissing(String),
    #[error("the dead-letter queue refused the message: {0}")]
    Refused(String),
    #[error("the dead-letter queue could not be reached: {0}")]
    Unavailable(String),
    #[error("no time left before the deadline to send to the dead-letter queue")]
    Deadline,
    #[error(
        "the record has {0} message attributes; with failureReason and failureContext that is over SQS's 10"
    )]
    TooManyAttributes(usize),
    #[error("the record has no body, which SQS cannot carry")]
    NoBody,
}

/// The port the batch dead-letters through.
pub trait DeadLetterQueue: Send + Sync {
    fn send(&self, letter: &DeadLetter) -> impl Future<Output = Result<(), SendError>> + Send;
}

impl<Q: DeadLetterQueue> DeadLetterQueue for std::sync::Arc<Q> {
    fn send(&self, letter: &DeadLetter) -> impl Future<Output = Result<(), SendError>> + Send {
        (**self).send(letter)
    }
}
