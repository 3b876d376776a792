//! Owns an in-memory twin of the SQS dead-letter adapter for tests: it keeps what was sent,
//! refuses sends on request, and refuses what SQS would (no body, over `MAX_ATTRIBUTES`). Must
//! not know batching or what a dead letter means.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::attributes::MAX_ATTRIBUTES;
use super::deadletter::{DeadLetter, SendError};

#[derive(Debug, Default)]
pub struct MemoryDeadLetterQueue {
    sent: Mutex<Vec<DeadLetter>>,
    /// Errors returned, in order, by the next sends.
    scripted: Mutex<VecDeque<SendError>>,
    refuse_all: Mutex<Option<SendError>>,
}

impl MemoryDeadLetterQueue {
    pub fn new() -> Self {
        Self::default()
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
        // As SQS: no empty body, at most 10 attributes.
        if letter.body.is_empty() {
            return Err(SendError::NoBody);
        }
        if letter.attributes.len() > MAX_ATTRIBUTES {
            return Err(SendError::Refused(format!(
                "{} message attributes, over {MAX_ATTRIBUTES}",
                letter.attributes.len()
            )));
        }
        lock(&self.sent).push(letter.clone());
        Ok(())
    }
}

/// A poisoned lock only means a test panicked on purpose; the data is still usable.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
