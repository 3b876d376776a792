//! Owns the Lambda boundary: `LambdaEvent<SqsEvent>` in, partial batch response out, telemetry
//! published. Must not know how records are parsed or stored.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use lambda_runtime::{Diagnostic, LambdaEvent};
use tokio::time::Instant;

use crate::batch::{self, BatchError, BatchReport, BatchSettings};
use crate::store::AuditStore;
use crate::telemetry;

/// The function: a store and the batch settings, built once per process.
pub struct Handler<S> {
    store: S,
    settings: BatchSettings,
    function_name: Option<String>,
}

impl<S: AuditStore> Handler<S> {
    pub fn new(store: S, settings: BatchSettings) -> Self {
        Self {
            store,
            settings,
            function_name: std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok(),
        }
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    /// Processes one SQS batch. Fails the whole invocation only when a record has no message id.
    pub async fn handle(
        &self,
        event: LambdaEvent<SqsEvent>,
    ) -> Result<SqsBatchResponse, HandlerError> {
        let started = Instant::now();
        let deadline = deadline_instant(event.context.deadline);
        let report = batch::process_batch(
            &self.store,
            &self.settings,
            &event.payload.records,
            deadline,
        )
        .await
        .inspect_err(|error| tracing::error!(%error, "batch rejected"))?;
        telemetry::publish(
            &report,
            started.elapsed(),
            chrono::Utc::now(),
            self.function_name.as_deref(),
        );
        Ok(response(&report))
    }
}

/// `batchItemFailures`: each failed record's SQS message id, once.
pub fn response(report: &BatchReport) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = report
        .failures()
        .map(|(id, _)| {
            let mut failure = BatchItemFailure::default();
            failure.item_identifier = id.to_owned();
            failure
        })
        .collect();
    response
}

/// Lambda's deadline (epoch milliseconds) as a monotonic instant; 0 (a test's default context)
/// means no deadline. `cargo lambda watch` sends its invoke timeout as a duration (for example
/// `600000`) rather than an epoch time; a value before 2001 cannot be an epoch deadline, so it is
/// read as milliseconds from now instead of as a deadline long past.
fn deadline_instant(deadline_ms: u64) -> Option<Instant> {
    const EPOCH_MS_2001: u64 = 1_000_000_000_000;
    let left = match deadline_ms {
        0 => return None,
        relative if relative < EPOCH_MS_2001 => Duration::from_millis(relative),
        epoch => (UNIX_EPOCH + Duration::from_millis(epoch))
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    };
    Some(Instant::now() + left)
}

/// An error that fails the whole invocation (Lambda then retries the whole batch).
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error(transparent)]
    Batch(#[from] BatchError),
}

impl From<HandlerError> for Diagnostic {
    fn from(error: HandlerError) -> Self {
        Diagnostic {
            error_type: match &error {
                HandlerError::Batch(BatchError::MissingMessageId { .. }) => {
                    "MissingMessageId".into()
                }
            },
            error_message: error.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_is_read_as_epoch_time_or_as_an_emulator_duration() {
        assert_eq!(deadline_instant(0), None);
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let left = |d: Option<Instant>| d.unwrap().saturating_duration_since(Instant::now());
        let epoch = left(deadline_instant(now_ms + 30_000));
        assert!(
            epoch > Duration::from_secs(29) && epoch <= Duration::from_secs(30),
            "{epoch:?}"
        );
        assert_eq!(left(deadline_instant(now_ms - 5_000)), Duration::ZERO);
        let relative = left(deadline_instant(600_000));
        assert!(
            relative > Duration::from_secs(599) && relative <= Duration::from_secs(600),
            "{relative:?}"
        );
    }
}
