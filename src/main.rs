//! Wiring only: configuration, logging, the SDK clients (DynamoDB, and SQS for the dead-letter
//! queue when one is set), built once, and the runtime loop.

use audit_receiver::deadletter::DeadLetterQueue;
use audit_receiver::deadletter::sqs::SqsDeadLetterQueue;
use audit_receiver::store::dynamodb::DynamoDbStore;
use audit_receiver::{Config, Handler};
use std::time::Duration;

use lambda_runtime::{Error, LambdaEvent, service_fn};

/// The SDK allocates a lot per request; mimalloc serves those small allocations faster than glibc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config =
        Config::from_env().inspect_err(|error| tracing::error!(%error, "invalid configuration"))?;
    let sdk = DynamoDbStore::sdk_config_from_env().await;
    let store = DynamoDbStore::new(DynamoDbStore::client_from_conf(&sdk), &config.table_name);
    // Open as many connections as a default batch of 10 uses, while init still has the CPU.
    match store
        .warm_up(config.max_concurrency.min(10), Duration::from_secs(2))
        .await
    {
        Ok(opened) => tracing::debug!(opened, "connections warmed"),
        Err(error) => tracing::warn!(%error, table = %config.table_name, "start-up check failed"),
    }
    let handler = Handler::new(store, config.batch_settings());
    match &config.dead_letter_queue_url {
        Some(url) => {
            let queue = SqsDeadLetterQueue::new(SqsDeadLetterQueue::client_from_conf(&sdk), url);
            run(handler.with_dead_letters(queue)).await
        }
        None => run(handler).await,
    }
}

async fn run<Q: DeadLetterQueue>(handler: Handler<DynamoDbStore, Q>) -> Result<(), Error> {
    let handler = &handler;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| {
        handler.handle(event)
    }))
    .await
}
