//! Owns the dead-letter decision of a failed record: dead-letter it now (permanent, or the last
//! receive) or report it for SQS to deliver again; a send that fails leaves it reported. Must not
//! know how the failure happened.

use aws_lambda_events::sqs::SqsMessage;
use chrono::Utc;
use tokio::time::Instant;

use super::delivery::Received;
use super::letter::{letter, shrink_to};
use super::{BatchSettings, Failure, Outcome, SendCutoffs};
use crate::deadletter::{DeadLetter, DeadLetterQueue, SendError};

/// A failed record: dead-lettered when a dead-letter queue is set and the failure is permanent,
/// or transient on the last receive; otherwise, or when the send fails, reported failed. A send
/// starts only before `cutoffs.start` and is waited for until `cutoffs.end` (`SendCutoffs`).
pub(super) async fn settle<Q: DeadLetterQueue>(
    dead_letters: Option<&Q>,
    settings: &BatchSettings,
    record: &SqsMessage,
    delivery: &Received<'_>,
    failure: Failure,
    cutoffs: SendCutoffs,
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
    let sent = match send(queue, &letter, cutoffs).await {
        // Refused as over the queue's size: nothing is in the queue. Sent once more, fitted to
        // the size SQS named (`letter::shrink_to`), so that the record ends there once with its
        // reason; when even that does not fit, it stays on SQS's path.
        Err(SendError::TooLarge { limit, text }) => {
            let fitted = shrink_to(&letter, limit.unwrap_or(0));
            let fits = limit.map_or(fitted.size() < letter.size(), |l| fitted.size() <= l);
            if fits {
                send(queue, &fitted, cutoffs).await
            } else {
                Err(SendError::TooLarge { limit, text })
            }
        }
        other => other,
    };
    match sent {
        Ok(()) => (Outcome::DeadLettered(failure), None),
        Err(error) => (Outcome::Failed(failure), Some(error)),
    }
}

/// One send, started only before `cutoffs.start` and waited for until `cutoffs.end`. Too late to
/// wait for an answer, it is not started: nothing is in the queue, and the record's next receive
/// (or SQS's move after its last) makes the one copy.
async fn send<Q: DeadLetterQueue>(
    queue: &Q,
    letter: &DeadLetter,
    cutoffs: SendCutoffs,
) -> Result<(), SendError> {
    if cutoffs.start.is_some_and(|start| Instant::now() > start) {
        return Err(SendError::Deadline);
    }
    match cutoffs.end {
        Some(end) => tokio::time::timeout_at(end, queue.send(letter))
            .await
            .unwrap_or(Err(SendError::Unanswered)),
        None => queue.send(letter).await,
    }
}
