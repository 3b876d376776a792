//! The sealer's fixtures over the in-memory bucket: the digest key's and the bucket's names, a
//! one-minute period, one run of the sealer, the scheduled event that starts one in the handler.

use audit_archiver::batch::Settings;
use audit_archiver::budget::Budget;
use audit_archiver::seal::{SealReport, Sealer};
use audit_archiver::signer::memory::MemorySigner;
use audit_aws::s3::memory::{MemoryBucket, Version};
use audit_model::archive::{Period, PeriodLength};
use audit_model::digest::{Digest, SealedDigest, sha256, unhex};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::at;

pub const KEY_ARN: &str =
    "arn:aws:kms:us-east-1:123456789012:key/0b1c2d3e-aaaa-bbbb-cccc-1234567890ab";
pub const BUCKET: &str = "audit-archive";

/// The period length of the sealing tests: one minute.
pub fn minute() -> PeriodLength {
    PeriodLength::new(60).unwrap()
}

/// The one-minute period that holds `start` (RFC 3339).
pub fn period(start: &str) -> Period {
    minute().period_of(at(start))
}

/// One run of the sealer at `now` (RFC 3339), with no deadline.
pub async fn seal(bucket: &MemoryBucket, signer: &MemorySigner, now: &str) -> SealReport {
    seal_at(bucket, signer, at(now)).await
}

/// One run of the sealer at `now`, with no deadline.
pub async fn seal_at(
    bucket: &MemoryBucket,
    signer: &MemorySigner,
    now: DateTime<Utc>,
) -> SealReport {
    Sealer {
        bucket,
        signer,
        bucket_name: BUCKET,
        period: minute(),
    }
    .run(now, Budget::unlimited())
    .await
}

/// The digest stored as `version` at `key`, and its link: its key, its bytes' hash and its
/// signature (the version's metadata `signature`).
pub fn stored_digest(key: &str, version: &Version) -> (Digest, SealedDigest) {
    let signature = version
        .metadata
        .iter()
        .find(|(n, _)| *n == "signature")
        .and_then(|(_, v)| unhex(v))
        .expect("a signature");
    let sealed = SealedDigest {
        key: key.to_owned(),
        sha256: sha256(&version.body),
        signature,
    };
    (Digest::parse(&version.body).expect("a digest"), sealed)
}

/// The handler's settings with the one-minute period.
pub fn settings() -> Settings {
    Settings {
        period: minute(),
        ..Settings::default()
    }
}

/// The schedule's event at 10:16:40, as EventBridge sends it to the handler.
pub fn scheduled() -> Value {
    json!({
        "version": "0", "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
        "detail-type": "Scheduled Event", "source": "aws.events",
        "account": "123456789012", "time": "2026-11-22T10:16:40Z", "region": "us-east-1",
        "resources": ["arn:aws:events:us-east-1:123456789012:rule/seal"], "detail": {}
    })
}
