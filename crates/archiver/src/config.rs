//! Owns the environment -> `Config` step of the archiver (read through `audit_aws::env`); every
//! error names the variable at fault. Must not know S3, the stream or the Lambda runtime.

use std::time::Duration;

use audit_aws::env::{Env, invalid, is_bucket_name, is_endpoint_url, is_key_arn, is_table_name};
use audit_model::archive::PeriodLength;

use crate::batch::{DEFAULT_DEADLINE_MARGIN, Settings};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub bucket: String,
    pub period: PeriodLength,
    /// `DIGEST_KEY_ID`: the digest key's ARN (digests name it); unset, scheduled runs fail.
    pub digest_key_arn: Option<String>,
    pub deadline_margin: Duration,
    /// `TABLE_NAME`: the audit table, which a repair reads its items from; unset, a repair event
    /// fails saying so.
    pub table_name: Option<String>,
    /// `ATTESTATION_KEY_ID`: the receiver's attestation key's ARN, whose public half (KMS
    /// `GetPublicKey`, once at start-up) every INSERT is checked with; unset, nothing is checked
    /// (a warning at start).
    pub attestation_key_id: Option<String>,
    /// `AWS_ENDPOINT_URL` as set (the SDK reads it itself; checked here so that a bad one stops
    /// start-up by name).
    pub endpoint_url: Option<String>,
}

/// A variable that is absent or does not follow its rule (`audit_aws::env`'s: the message starts
/// with the variable's name).
pub use audit_aws::env::ConfigError;

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::read(&Env::process())
    }

    /// `lookup` returns a variable's value; empty optional variables count as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::read(&Env::new(lookup))
    }

    fn read<F: Fn(&str) -> Option<String>>(env: &Env<F>) -> Result<Self, ConfigError> {
        let bucket = env.required("ARCHIVE_BUCKET")?;
        if !is_bucket_name(&bucket) {
            return Err(invalid(
                "ARCHIVE_BUCKET",
                &bucket,
                "an S3 bucket name is 3-63 characters of a-z, 0-9, '.', '-', starting and ending with a letter or digit",
            ));
        }
        let period = env
            .parsed(
                "DIGEST_PERIOD_SECONDS",
                |v| v.parse::<u32>().ok().and_then(PeriodLength::new),
                "expected whole seconds from 10 to 86400 that divide a day (3600 in AWS)",
            )?
            .unwrap_or_default();
        let digest_key_arn = env.checked(
            "DIGEST_KEY_ID",
            is_key_arn,
            "expected the KMS key's ARN (arn:aws:kms:<region>:<account>:key/<id>, the stack's AuditDigestKeyArn output): digests name their key by its ARN",
        )?;
        let deadline_margin = env.deadline_margin(DEFAULT_DEADLINE_MARGIN)?;
        let table_name = env.checked(
            "TABLE_NAME",
            is_table_name,
            "expected a DynamoDB table name: 3-255 characters of a-z, A-Z, 0-9, '_', '-', '.'",
        )?;
        let attestation_key_id = env.checked(
            "ATTESTATION_KEY_ID",
            is_key_arn,
            "expected the attestation key's ARN (arn:aws:kms:<region>:<account>:key/<id>, the stack's AuditAttestationKeyArn output)",
        )?;
        let endpoint_url = env.checked(
            "AWS_ENDPOINT_URL",
            is_endpoint_url,
            "expected an http(s) URL such as http://127.0.0.1:5000",
        )?;
        Ok(Self {
            bucket,
            period,
            digest_key_arn,
            deadline_margin,
            table_name,
            attestation_key_id,
            endpoint_url,
        })
    }

    pub fn settings(&self) -> Settings {
        Settings {
            period: self.period,
            deadline_margin: self.deadline_margin,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|name| vars.get(name).cloned())
    }

    #[test]
    fn defaults_apply_when_only_the_bucket_is_set() {
        let config = config(&[("ARCHIVE_BUCKET", "audit-archive-123")]).unwrap();
        assert_eq!(config.bucket, "audit-archive-123");
        assert_eq!(config.period.seconds(), 3600);
        assert_eq!(config.digest_key_arn, None);
        assert_eq!(config.deadline_margin, Duration::from_millis(1000));
        assert_eq!(config.endpoint_url, None);
        assert_eq!(config.table_name, None);
        assert_eq!(config.attestation_key_id, None);
    }

    #[test]
    fn values_are_read() {
        let config = config(&[
            ("ARCHIVE_BUCKET", "local-archive"),
            ("DIGEST_PERIOD_SECONDS", "60"),
            (
                "DIGEST_KEY_ID",
                "arn:aws:kms:us-east-1:123456789012:key/0b1c2d3e-aaaa-bbbb-cccc-1234567890ab",
            ),
            ("DEADLINE_MARGIN_MS", "250"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
            ("TABLE_NAME", "AuditMessages"),
            (
                "ATTESTATION_KEY_ID",
                "arn:aws:kms:us-east-1:123456789012:key/attest",
            ),
        ])
        .unwrap();
        assert_eq!(
            config.attestation_key_id.as_deref(),
            Some("arn:aws:kms:us-east-1:123456789012:key/attest")
        );
        assert_eq!(config.table_name.as_deref(), Some("AuditMessages"));
        assert_eq!(config.period.seconds(), 60);
        assert!(
            config
                .digest_key_arn
                .unwrap()
                .ends_with(":key/0b1c2d3e-aaaa-bbbb-cccc-1234567890ab")
        );
        assert_eq!(config.deadline_margin, Duration::from_millis(250));
        assert_eq!(
            config.endpoint_url.as_deref(),
            Some("http://127.0.0.1:5000")
        );
    }

    #[test]
    fn every_bad_value_names_its_variable() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], "ARCHIVE_BUCKET"),
            (&[("ARCHIVE_BUCKET", "")], "ARCHIVE_BUCKET"),
            (&[("ARCHIVE_BUCKET", "Upper_Case")], "ARCHIVE_BUCKET"),
            (&[("ARCHIVE_BUCKET", "ab")], "ARCHIVE_BUCKET"),
            (&[("ARCHIVE_BUCKET", "-bucket")], "ARCHIVE_BUCKET"),
            (
                &[("ARCHIVE_BUCKET", "b-1"), ("DIGEST_PERIOD_SECONDS", "0")],
                "DIGEST_PERIOD_SECONDS",
            ),
            (
                &[("ARCHIVE_BUCKET", "b-1"), ("DIGEST_PERIOD_SECONDS", "7")],
                "DIGEST_PERIOD_SECONDS",
            ),
            (
                &[("ARCHIVE_BUCKET", "b-1"), ("DIGEST_PERIOD_SECONDS", "1h")],
                "DIGEST_PERIOD_SECONDS",
            ),
            (
                &[
                    ("ARCHIVE_BUCKET", "b-1"),
                    ("DIGEST_PERIOD_SECONDS", "172800"),
                ],
                "DIGEST_PERIOD_SECONDS",
            ),
            (
                &[
                    ("ARCHIVE_BUCKET", "b-1"),
                    ("DIGEST_KEY_ID", "0b1c2d3e-aaaa"),
                ],
                "DIGEST_KEY_ID",
            ),
            (
                &[
                    ("ARCHIVE_BUCKET", "b-1"),
                    ("DIGEST_KEY_ID", "alias/audit-digest"),
                ],
                "DIGEST_KEY_ID",
            ),
            (
                &[("ARCHIVE_BUCKET", "b-1"), ("DEADLINE_MARGIN_MS", "-1")],
                "DEADLINE_MARGIN_MS",
            ),
            (
                &[
                    ("ARCHIVE_BUCKET", "b-1"),
                    ("AWS_ENDPOINT_URL", "localhost:5000"),
                ],
                "AWS_ENDPOINT_URL",
            ),
            (
                &[("ARCHIVE_BUCKET", "b-1"), ("TABLE_NAME", "a b")],
                "TABLE_NAME",
            ),
            (
                &[
                    ("ARCHIVE_BUCKET", "b-1"),
                    ("ATTESTATION_KEY_ID", "alias/attest"),
                ],
                "ATTESTATION_KEY_ID",
            ),
        ];
        for (vars, name) in cases {
            let error = config(vars).expect_err("bad configuration");
            assert!(error.to_string().starts_with(name), "{vars:?}: {error}");
        }
    }
}
