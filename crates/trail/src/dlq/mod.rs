//! Owns working the dead-letter queue: listing its messages (and leaving them visible) and
//! redriving them to the source queue with their identity (`failureContext`) kept, and with the
//! original sender only as AWS attests it. Must not know DynamoDB (the receiver's role id is
//! given) nor the SDK (SQS is the port `audit_aws::sqs::Sqs`); the message format is the
//! library's (`deadletter.rs`), not restated here (docs/architecture.md "The crates", trail).
//!
//! `message.rs` what one message says; `record.rs` its columns; `list.rs` listing; `redrive.rs`
//! redriving; `held.rs` what a command holds. Here: the queue, one receive, the release.

mod held;
mod list;
mod message;
mod record;
mod redrive;
#[cfg(test)]
mod tests;

use audit_aws::error::{AwsError, ErrorKind};
use audit_aws::sqs::{Depth, MAX_BATCH, Receive, Sqs, SqsClient, Visibility};

use crate::Error as TrailError;
use held::Held;

pub use list::{Listing, Shortfall};
pub use message::{DlqMessage, OriginalSender};
pub use record::{Listed, ListedWithBody};
pub use redrive::{DroppedClaim, RedriveOptions, RedriveReport};

/// How long a received message stays invisible while a command runs. Every message is made
/// visible again at the end (visibility 0); this only bounds how long one stays hidden if the
/// command is killed.
const HOLD_SECONDS: i32 = 120;
/// Receives in a row that bring nothing new before a listing still short of the queue's count
/// gives up. One is not enough: SQS may answer empty while messages remain, and its counts are
/// approximate.
const EMPTY_RECEIVES: u32 = 3;

/// Why a listing stopped receiving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Receives in a row brought nothing new.
    Empty,
    /// `bound` messages held.
    Bound,
    /// `LIST_SECONDS` spent.
    Time,
}

/// The dead-letter queue, worked through SQS (`Q`: the SDK's client, or a twin in tests).
#[derive(Debug, Clone)]
pub struct DeadLetterQueue<Q = SqsClient> {
    sqs: Q,
    url: String,
    /// Distinct messages read at most in one command.
    pub bound: usize,
}

impl DeadLetterQueue<SqsClient> {
    /// The queue at `url`, through the SDK's client.
    pub fn new(client: aws_sdk_sqs::Client, url: impl Into<String>) -> Self {
        Self::with_sqs(SqsClient::new(client), url)
    }
}

impl<Q: Sqs> DeadLetterQueue<Q> {
    /// The queue at `url`, through `sqs`.
    pub fn with_sqs(sqs: Q, url: impl Into<String>) -> Self {
        Self {
            sqs,
            url: url.into(),
            bound: 100_000,
        }
    }

    /// What it talks to SQS through.
    pub fn sqs(&self) -> &Q {
        &self.sqs
    }

    /// The queue's approximate counts right now.
    async fn depth(&self) -> Result<Depth, TrailError> {
        self.sqs
            .depth(&self.url)
            .await
            .map_err(|e| self.queue_error(e))
    }

    /// One receive of up to 10 messages, hidden for `HOLD_SECONDS`, with every attribute. A
    /// one-second wait (long polling) asks every SQS server, so an empty answer usually means
    /// none visible; `list` still checks against the queue's count.
    async fn receive(&self) -> Result<Vec<DlqMessage>, TrailError> {
        let request = Receive {
            max: MAX_BATCH,
            visibility_seconds: HOLD_SECONDS,
            wait_seconds: 1,
        };
        let received = self
            .sqs
            .receive(&self.url, request)
            .await
            .map_err(|e| self.queue_error(e))?;
        Ok(received.into_iter().map(DlqMessage::from).collect())
    }

    /// Makes every held message visible again at once (ChangeMessageVisibilityBatch, 10 a call).
    async fn release(&self, held: &Held) -> Result<(), TrailError> {
        let entries: Vec<Visibility> = held
            .handles
            .values()
            .map(|handle| Visibility {
                receipt_handle: handle.clone(),
                seconds: 0,
            })
            .collect();
        let mut failed = 0;
        for chunk in entries.chunks(MAX_BATCH) {
            failed += self
                .sqs
                .change_visibility(&self.url, chunk)
                .await
                .map_err(|e| self.queue_error(e))?;
        }
        if failed > 0 {
            return Err(TrailError::NotReleased {
                failed,
                seconds: HOLD_SECONDS,
            });
        }
        Ok(())
    }

    fn queue_error(&self, error: AwsError) -> TrailError {
        match error.kind {
            ErrorKind::NotFound => TrailError::QueueNotFound {
                url: self.url.clone(),
            },
            ErrorKind::Denied => TrailError::QueueDenied {
                url: self.url.clone(),
                detail: error.text,
            },
            _ => TrailError::Aws(error),
        }
    }
}
