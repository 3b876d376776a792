//! Owns the Lambda boundary: `LambdaEvent<SqsEvent>` in, partial batch response out, telemetry
//! published. Must not know how records are parsed or stored.

use audit_aws::telemetry::deadline_instant;

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use lambda_runtime::{Diagnostic, LambdaEvent};
use tokio::time::Instant;

use crate::attest::Attester;
use crate::batch::{self, BatchError, BatchReport, BatchSettings, Ports};
use crate::deadletter::{DeadLetter, DeadLetterQueue, SendError};
use crate::store::AuditStore;
use crate::telemetry;

/// The function: a store, the dead-letter queue when one is set, and the batch settings, built
/// once per process.
pub struct Handler<S, Q = NoDeadLetterQueue> {
    store: S,
    dead_letters: Option<Q>,
    /// The run's attestation key (`ATTESTATION_KEY_ID`): each batch's items are attested with it.
    attester: Option<Attester>,
    settings: BatchSettings,
    function_name: Option<String>,
}

/// The dead-letter port of a handler without a dead-letter queue: never called.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDeadLetterQueue;

impl DeadLetterQueue for NoDeadLetterQueue {
    async fn send(&self, _: &DeadLetter) -> Result<(), SendError> {
        Err(SendError::Refused(
            "no dead-letter queue is configured".into(),
        ))
    }
}

impl<S: AuditStore> Handler<S> {
    /// A handler that only reports failures (SQS's redrive policy moves them).
    pub fn new(store: S, settings: BatchSettings) -> Self {
        Self {
            store,
            dead_letters: None,
            attester: None,
            settings,
            function_name: std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok(),
        }
    }
}

impl<S: AuditStore, Q: DeadLetterQueue> Handler<S, Q> {
    /// The same handler, dead-lettering failed records itself with their reason.
    pub fn with_dead_letters<R: DeadLetterQueue>(self, queue: R) -> Handler<S, R> {
        Handler {
            store: self.store,
            dead_letters: Some(queue),
            attester: self.attester,
            settings: self.settings,
            function_name: self.function_name,
        }
    }

    /// The same handler, attesting each batch's items with the run's key.
    pub fn with_attester(self, attester: Attester) -> Self {
        Self {
            attester: Some(attester),
            ..self
        }
    }

    /// Processes one SQS batch. Fails the whole invocation only when a record has no message id.
    pub async fn handle(
        &self,
        event: LambdaEvent<SqsEvent>,
    ) -> Result<SqsBatchResponse, HandlerError> {
        let started = Instant::now();
        let deadline = deadline_instant(event.context.deadline);
        let ports = Ports {
            store: &self.store,
            dead_letters: self.dead_letters.as_ref(),
            attester: self.attester.as_ref(),
        };
        let report = batch::process_batch(ports, &self.settings, &event.payload.records, deadline)
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
