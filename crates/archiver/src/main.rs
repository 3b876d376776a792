//! Wiring only: configuration, logging, the S3, KMS and DynamoDB clients built once from the
//! SDK's configuration, a repair event sent to its own handler (repair.rs), and the runtime loop
//! (one invocation at a time: a stream shard is read by one at a time).

// The handler's future nests the S3 and KMS clients' futures deeper than the default limit.
#![recursion_limit = "256"]

use audit_archiver::attest::AttestationCheck;
use audit_archiver::budget::Budget;
use audit_archiver::clock::SystemClock;
use audit_archiver::repair::{self, Repairer};
use audit_archiver::signer::kms::KmsSigner;
use audit_archiver::table::dynamodb::DynamoTable;
use audit_archiver::{Config, Handler};
use audit_aws::config::ClientOptions;
use audit_aws::kms::KmsKey;
use audit_aws::s3::S3Bucket;
use audit_aws::telemetry::deadline_instant;
use audit_model::archive::OBJECT_WRITE_TIMEOUT;
use audit_model::attest::ReceiverKey;
use lambda_runtime::{Diagnostic, Error, LambdaEvent, service_fn};
use serde_json::Value;

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
    // A repair (auditctl archive repair) reads the items it archives from the table itself.
    let repair_bucket = bucket.clone();
    let table = config.table_name.as_ref().map(|name| {
        let client = audit_aws::config::dynamodb_with(&sdk, options);
        (DynamoTable::new(client, name), name.clone())
    });
    let settings = config.settings();
    let mut handler = Handler::new(bucket, settings);
    match &config.attestation_key_id {
        // One GetPublicKey for the process, or it does not start (an init error, named in the
        // log) rather than archive foreign items unmarked.
        Some(key_id) => {
            let kms = KmsKey::new(audit_aws::config::kms(&sdk, options), key_id);
            let key = kms.public_key().await.inspect_err(|error| {
                tracing::error!(%error, key_id, "the attestation key's public key (kms:GetPublicKey) could not be read")
            })?;
            handler =
                handler.with_attestation(AttestationCheck::new(ReceiverKey::from_der(&key.der)));
        }
        None => tracing::warn!(
            "ATTESTATION_KEY_ID is not set: items are archived without checking that the receiver wrote them"
        ),
    }
    let handler = &handler.with_digests(&config.bucket, signer);
    let (repair_bucket, table, settings) = (&repair_bucket, &table, &settings);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        if let Some(body) = repair::request_body(&event.payload) {
            let repairer = Repairer {
                bucket: repair_bucket,
                clock: &SystemClock,
                table: table.as_ref().map(|(t, name)| (t, name.as_str())),
                settings,
                attestation: handler.attestation(),
            };
            let budget = Budget {
                deadline: deadline_instant(event.context.deadline),
                margin: settings.deadline_margin,
            };
            return match repairer.repair(body, budget).await {
                Ok(answer) => Ok(serde_json::to_value(answer).unwrap_or(Value::Null)),
                Err(error) => {
                    tracing::error!(%error, "repair refused");
                    Err(Diagnostic::from(error))
                }
            };
        }
        handler.handle_any(event).await.map_err(Diagnostic::from)
    }))
    .await
}
