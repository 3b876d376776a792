//! Owns the Lambda boundary: `LambdaEvent<StreamEvent>` in, the partial batch response
//! (`batchItemFailures` by SequenceNumber) out, telemetry published. Must not know how records
//! are archived or where.

use std::time::SystemTime;

use audit_model::lambda::time_left;

use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use lambda_runtime::{Diagnostic, LambdaEvent};
use tokio::time::Instant;

use crate::batch::{Ports, Settings, archive_batch};
use crate::bucket::ArchiveBucket;
use crate::budget::Budget;
use crate::clock::{Clock, SystemClock};
use crate::event::{StreamEvent, read_records};
use crate::report::BatchReport;
use crate::telemetry;

/// The function: the bucket, the clock and the settings, built once per process.
pub struct Handler<B, C = SystemClock> {
    bucket: B,
    clock: C,
    settings: Settings,
    function_name: Option<String>,
}

impl<B: ArchiveBucket> Handler<B> {
    pub fn new(bucket: B, settings: Settings) -> Self {
        Self {
            bucket,
            clock: SystemClock,
            settings,
            function_name: std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok(),
        }
    }
}

impl<B: ArchiveBucket, C: Clock> Handler<B, C> {
    /// The same handler on another clock (tests).
    pub fn with_clock<D: Clock>(self, clock: D) -> Handler<B, D> {
        Handler {
            bucket: self.bucket,
            clock,
            settings: self.settings,
            function_name: self.function_name,
        }
    }

    pub fn bucket(&self) -> &B {
        &self.bucket
    }

    /// Archives one stream batch. Fails the whole invocation only when a record has no sequence
    /// number (it could not be named in the response).
    pub async fn handle(
        &self,
        event: LambdaEvent<StreamEvent>,
    ) -> Result<DynamoDbEventResponse, HandlerError> {
        let started = Instant::now();
        let budget = Budget {
            deadline: deadline_instant(event.context.deadline),
            margin: self.settings.deadline_margin,
        };
        let reads = read_records(event.payload);
        if let Some(index) = reads.iter().position(|r| r.sequence_number.is_none()) {
            let error = HandlerError::MissingSequenceNumber { index };
            tracing::error!(%error, "batch rejected");
            return Err(error);
        }
        let ports = Ports {
            bucket: &self.bucket,
            clock: &self.clock,
        };
        let report = archive_batch(ports, &self.settings, &reads, budget).await;
        telemetry::publish(
            &report,
            started.elapsed(),
            self.clock.now(),
            self.function_name.as_deref(),
        );
        Ok(response(&report))
    }
}

/// `batchItemFailures`: the first failed record's SequenceNumber and every one after it (Lambda
/// checkpoints a stream batch at the lowest failed sequence number).
pub fn response(report: &BatchReport) -> DynamoDbEventResponse {
    let mut response = DynamoDbEventResponse::default();
    response.batch_item_failures = report
        .failed()
        .iter()
        .map(|sequence_number| {
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = Some(sequence_number.clone());
            failure
        })
        .collect();
    response
}

/// Lambda's deadline (the context's epoch milliseconds) as a monotonic instant, read as
/// `audit_model::lambda::time_left` reads it (0: no deadline; `cargo lambda watch`'s relative
/// timeout).
fn deadline_instant(deadline_ms: u64) -> Option<Instant> {
    time_left(deadline_ms, SystemTime::now()).map(|left| Instant::now() + left)
}

/// An error that fails the whole invocation (Lambda then retries, or bisects, the batch).
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error("record {index} of the batch has no dynamodb.SequenceNumber")]
    MissingSequenceNumber { index: usize },
}

impl From<HandlerError> for Diagnostic {
    fn from(error: HandlerError) -> Self {
        Diagnostic {
            error_type: match &error {
                HandlerError::MissingSequenceNumber { .. } => "MissingSequenceNumber".into(),
            },
            error_message: error.to_string(),
        }
    }
}
