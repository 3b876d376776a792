//! Wiring only: configuration, logging, the S3 and KMS clients built once from the SDK's
//! configuration,
//! and the runtime loop (one invocation at a time: a stream shard is read by one at a time).

// The handler's future nests the S3 and KMS clients' futures deeper than the default limit.
#![recursion_limit = "256"]

use audit_archiver::bucket::s3::S3Bucket;
use audit_archiver::signer::kms::KmsSigner;
use audit_archiver::{Config, Handler};
use audit_aws::config::ClientOptions;
use audit_model::archive::OBJECT_WRITE_TIMEOUT;
use lambda_runtime::{Error, LambdaEvent, service_fn};

/// The SDK allocates a lot per request; mimalloc serves those small allocations faster than glibc.
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
    let config =
        Config::from_env().inspect_err(|error| tracing::error!(%error, "invalid configuration"))?;
    let sdk = audit_aws::config::function().await;
    // Each request, retries included, abandoned after the write bound (`audit_model::archive`).
    let options = ClientOptions::bounded(OBJECT_WRITE_TIMEOUT);
    let bucket = S3Bucket::new(audit_aws::config::s3(&sdk, options), &config.bucket);
    let signer = config
        .digest_key_arn
        .as_ref()
        .map(|key_arn| KmsSigner::new(audit_aws::config::kms(&sdk, options), key_arn));
    if signer.is_none() {
        tracing::warn!("DIGEST_KEY_ID is not set: the stream is archived, no digest is sealed");
    }
    let handler = &Handler::new(bucket, config.settings()).with_digests(&config.bucket, signer);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| {
        handler.handle_any(event)
    }))
    .await
}
