//! Owns the archive's flags, once, for every command that reads the archive: the bucket, the
//! digest key, the receiver's attestation key and the digest period (a parsed `PeriodLength`).
//! Must not know what a command does.

use std::sync::Arc;

use audit_model::archive::{DEFAULT_DIGEST_PERIOD_SECONDS, PeriodLength};
use audit_proof::verify::attest::Attestations;
use audit_proof::verify::kms::KmsKey;
use clap::Args;

use crate::commands::Context;
use crate::commands::words::TrailError;

/// What is said where the attestation key is not given: the items' attestations were not
/// checked, and how to have them checked (docs/auditctl.md "The attestation key").
pub const ATTESTATIONS_NOT_CHECKED: &str = "attestations not checked: set ATTESTATION_KEY_ID or --attestation-key-id (stack output AuditAttestationKeyArn) to tell the receiver's items from items put in the table behind it";

/// The receiver's attestation key (docs/archive.md "Items attested at birth"), for the commands
/// that show or check whether an item is the receiver's.
#[derive(Debug, Clone, Args)]
pub struct AttestationKeyFlag {
    /// The receiver's attestation key, whose public key tells the items the receiver wrote from
    /// items put in the table behind it: its ARN, id or alias (stack output
    /// AuditAttestationKeyArn). Without it, attestations are not checked.
    #[arg(long, env = "ATTESTATION_KEY_ID", value_name = "KEY")]
    attestation_key_id: Option<String>,
}

impl AttestationKeyFlag {
    /// The key, given and not blank.
    pub fn given(&self) -> Option<String> {
        given(&self.attestation_key_id)
    }

    /// The key's public key, fetched once from KMS (GetPublicKey), when the key is given.
    pub async fn fetch(&self, context: &Context) -> Result<Option<Arc<Attestations>>, TrailError> {
        let Some(key_id) = self.given() else {
            return Ok(None);
        };
        let kms = KmsKey::new(&context.config, key_id.clone(), context.location.clone());
        Ok(Some(Arc::new(Attestations::fetch(&kms, &key_id).await?)))
    }
}

/// The archive bucket alone (the witness reads checkpoints, it takes its key another way).
#[derive(Debug, Clone, Args)]
pub struct BucketFlag {
    /// The archive bucket (stack output AuditArchiveBucketName).
    #[arg(long, env = "ARCHIVE_BUCKET", value_name = "BUCKET")]
    bucket: Option<String>,
}

impl BucketFlag {
    /// The bucket, given and not blank.
    pub fn given(&self) -> Option<String> {
        given(&self.bucket)
    }

    /// The bucket, or what sets it.
    pub fn required(&self) -> Result<String, TrailError> {
        self.given().ok_or(TrailError::NotSet {
            var: "ARCHIVE_BUCKET",
            flag: "--bucket",
            output: "AuditArchiveBucketName",
        })
    }
}

/// Where the log is and who signs it: the bucket and the digest key.
#[derive(Debug, Clone, Args)]
pub struct LogFlags {
    #[command(flatten)]
    pub bucket: BucketFlag,
    /// The digest signing key, which signs the digests and the checkpoints: its ARN, id or alias
    /// (stack output AuditDigestKeyArn).
    #[arg(long, env = "DIGEST_KEY_ID", value_name = "KEY")]
    key_id: Option<String>,
}

impl LogFlags {
    /// The bucket, or what sets it.
    pub fn bucket(&self) -> Result<String, TrailError> {
        self.bucket.required()
    }

    /// The digest key, given and not blank.
    pub fn given_key_id(&self) -> Option<String> {
        given(&self.key_id)
    }

    /// The digest key, or what sets it.
    pub fn key_id(&self) -> Result<String, TrailError> {
        self.key_id_or("--key-id")
    }

    /// The digest key, or what sets it when `flag` names the command's other ways too.
    pub fn key_id_or(&self, flag: &'static str) -> Result<String, TrailError> {
        self.given_key_id().ok_or(TrailError::NotSet {
            var: "DIGEST_KEY_ID",
            flag,
            output: "AuditDigestKeyArn",
        })
    }
}

/// The archive's whole set: the log's flags, the attestation key and the digest period.
#[derive(Debug, Clone, Args)]
pub struct ArchiveFlags {
    #[command(flatten)]
    pub log: LogFlags,
    #[command(flatten)]
    pub attestation: AttestationKeyFlag,
    /// The digest period in seconds, the archiver's DIGEST_PERIOD_SECONDS (3600 in AWS, short on
    /// the local stack).
    #[arg(long = "period-seconds", env = "DIGEST_PERIOD_SECONDS", value_name = "SECONDS", default_value = DEFAULT_PERIOD, value_parser = parse_period)]
    pub period: PeriodLength,
}

impl ArchiveFlags {
    pub fn bucket(&self) -> Result<String, TrailError> {
        self.log.bucket()
    }

    pub fn key_id(&self) -> Result<String, TrailError> {
        self.log.key_id()
    }
}

/// The archive as `auditctl query` reads it past the table's hot window: the bucket and the
/// digest period.
#[derive(Debug, Clone, Args)]
pub struct ArchiveReadFlags {
    #[command(flatten)]
    pub bucket: BucketFlag,
    /// The digest period in seconds, the archiver's DIGEST_PERIOD_SECONDS (3600 in AWS, short on
    /// the local stack).
    #[arg(long = "period-seconds", env = "DIGEST_PERIOD_SECONDS", value_name = "SECONDS", default_value = DEFAULT_PERIOD, value_parser = parse_period)]
    pub period: PeriodLength,
}

/// The digest period in AWS, as the flag's default: the model's, checked when this compiles.
const DEFAULT_PERIOD: &str = "3600";
const _: () = assert!(DEFAULT_DIGEST_PERIOD_SECONDS == 3600);

fn given(value: &Option<String>) -> Option<String> {
    value.clone().filter(|v| !v.trim().is_empty())
}

/// A digest period: from 10 seconds to a day, dividing a day.
fn parse_period(text: &str) -> Result<PeriodLength, String> {
    text.trim()
        .parse::<u32>()
        .ok()
        .and_then(PeriodLength::new)
        .ok_or_else(|| {
            format!("'{text}' is not a digest period: seconds from 10 to 86400 that divide a day (3600 in AWS); use the archiver's DIGEST_PERIOD_SECONDS")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Command {
        #[command(flatten)]
        archive: ArchiveFlags,
    }

    #[test]
    fn the_period_is_parsed_once_and_a_wrong_one_names_the_archivers_setting() {
        let parsed = Command::try_parse_from(["x", "--period-seconds", "20"]).unwrap();
        assert_eq!(parsed.archive.period.seconds(), 20);
        let wrong = Command::try_parse_from(["x", "--period-seconds", "7"]).unwrap_err();
        assert!(
            wrong
                .to_string()
                .contains("'7' is not a digest period: seconds from 10 to 86400 that divide a day"),
            "{wrong}"
        );
    }

    #[test]
    fn the_attestation_key_is_one_flag_of_the_set_and_blank_is_not_given() {
        let parsed =
            Command::try_parse_from(["x", "--attestation-key-id", "alias/attest"]).unwrap();
        assert_eq!(
            parsed.archive.attestation.given().as_deref(),
            Some("alias/attest")
        );
        let blank = Command::try_parse_from(["x", "--attestation-key-id", " "]).unwrap();
        assert_eq!(blank.archive.attestation.given(), None);
    }

    #[test]
    fn a_blank_bucket_or_key_is_not_set_and_names_the_flag_and_the_output() {
        let parsed = Command::try_parse_from(["x", "--bucket", " ", "--key-id", ""]).unwrap();
        let bucket = parsed.archive.bucket().unwrap_err().to_string();
        assert!(
            bucket.contains("ARCHIVE_BUCKET") && bucket.contains("--bucket"),
            "{bucket}"
        );
        let key = parsed.archive.key_id().unwrap_err().to_string();
        assert!(
            key.contains("DIGEST_KEY_ID") && key.contains("AuditDigestKeyArn"),
            "{key}"
        );
    }
}
