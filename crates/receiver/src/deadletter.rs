//! Owns the dead-letter port and the format of a dead-lettered message: the `failureReason` and
//! `failureContext` attributes that say why a message is there and who it was. Must not know
//! DynamoDB or batching; the SQS adapter and its in-memory twin are `audit_aws::sqs`'s.

use std::future::Future;

pub use audit_aws::sqs::{Attribute, DeadLetter, SendError};
use audit_aws::sqs::{MemoryDeadLetterQueue, SqsDeadLetterQueue, room};
pub use audit_model::context::{FAILURE_CONTEXT, FAILURE_REASON, FailureContext, MalformedContext};

/// SQS allows 10 message attributes; `failureReason` and `failureContext` leave room for 8 of
/// the original's.
pub const MAX_ORIGINAL_ATTRIBUTES: usize = room(2);

/// What a dead letter says about its failure: its `failureReason` and `failureContext`.
pub trait FailureAttributes {
    /// The reason code carried in `failureReason`.
    fn reason(&self) -> Option<&str>;
    /// The `failureContext` carried, parsed.
    fn context(&self) -> Option<FailureContext>;
}

impl FailureAttributes for DeadLetter {
    fn reason(&self) -> Option<&str> {
        self.string_attribute(FAILURE_REASON)
    }

    fn context(&self) -> Option<FailureContext> {
        self.string_attribute(FAILURE_CONTEXT)
            .and_then(|text| FailureContext::parse(text).ok())
    }
}

/// The port the batch dead-letters through. A send that fails leaves the record reported failed,
/// and SQS's own redrive policy still applies to it.
pub trait DeadLetterQueue: Send + Sync {
    fn send(&self, letter: &DeadLetter) -> impl Future<Output = Result<(), SendError>> + Send;
}

impl<Q: DeadLetterQueue> DeadLetterQueue for std::sync::Arc<Q> {
    fn send(&self, letter: &DeadLetter) -> impl Future<Output = Result<(), SendError>> + Send {
        (**self).send(letter)
    }
}

impl DeadLetterQueue for SqsDeadLetterQueue {
    fn send(&self, letter: &DeadLetter) -> impl Future<Output = Result<(), SendError>> + Send {
        SqsDeadLetterQueue::send(self, letter)
    }
}

impl DeadLetterQueue for MemoryDeadLetterQueue {
    fn send(&self, letter: &DeadLetter) -> impl Future<Output = Result<(), SendError>> + Send {
        MemoryDeadLetterQueue::send(self, letter)
    }
}
