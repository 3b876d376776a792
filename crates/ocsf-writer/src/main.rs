//! Wiring only: configuration (`OCSF_BUCKET`, `OCSF_SOURCE`), logging, the S3 client built once,
//! and the runtime loop (one invocation at a time: a stream shard is read by one at a time).

use audit_aws::config::ClientOptions;
use audit_aws::env::{ConfigError, Env, is_bucket_name};
use audit_aws::s3::S3Bucket;
use audit_model::archive::OBJECT_WRITE_TIMEOUT;
use audit_ocsf_writer::{DEFAULT_SOURCE, write_batch};
use lambda_runtime::{Diagnostic, Error, LambdaEvent, service_fn};
use serde_json::Value;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(start())
}

async fn start() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let env = Env::process();
    let bucket = env
        .checked(
            "OCSF_BUCKET",
            is_bucket_name,
            "an S3 bucket name is 3-63 characters of a-z, 0-9, '.', '-'",
        )
        .and_then(|name| name.ok_or(ConfigError::Missing("OCSF_BUCKET")))
        .inspect_err(|error| tracing::error!(%error, "invalid configuration"))?;
    let source = env.get("OCSF_SOURCE").filter(|s| !s.is_empty());
    let source = source.unwrap_or_else(|| DEFAULT_SOURCE.to_owned());
    let sdk = audit_aws::config::function().await;
    let options = ClientOptions::bounded(OBJECT_WRITE_TIMEOUT);
    let bucket = S3Bucket::new(audit_aws::config::s3(&sdk, options), &bucket);
    let (bucket, source) = (&bucket, source.as_str());
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let Some(records) = event.payload.get("Records").and_then(Value::as_array) else {
            return Err(Diagnostic {
                error_type: "UnknownEvent".into(),
                error_message: "not a DynamoDB stream event".into(),
            });
        };
        let started = std::time::Instant::now();
        let outcome = write_batch(bucket, source, records).await;
        // The handler's own time (make cost-measure reads it as the invocation's duration).
        let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        match &outcome.failure {
            Some(failure) => tracing::error!(
                failure,
                records = records.len(),
                duration_ms,
                "batch failed: retried from its first record"
            ),
            None => tracing::info!(
                written = outcome.written.len(),
                found = outcome.found.len(),
                records = outcome.records,
                skipped = outcome.skipped,
                duration_ms,
                "batch written"
            ),
        }
        Ok::<_, Diagnostic>(serde_json::to_value(outcome.response()).unwrap_or(Value::Null))
    }))
    .await
}
