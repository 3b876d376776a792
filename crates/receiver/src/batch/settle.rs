//! Owns the dead-letter decision of a failed record: dead-letter it now (permanent, or the last
//! receive) or report it for SQS to deliver again; a send that fails leaves it reported. Must not
//! know how the failure happened.

use aws_lambda_events::sqs::SqsMessage;
use chrono::Utc;
use tokio::time::Instant;

use super::delivery::Received;
use super::letter::letter;
use super::{BatchSettings, Failure, Outcome};
use crate::deadletter::{DeadLetterQueue, SendError};

/// A failed record: dead-lettered when a dead-letter queue is set and the failure is permanent,
/// or transient on the last receive; otherwise, or when the send fails, reported failed.
pub(super) async fn settle<Q: DeadLetterQueue>(
    dead_letters: Option<&Q>,
    settings: &BatchSettings,
    record: &SqsMessage,
    delivery: &Received<'_>,
    failure: Failure,
    cutoff: Option<Instant>,
) -> (Outcome, Option<SendError>) {
    let Some(queue) = dead_letters else {
        return (Outcome::Failed(failure), None);
    };
    let last_receive = delivery
        .receive_count
        .is_some_and(|n| n >= settings.max_receive_count);
    if failure.is_transient() && !last_receive {
        return (Outcome::Failed(failure), None);
    }
    let letter = match letter(record, delivery, &failure, Utc::now()) {
        Ok(letter) => letter,
        Err(error) => return (Outcome::Failed(failure), Some(error)),
    };
    let left = cutoff.map(|c| c.saturating_duration_since(Instant::now()));
    let sent = match left {
        Some(left) if left.is_zero() => Err(SendError::Deadline),
        Some(left) => tokio::time::timeout(left, queue.send(&letter))
            .await
            .unwrap_or(Err(SendError::Deadline)),
        None => queue.send(&letter).await,
    };
    match sent {
        Ok(()) => (Outcome::DeadLettered(failure), None),
        Err(error) => (Outcome::Failed(failure), Some(error)),
    }
}
