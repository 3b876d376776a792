//! Owns the Lambda boundary: the event in (the table's stream, or the schedule's EventBridge
//! `Scheduled Event` that seals digests), the answer out (the partial batch response,
//! `batchItemFailures` by SequenceNumber; or the sealing summary), telemetry published. Must not
//! know how records are archived or periods sealed.

use audit_aws::error::{AwsError, ErrorKind};
use audit_aws::telemetry::deadline_instant;

use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use lambda_runtime::{Diagnostic, LambdaEvent};
use serde_json::{Value, json};
use std::sync::Mutex;
use tokio::time::Instant;

use crate::attest::AttestationCheck;
use crate::batch::{Ports, Settings, archive_batch};
use crate::budget::Budget;
use crate::clock::{Clock, SystemClock};
use crate::event::{StreamEvent, read_records};
use crate::report::BatchReport;
use crate::seal::{SealReport, Sealer, newest_sealable};
use crate::signer::DigestSigner;
use crate::telemetry;
use audit_aws::s3::Bucket;

/// The function: the bucket, the clock, the digest key and the settings, built once per process.
pub struct Handler<B, C = SystemClock, S = NoDigestKey> {
    bucket: B,
    clock: C,
    signer: S,
    settings: Settings,
    bucket_name: String,
    function_name: Option<String>,
    /// The receiver's attestation key (`ATTESTATION_KEY_ID`): unset, no INSERT is checked.
    attestation: Option<AttestationCheck>,
    /// The head this process's last sealing run left (its digest key, its period's end, the
    /// tree's size), a run that sealed or found every due period: until another period is due,
    /// a scheduled run has nothing to do and reads nothing (docs/archive.md "Digests").
    head: Mutex<Option<Head>>,
}

/// A sealing run's head: the newest digest's key, the end of its period, the log's size.
type Head = (String, i64, Option<u64>);

/// The digest key when `DIGEST_KEY_ID` is not set: the stream is archived, and a scheduled run
/// fails with a message that names the variable.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDigestKey;

impl DigestSigner for NoDigestKey {
    fn key_arn(&self) -> &str {
        ""
    }

    async fn sign(&self, _message: &[u8]) -> Result<Vec<u8>, AwsError> {
        let message = "DIGEST_KEY_ID is not set: set it to the digest key's ARN (the stack's AuditDigestKeyArn output)";
        Err(AwsError {
            kind: ErrorKind::Rejected,
            code: "NoDigestKey".into(),
            message: message.into(),
            status: None,
            text: format!("NoDigestKey: {message}"),
        })
    }

    async fn public_key(&self) -> Result<Vec<u8>, AwsError> {
        self.sign(b"").await
    }
}

/// A key that may be configured: `None` is [`NoDigestKey`].
impl<S: DigestSigner> DigestSigner for Option<S> {
    fn key_arn(&self) -> &str {
        self.as_ref().map_or("", DigestSigner::key_arn)
    }

    async fn sign(&self, message: &[u8]) -> Result<Vec<u8>, AwsError> {
        match self {
            Some(signer) => signer.sign(message).await,
            None => NoDigestKey.sign(message).await,
        }
    }

    async fn public_key(&self) -> Result<Vec<u8>, AwsError> {
        match self {
            Some(signer) => signer.public_key().await,
            None => NoDigestKey.public_key().await,
        }
    }
}

impl<B: Bucket> Handler<B> {
    pub fn new(bucket: B, settings: Settings) -> Self {
        Self {
            bucket,
            clock: SystemClock,
            signer: NoDigestKey,
            settings,
            bucket_name: String::new(),
            function_name: std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok(),
            attestation: None,
            head: Mutex::new(None),
        }
    }
}

impl<B: Bucket, C: Clock, S: DigestSigner> Handler<B, C, S> {
    /// The same handler on another clock (tests).
    pub fn with_clock<D: Clock>(self, clock: D) -> Handler<B, D, S> {
        Handler {
            bucket: self.bucket,
            clock,
            signer: self.signer,
            settings: self.settings,
            bucket_name: self.bucket_name,
            function_name: self.function_name,
            attestation: self.attestation,
            head: self.head,
        }
    }

    /// The same handler checking each INSERT's attestation with `check` (docs/archive.md "Items
    /// attested at birth"): a foreign item is archived with its line marked, and counted.
    pub fn with_attestation(mut self, check: AttestationCheck) -> Self {
        self.attestation = Some(check);
        self
    }

    /// The same handler sealing digests of `bucket_name` with `signer`.
    pub fn with_digests<T: DigestSigner>(self, bucket_name: &str, signer: T) -> Handler<B, C, T> {
        Handler {
            bucket: self.bucket,
            clock: self.clock,
            signer,
            settings: self.settings,
            bucket_name: bucket_name.to_owned(),
            function_name: self.function_name,
            attestation: self.attestation,
            head: self.head,
        }
    }

    /// Any event: the stream's records are archived, a scheduled event seals.
    pub async fn handle_any(&self, event: LambdaEvent<Value>) -> Result<Value, HandlerError> {
        let LambdaEvent { payload, context } = event;
        if payload.get("Records").is_some() {
            let stream: StreamEvent = serde_json::from_value(payload)
                .map_err(|e| HandlerError::UnreadableEvent(e.to_string()))?;
            let response = self.handle(LambdaEvent::new(stream, context)).await?;
            return Ok(serde_json::to_value(response).unwrap_or(Value::Null));
        }
        if is_scheduled(&payload) {
            return Ok(self.seal(context.deadline).await);
        }
        Err(HandlerError::UnknownEvent)
    }

    /// Seals every due period (`seal`), publishes the run, answers its summary.
    pub async fn seal(&self, deadline_ms: u64) -> Value {
        let started = Instant::now();
        let budget = Budget {
            deadline: deadline_instant(deadline_ms),
            margin: self.settings.deadline_margin,
        };
        let now = self.clock.now();
        let due = newest_sealable(now, self.settings.period);
        let head = self.head.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let report = match head {
            // Nothing is due since this process's last run sealed up to its head: an idle run,
            // with no request (11 of the 12 runs an hour of hourly periods).
            Some((key, end, tree_size)) if end >= due.end() => SealReport {
                due: Some(due),
                head: Some((key, end)),
                tree_size,
                ..SealReport::default()
            },
            _ => {
                let sealer = Sealer {
                    bucket: &self.bucket,
                    signer: &self.signer,
                    bucket_name: &self.bucket_name,
                    period: self.settings.period,
                };
                let report = sealer.run(now, budget).await;
                let mut head = self.head.lock().unwrap_or_else(|p| p.into_inner());
                *head = match (&report.failure, &report.head) {
                    (None, Some((key, end))) => Some((key.clone(), *end, report.tree_size)),
                    _ => None,
                };
                report
            }
        };
        telemetry::publish_seal(
            &report,
            started.elapsed(),
            now,
            self.function_name.as_deref(),
        );
        json!({
            "sealed": report.sealed.iter().map(|s| s.key.as_str()).collect::<Vec<_>>(),
            "foundSealed": report.found,
            "head": report.head.as_ref().map(|(key, _)| key),
            "treeSize": report.tree_size,
            "left": report.left,
            "lagSeconds": report.lag_seconds(now),
            "failure": report.failure.as_ref().map(ToString::to_string),
        })
    }

    /// The attestation key's check, when configured (a repair marks as the stream does).
    pub fn attestation(&self) -> Option<&AttestationCheck> {
        self.attestation.as_ref()
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
        Ok(response(&self.archive(event).await?))
    }

    /// Archives one stream batch, publishes its telemetry, and gives its report.
    pub async fn archive(
        &self,
        event: LambdaEvent<StreamEvent>,
    ) -> Result<BatchReport, HandlerError> {
        let started = Instant::now();
        let budget = Budget {
            deadline: deadline_instant(event.context.deadline),
            margin: self.settings.deadline_margin,
        };
        let mut reads = read_records(event.payload);
        if let Some(index) = reads.iter().position(|r| r.sequence_number.is_none()) {
            let error = HandlerError::MissingSequenceNumber { index };
            tracing::error!(%error, "batch rejected");
            return Err(error);
        }
        let ports = Ports {
            bucket: &self.bucket,
            clock: &self.clock,
        };
        // Before anything is encoded: a foreign item's line is marked wherever it is written.
        let foreign = match &self.attestation {
            Some(check) => check.mark(&mut reads),
            None => Vec::new(),
        };
        let mut report = archive_batch(ports, &self.settings, &reads, budget).await;
        report.foreign = foreign;
        telemetry::publish(
            &report,
            started.elapsed(),
            self.clock.now(),
            self.function_name.as_deref(),
        );
        Ok(report)
    }
}

/// EventBridge's scheduled event (a rule's `Scheduled Event`, or EventBridge Scheduler's).
fn is_scheduled(payload: &Value) -> bool {
    payload.get("detail-type").and_then(Value::as_str) == Some("Scheduled Event")
        && matches!(
            payload.get("source").and_then(Value::as_str),
            Some("aws.events" | "aws.scheduler")
        )
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

/// An error that fails the whole invocation (Lambda then retries, or bisects, the batch).
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error("record {index} of the batch has no dynamodb.SequenceNumber")]
    MissingSequenceNumber { index: usize },
    #[error("the stream event cannot be read: {0}")]
    UnreadableEvent(String),
    #[error("not a DynamoDB stream event nor an EventBridge Scheduled Event")]
    UnknownEvent,
}

impl From<HandlerError> for Diagnostic {
    fn from(error: HandlerError) -> Self {
        Diagnostic {
            error_type: match &error {
                HandlerError::MissingSequenceNumber { .. } => "MissingSequenceNumber".into(),
                HandlerError::UnreadableEvent(_) => "UnreadableEvent".into(),
                HandlerError::UnknownEvent => "UnknownEvent".into(),
            },
            error_message: error.to_string(),
        }
    }
}
