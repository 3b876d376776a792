//! Owns the port through which a program works a queue (receive, send, delete, change
//! visibility, the queue's counts) and SQS's shapes for it. Must not know why a message is read.
//!
//! `SqsClient` (`client.rs`) is the production side; `MemorySqs` (`memory_queues.rs`) is its
//! twin for tests. Generic, not `dyn`, as the DynamoDB port (docs/architecture.md).

use std::collections::BTreeMap;
use std::future::Future;

use super::attributes::Attribute;
use super::deadletter::DeadLetter;
use crate::error::AwsError;

/// SQS's most messages in one receive, and entries in one batch call.
pub const MAX_BATCH: usize = 10;

/// One receive: how many at most (up to `MAX_BATCH`), how long they stay hidden, and how long
/// it waits for one (long polling).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receive {
    pub max: usize,
    pub visibility_seconds: i32,
    pub wait_seconds: i32,
}

/// A message as received, with every message attribute and the system attributes a reader uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub message_id: String,
    /// This receive's handle: only the latest one deletes it or changes its visibility.
    pub receipt_handle: String,
    pub body: String,
    pub attributes: BTreeMap<String, Attribute>,
    pub system: System,
}

/// The system attributes SQS sets on a message, as far as a reader uses them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct System {
    /// Who sent it, as SQS attests it (a user id, or `<RoleId>:<session>`).
    pub sender_id: Option<String>,
    /// When it was sent, in milliseconds since the epoch, as SQS writes it.
    pub sent_timestamp: Option<String>,
    pub approximate_receive_count: Option<u64>,
    /// Set by SQS when it moves a message to a dead-letter queue: the queue it came from.
    pub dead_letter_queue_source_arn: Option<String>,
    /// FIFO only.
    pub message_group_id: Option<String>,
}

/// A queue's approximate counts (GetQueueAttributes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Depth {
    pub visible: u64,
    /// Received and not yet deleted nor visible again: in flight with some consumer.
    pub in_flight: u64,
    /// Sent with a delay that has not ended.
    pub delayed: u64,
}

impl Depth {
    /// Every message the queue holds.
    pub fn total(&self) -> u64 {
        self.visible + self.in_flight + self.delayed
    }
}

/// A new visibility timeout for the message a receipt handle names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visibility {
    pub receipt_handle: String,
    pub seconds: i32,
}

/// What a program needs of SQS to work a queue, by the queue's URL.
pub trait Sqs: Send + Sync {
    /// One ReceiveMessage, with every message attribute and system attribute.
    fn receive(
        &self,
        queue_url: &str,
        request: Receive,
    ) -> impl Future<Output = Result<Vec<Received>, AwsError>> + Send;

    /// One SendMessage: the body, the attributes and, for a FIFO queue, the group and
    /// deduplication id.
    fn send(
        &self,
        queue_url: &str,
        message: &DeadLetter,
    ) -> impl Future<Output = Result<(), AwsError>> + Send;

    /// One DeleteMessage.
    fn delete(
        &self,
        queue_url: &str,
        receipt_handle: &str,
    ) -> impl Future<Output = Result<(), AwsError>> + Send;

    /// One ChangeMessageVisibilityBatch of at most `MAX_BATCH` entries; how many failed.
    fn change_visibility(
        &self,
        queue_url: &str,
        entries: &[Visibility],
    ) -> impl Future<Output = Result<usize, AwsError>> + Send;

    /// The queue's approximate counts.
    fn depth(&self, queue_url: &str) -> impl Future<Output = Result<Depth, AwsError>> + Send;
}
