//! Wiring only: configuration, logging, the DynamoDB wire and (when a dead-letter queue is set)
//! the SQS client, built once from the SDK's configuration, and the runtime loop.

use audit_aws::config::ClientOptions;
use audit_aws::dynamodb::{DynamoDbStore, StartupError, Wire};
use audit_aws::kms::KmsKey;
use audit_aws::sqs::SqsDeadLetterQueue;
use audit_receiver::attest::{AttestError, Attester, Uncertified};
use audit_receiver::deadletter::DeadLetterQueue;
use audit_receiver::{Config, Handler};
use std::sync::Arc;
use std::time::Duration;

use lambda_runtime::{Error, LambdaEvent, service_fn};

/// The SDK allocates a lot per request; mimalloc serves those small allocations faster than glibc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Invocations served at once by one process: Lambda Managed Instances set
/// `AWS_LAMBDA_MAX_CONCURRENCY`; a classic environment leaves it unset (one at a time).
fn invocations_at_once() -> usize {
    std::env::var("AWS_LAMBDA_MAX_CONCURRENCY")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(1)
        .max(1)
}

fn main() -> Result<(), Error> {
    let at_once = invocations_at_once();
    // One invocation at a time: one thread polls the writes, the runtime client and the timers,
    // with no cross-thread wake-ups (the cheapest per record). Several at once (Managed
    // Instances, several vCPUs per environment): a worker thread per vCPU.
    let runtime = if at_once > 1 {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    }
    .enable_all()
    .build()?;
    runtime.block_on(start(at_once))
}

async fn start(at_once: usize) -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config =
        Config::from_env().inspect_err(|error| tracing::error!(%error, "invalid configuration"))?;
    let sdk = audit_aws::config::function().await;
    let wire = Wire::from_sdk_config(&sdk)
        .await
        .inspect_err(|error| tracing::error!(%error, "invalid configuration"))?;
    let store = DynamoDbStore::new(wire, &config.table_name);
    // Open as many connections as a default batch of 10 uses, while init still has the CPU.
    // A table keyed otherwise than the function writes would refuse every record: the function
    // does not start (an init error, named in the log), rather than dead-letter the queue.
    match store
        .warm_up(config.max_concurrency.min(10), Duration::from_secs(2))
        .await
    {
        Ok(opened) => tracing::debug!(opened, "connections warmed"),
        Err(StartupError::WrongTable(why)) => {
            tracing::error!(table = %config.table_name, "{why}");
            return Err(why.into());
        }
        Err(error) => tracing::warn!(%error, table = %config.table_name, "start-up check failed"),
    }
    let mut handler = Handler::new(store, config.batch_settings());
    if let Some(key_id) = &config.attestation_key_id {
        // One KMS Sign for the run: its attestation key certified, or the function does not
        // start (an init error, named in the log) rather than write items nobody can tell from
        // ones put in the table behind it.
        let kms = KmsKey::new(
            audit_aws::config::kms(
                &sdk,
                ClientOptions {
                    connect: Some(audit_aws::config::FUNCTION_CONNECT_TIMEOUT),
                    operation: None,
                    standard_retries: true,
                },
            ),
            key_id,
        );
        let attester = certify(&kms)
            .await
            .inspect_err(|error| tracing::error!(%error, "attestation key not certified"))?;
        handler = handler.with_attester(attester);
    }
    match &config.dead_letter_queue_url {
        Some(url) => {
            // A dead-letter send is rare: the SDK's standard retries, each bounded by the batch's
            // send cutoff, and the function's short connect timeout.
            let client = audit_aws::config::sqs(
                &sdk,
                ClientOptions {
                    connect: Some(audit_aws::config::FUNCTION_CONNECT_TIMEOUT),
                    operation: None,
                    standard_retries: true,
                },
            );
            let queue = SqsDeadLetterQueue::new(client, url);
            run(handler.with_dead_letters(queue), at_once).await
        }
        None => run(handler, at_once).await,
    }
}

/// The run's attestation key, made now and certified by `kms` (one Sign).
async fn certify(kms: &KmsKey) -> Result<Attester, AttestError> {
    let issued_at_ms = u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0);
    let run = Uncertified::generate(issued_at_ms)?;
    let signature = kms
        .sign(&run.statement())
        .await
        .map_err(|e| AttestError::Certify {
            key_id: kms.key_id().to_owned(),
            detail: e.to_string(),
        })?;
    Ok(run.certified(signature))
}

async fn run<Q: DeadLetterQueue + 'static>(
    handler: Handler<DynamoDbStore, Q>,
    at_once: usize,
) -> Result<(), Error> {
    if at_once > 1 {
        tracing::debug!(at_once, "serving several invocations at once");
        let handler = Arc::new(handler);
        lambda_runtime::run_concurrent(service_fn(move |event: LambdaEvent<_>| {
            let handler = handler.clone();
            async move { handler.handle(event).await }
        }))
        .await
    } else {
        let handler = &handler;
        lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| {
            handler.handle(event)
        }))
        .await
    }
}
