//! Owns the retry policy of one write: attempts, backoff with jitter, the invocation's shared
//! retry budget, and the attempt timeout. Must not know what is written or where failures go.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::{Failure, Outcome};
use crate::store::{AuditStore, PutOutcome, StoreError};
use audit_model::message::AuditItem;

/// Retries of throttling, 5xx, timeouts and connection errors within the invocation.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts per record, the first included.
    pub max_attempts: u32,
    /// Backoff before retry n is drawn from [cap/2, cap] with cap = min(max_delay, base × 2^(n-1)).
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// One attempt with no answer by then counts as a timeout (retryable).
    pub attempt_timeout: Duration,
    /// Tokens of the invocation's shared retry budget, in the manner of the SDK's retry quota:
    /// a retry costs `RETRY_COST` (a timeout `TIMEOUT_RETRY_COST`) and gives it back when it
    /// succeeds; a write that succeeds at its first attempt adds one (up to the start value). An empty budget ends retrying for every record: a
    /// throttled table is not hammered with `MAX_CONCURRENCY` × attempts requests, and what is
    /// left is reported for SQS to retry later.
    pub retry_budget: u32,
}

/// What one retry draws from the budget.
pub const RETRY_COST: i64 = 5;
/// What one retry after a timeout draws (a timeout costs the table more than an error).
pub const TIMEOUT_RETRY_COST: i64 = 10;

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(25),
            max_delay: Duration::from_secs(1),
            attempt_timeout: Duration::from_secs(3),
            retry_budget: 100,
        }
    }
}

impl RetryPolicy {
    pub(super) fn backoff(&self, retry: u32) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20));
        let cap = exp.min(self.max_delay);
        let half = cap / 2;
        half + half.mul_f64(fastrand::f64())
    }
}

/// The retry budget of one invocation, shared by all its records.
#[derive(Debug)]
pub(super) struct RetryBudget {
    tokens: AtomicI64,
    capacity: i64,
}

impl RetryBudget {
    pub(super) fn new(capacity: u32) -> Self {
        Self {
            tokens: AtomicI64::new(i64::from(capacity)),
            capacity: i64::from(capacity),
        }
    }

    /// Takes `cost` tokens if that many are left.
    fn acquire(&self, cost: i64) -> bool {
        self.tokens
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                (t >= cost).then_some(t - cost)
            })
            .is_ok()
    }

    fn refund(&self, tokens: i64) {
        let _ = self
            .tokens
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some((t + tokens).min(self.capacity))
            });
    }
}

/// One conditional write, retried while the error is transient, attempts and the shared budget
/// remain, and the backoff still ends before the cutoff.
pub(super) async fn write<S: AuditStore>(
    store: &S,
    item: &AuditItem,
    retry: &RetryPolicy,
    budget: &RetryBudget,
    cutoff: Option<Instant>,
) -> Outcome {
    let mut attempt = 1;
    let mut drawn = 0;
    loop {
        let left = cutoff.map(|c| c.saturating_duration_since(Instant::now()));
        if left.is_some_and(|b| b.is_zero()) {
            return Outcome::Failed(Failure::Deadline);
        }
        let limit = left.map_or(retry.attempt_timeout, |b| b.min(retry.attempt_timeout));
        let (result, timed_out) = match tokio::time::timeout(limit, store.put_if_absent(item)).await
        {
            Ok(result) => (result, false),
            Err(_) if limit < retry.attempt_timeout => {
                return Outcome::Failed(Failure::Deadline);
            }
            Err(_) => (
                Err(StoreError::Unavailable(format!(
                    "no answer within {} ms",
                    limit.as_millis()
                ))),
                true,
            ),
        };
        if result.is_ok() {
            // As the SDK's retry quota: a first-attempt success adds a token, a retry that
            // succeeded gives back what it drew.
            budget.refund(if attempt == 1 { 1 } else { drawn });
        }
        match result {
            Ok(PutOutcome::Written) => return Outcome::Written,
            Ok(PutOutcome::Duplicate) => return Outcome::Duplicate,
            Ok(PutOutcome::Conflict) => return Outcome::Failed(Failure::Conflict),
            Err(error) if error.is_retryable() && attempt < retry.max_attempts => {
                let delay = retry.backoff(attempt);
                if cutoff.is_some_and(|c| Instant::now() + delay >= c) {
                    return Outcome::Failed(error.into());
                }
                let cost = if timed_out {
                    TIMEOUT_RETRY_COST
                } else {
                    RETRY_COST
                };
                if !budget.acquire(cost) {
                    return Outcome::Failed(error.into());
                }
                drawn = cost;
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Err(error) => return Outcome::Failed(error.into()),
        }
    }
}
