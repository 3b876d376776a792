//! Owns an in-memory twin of the SQS dead-letter adapter for tests: it keeps what was sent,
//! refuses sends on request, refuses what SQS would (no body, over `MAX_ATTRIBUTES`, over the
//! queue's size counted as SQS counts it), and can answer late, after it kept the message, as
//! SQS does when its answer is slow. Must not know batching or what a dead letter means.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use super::attributes::MAX_ATTRIBUTES;
use super::deadletter::{DeadLetter, SendError};

#[derive(Debug, Default)]
pub struct MemoryDeadLetterQueue {
    sent: Mutex<Vec<DeadLetter>>,
    /// Errors returned, in order, by the next sends.
    scripted: Mutex<VecDeque<SendError>>,
    refuse_all: Mutex<Option<SendError>>,
    /// How long after keeping a message the answer comes.
    answer_delay: Mutex<Duration>,
    /// The queue's `MaximumMessageSize`, when it is smaller than SQS's largest.
    max_message_bytes: Mutex<Option<usize>>,
}

/// SQS's largest message, and the size of a queue that sets no other (as moto's).
pub const MAX_MESSAGE_BYTES: usize = 1_048_576;

impl MemoryDeadLetterQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Each send keeps its message at once and answers `delay` later: a sender that stops
    /// waiting before then has a message in the queue that it was not told of.
    pub fn with_answer_delay(self, delay: Duration) -> Self {
        *lock(&self.answer_delay) = delay;
        self
    }

    /// The queue takes messages up to `limit` bytes, counted as SQS counts them (the body and
    /// every attribute's name, type and value: `DeadLetter::size`), and refuses larger ones as
    /// SQS does, naming the limit.
    pub fn with_max_message_bytes(self, limit: usize) -> Self {
        *lock(&self.max_message_bytes) = Some(limit);
        self
    }

    /// The next sends fail with these errors, in order.
    pub fn fail_next(&self, errors: impl IntoIterator<Item = SendError>) {
        lock(&self.scripted).extend(errors);
    }

    /// Every send fails with this error (a queue that does not exist, or denies access).
    pub fn refuse_all(&self, error: SendError) {
        *lock(&self.refuse_all) = Some(error);
    }

    /// What was sent, in order.
    pub fn sent(&self) -> Vec<DeadLetter> {
        lock(&self.sent).clone()
    }

    /// Keeps the letter, or fails as scripted or as SQS would.
    pub async fn send(&self, letter: &DeadLetter) -> Result<(), SendError> {
        if let Some(error) = lock(&self.refuse_all).clone() {
            return Err(error);
        }
        if let Some(error) = lock(&self.scripted).pop_front() {
            return Err(error);
        }
        let limit = lock(&self.max_message_bytes).unwrap_or(MAX_MESSAGE_BYTES);
        if let Some(error) = refusal(letter, limit) {
            return Err(error);
        }
        lock(&self.sent).push(letter.clone());
        let delay = *lock(&self.answer_delay);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Ok(())
    }
}

/// What SQS refuses of a message, as the twins refuse it: no empty body, at most
/// `MAX_ATTRIBUTES` attributes, nothing over the queue's size (`limit`, as `DeadLetter::size`).
pub(super) fn refusal(letter: &DeadLetter, limit: usize) -> Option<SendError> {
    if letter.body.is_empty() {
        return Some(SendError::NoBody);
    }
    if letter.attributes.len() > MAX_ATTRIBUTES {
        return Some(SendError::Refused(format!(
            "{} message attributes, over {MAX_ATTRIBUTES}",
            letter.attributes.len()
        )));
    }
    (letter.size() > limit).then(|| SendError::TooLarge {
        limit: Some(limit),
        text: format!(
            "InvalidParameterValue: One or more parameters are invalid. Reason: Message must be shorter than {limit} bytes."
        ),
    })
}

/// A poisoned lock only means a test panicked on purpose; the data is still usable.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
