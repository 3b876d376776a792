//! Owns time: each bucket request runs under its own timeout, cut short so that nothing is in
//! flight after `deadline - margin` (Lambda's deadline, less the time kept for the response, the
//! logs and the metrics). Must not know what the requests are.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use audit_aws::error::{AwsError, ErrorKind};

use crate::words;

/// The time an invocation may still spend.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// `None`: no deadline (a test's default context).
    pub deadline: Option<Instant>,
    pub margin: Duration,
}

/// Why a step did not finish.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    #[error("{}", words::Bucket(.0))]
    Bucket(#[from] AwsError),
    /// The invocation's time ran out first (before or during the request).
    #[error("the invocation's deadline (less its margin) came first")]
    Deadline,
}

impl Budget {
    pub fn unlimited() -> Self {
        Self {
            deadline: None,
            margin: Duration::ZERO,
        }
    }

    /// Time left before `deadline - margin`; `None` when there is no deadline.
    pub fn left(&self) -> Option<Duration> {
        self.deadline.map(|deadline| {
            deadline
                .saturating_duration_since(Instant::now())
                .saturating_sub(self.margin)
        })
    }

    /// Whether `wait` fits in the time left, keeping `then` for what follows it.
    pub fn allows(&self, wait: Duration, then: Duration) -> bool {
        self.left().is_none_or(|left| left > wait + then)
    }

    /// Runs `request` for at most `timeout`, and not past the deadline less the margin.
    pub async fn run<T>(
        &self,
        timeout: Duration,
        request: impl Future<Output = Result<T, AwsError>>,
    ) -> Result<T, StepError> {
        let (limit, by_deadline) = match self.left() {
            None => (timeout, false),
            Some(left) if left.is_zero() => return Err(StepError::Deadline),
            Some(left) if left < timeout => (left, true),
            Some(_) => (timeout, false),
        };
        match tokio::time::timeout(limit, request).await {
            Ok(result) => result.map_err(StepError::Bucket),
            Err(_) if by_deadline => Err(StepError::Deadline),
            Err(_) => Err(StepError::Bucket(AwsError::without_answer(
                ErrorKind::TimedOut,
                "the request timed out",
            ))),
        }
    }
}
