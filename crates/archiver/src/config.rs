//! Owns the environment -> `Config` step of the archiver; every error names the variable at
//! fault. Must not know S3, the stream or the Lambda runtime.

use std::time::Duration;

use audit_model::archive::PeriodLength;

use crate::batch::{DEFAULT_DEADLINE_MARGIN, Settings};

const MAX_DEADLINE_MARGIN_MS: u64 = 900_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub bucket: String,
    pub period: PeriodLength,
    /// `DIGEST_KEY_ID`: the digest key's ARN (digests name it); unset, scheduled runs fail.
    pub digest_key_arn: Option<String>,
    pub deadline_margin: Duration,
    /// `AWS_ENDPOINT_URL` as set (the SDK reads it itself; checked here so that a bad one stops
    /// start-up by name).
    pub endpoint_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{0} is required but not set")]
    Missing(&'static str),
    #[error("{name}={value:?} is invalid: {rule}")]
    Invalid {
        name: &'static str,
        value: String,
        rule: &'static str,
    },
}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// `lookup` returns a variable's value; empty optional variables count as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let invalid = |name, value: &str, rule| ConfigError::Invalid {
            name,
            value: value.to_owned(),
            rule,
        };

        let bucket = get("ARCHIVE_BUCKET").ok_or(ConfigError::Missing("ARCHIVE_BUCKET"))?;
        if !valid_bucket_name(&bucket) {
            return Err(invalid(
                "ARCHIVE_BUCKET",
                &bucket,
                "an S3 bucket name is 3-63 characters of a-z, 0-9, '.', '-', starting and ending with a letter or digit",
            ));
        }

        let period = match get("DIGEST_PERIOD_SECONDS") {
            None => PeriodLength::default(),
            Some(v) => v
                .trim()
                .parse::<u32>()
                .ok()
                .and_then(PeriodLength::new)
                .ok_or_else(|| {
                    invalid(
                        "DIGEST_PERIOD_SECONDS",
                        &v,
                        "expected whole seconds from 10 to 86400 that divide a day (3600 in AWS)",
                    )
                })?,
        };

        let digest_key_arn = match get("DIGEST_KEY_ID") {
            None => None,
            Some(v) if valid_key_arn(v.trim()) => Some(v.trim().to_owned()),
            Some(v) => {
                return Err(invalid(
                    "DIGEST_KEY_ID",
                    &v,
                    "expected the KMS key's ARN (arn:aws:kms:<region>:<account>:key/<id>, the stack's AuditDigestKeyArn output): digests name their key by its ARN",
                ));
            }
        };

        let deadline_margin = match get("DEADLINE_MARGIN_MS") {
            None => DEFAULT_DEADLINE_MARGIN,
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|n| *n <= MAX_DEADLINE_MARGIN_MS)
                .map(Duration::from_millis)
                .ok_or_else(|| {
                    invalid(
                        "DEADLINE_MARGIN_MS",
                        &v,
                        "expected milliseconds from 0 to 900000",
                    )
                })?,
        };

        let endpoint_url = match get("AWS_ENDPOINT_URL") {
            None => None,
            Some(v) if valid_endpoint(v.trim()) => Some(v.trim().to_owned()),
            Some(v) => {
                return Err(invalid(
                    "AWS_ENDPOINT_URL",
                    &v,
                    "expected an http(s) URL such as http://127.0.0.1:5000",
                ));
            }
        };

        Ok(Self {
            bucket,
            period,
            digest_key_arn,
            deadline_margin,
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

fn valid_bucket_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (3..=63).contains(&name.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && !name.contains("..")
}

/// `arn:<partition>:kms:<region>:<account>:key/<id>`.
fn valid_key_arn(arn: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    matches!(parts.as_slice(), ["arn", partition, "kms", region, account, resource]
        if !partition.is_empty()
            && !region.is_empty()
            && account.len() == 12
            && account.bytes().all(|b| b.is_ascii_digit())
            && resource.strip_prefix("key/").is_some_and(|id| !id.is_empty() && !id.contains(char::is_whitespace)))
}

fn valid_endpoint(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/') && !url.contains(' '))
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
        ])
        .unwrap();
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
        ];
        for (vars, name) in cases {
            let error = config(vars).expect_err("bad configuration");
            assert!(error.to_string().starts_with(name), "{vars:?}: {error}");
        }
    }
}
