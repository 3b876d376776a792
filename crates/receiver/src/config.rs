//! Owns the environment -> `Config` step (read through `audit_aws::env`, so every error names
//! the variable at fault). Must not know SQS, DynamoDB or the Lambda runtime.

use std::time::Duration;

use audit_aws::env::{Env, invalid, is_queue_arn, is_queue_url, is_table_name};
pub use audit_model::context::Redrivers;

/// The table name used when a deployment does not choose one.
pub use audit_model::keys::DEFAULT_TABLE_NAME;
pub const DEFAULT_MAX_CONCURRENCY: usize = 32;
pub const MAX_CONCURRENCY_LIMIT: usize = 1024;
/// Time kept in hand before the Lambda deadline: no record starts and no write is left in flight
/// after `deadline - margin`; the margin pays for the dead-letter sends (each waited for at least
/// a quarter of it, `BatchSettings::deadline_margin`), the response, the logs and the metrics.
pub const DEFAULT_DEADLINE_MARGIN_MS: u64 = 1000;
const MAX_RETENTION_DAYS: u32 = 36_500;
/// The source queue's `maxReceiveCount` when `MAX_RECEIVE_COUNT` is unset (the template's default).
pub const DEFAULT_MAX_RECEIVE_COUNT: u64 = 5;
const MAX_MAX_RECEIVE_COUNT: u64 = 1000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub table_name: String,
    pub max_concurrency: usize,
    pub deadline_margin: Duration,
    pub retention_days: Option<u32>,
    /// When set, the function dead-letters failed records itself, with their reason.
    pub dead_letter_queue_url: Option<String>,
    pub max_receive_count: u64,
    /// The access queue's ARN: its records must be access events of their attested sender.
    pub access_queue_arn: Option<String>,
    /// `RECEIVER_ROLE_ID` and `REDRIVE_ROLE_ID`: the function's own role and the operator role
    /// `auditctl dlq redrive` runs as, the only senders whose `failureContext` is honoured.
    pub redrivers: Redrivers,
    /// `ATTESTATION_KEY_ID`: the KMS key (ECDSA P-256, only this function's role may sign with it)
    /// that certifies the run's attestation key once at start-up. Unset: items are not attested
    /// (the archiver then reports each as foreign).
    pub attestation_key_id: Option<String>,
}

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
        let table_name = env.required("TABLE_NAME")?;
        if !is_table_name(&table_name) {
            return Err(invalid(
                "TABLE_NAME",
                &table_name,
                "a DynamoDB table name is 3-255 characters of a-z, A-Z, 0-9, '_', '-', '.'",
            ));
        }
        let max_concurrency = env
            .number(
                "MAX_CONCURRENCY",
                1..=MAX_CONCURRENCY_LIMIT,
                "expected a whole number from 1 to 1024",
            )?
            .unwrap_or(DEFAULT_MAX_CONCURRENCY);
        let deadline_margin =
            env.deadline_margin(Duration::from_millis(DEFAULT_DEADLINE_MARGIN_MS))?;
        let retention_days = env.number(
            "RETENTION_DAYS",
            1..=MAX_RETENTION_DAYS,
            "expected whole days from 1 to 36500",
        )?;
        let dead_letter_queue_url = env.checked(
            "DEAD_LETTER_QUEUE_URL",
            is_queue_url,
            "expected a queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>)",
        )?;
        let max_receive_count = env
            .number(
                "MAX_RECEIVE_COUNT",
                1..=MAX_MAX_RECEIVE_COUNT,
                "expected the queue's maxReceiveCount, a whole number from 1 to 1000",
            )?
            .unwrap_or(DEFAULT_MAX_RECEIVE_COUNT);
        // Set but blank is an error, not "no access queue": a template that lost the reference
        // would otherwise refuse every access event as `reserved_action` without a word.
        let access_queue_arn = env.checked_when_set(
            "ACCESS_QUEUE_ARN",
            is_queue_arn,
            "expected the access queue's ARN (arn:aws:sqs:<region>:<account>:<name>)",
        )?;

        // Unset: nobody's failureContext is honoured (every delivery is its own original).
        let role_id = |name| {
            env.checked(
                name,
                is_principal_id,
                "expected an IAM role id (AROA... ; the template's Fn::GetAtt <role>.RoleId)",
            )
        };
        let redrivers = Redrivers::new(
            [role_id("RECEIVER_ROLE_ID")?, role_id("REDRIVE_ROLE_ID")?]
                .into_iter()
                .flatten(),
        );

        let attestation_key_id = env.checked(
            "ATTESTATION_KEY_ID",
            |id| id.starts_with("arn:") && id.contains(":kms:"),
            "expected the attestation key's ARN (the template's AuditAttestationKey, Fn::GetAtt Arn)",
        )?;

        Ok(Self {
            table_name,
            max_concurrency,
            deadline_margin,
            retention_days,
            dead_letter_queue_url,
            max_receive_count,
            access_queue_arn,
            redrivers,
            attestation_key_id,
        })
    }
}

/// An IAM unique id (a role's `AROA…`, a user's `AIDA…`): upper-case letters and digits.
fn is_principal_id(id: &str) -> bool {
    (16..=128).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
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
    fn defaults_apply_when_only_the_table_is_set() {
        let config = config(&[("TABLE_NAME", "AuditMessages")]).unwrap();
        assert_eq!(config.max_concurrency, 32);
        assert_eq!(config.deadline_margin, Duration::from_millis(1000));
        assert_eq!(config.retention_days, None);
        assert_eq!(config.dead_letter_queue_url, None);
        assert_eq!(config.max_receive_count, 5);
        assert_eq!(config.access_queue_arn, None);
        assert_eq!(config.redrivers, Redrivers::default());
    }

    #[test]
    fn the_redrivers_are_the_receivers_role_and_the_redrive_role() {
        let read = config(&[
            ("TABLE_NAME", "AuditMessages"),
            ("RECEIVER_ROLE_ID", "AROARECEIVER0000001"),
            ("REDRIVE_ROLE_ID", "AROAOPERATOR0000001"),
        ])
        .unwrap();
        assert!(read.redrivers.vouch_for(Some("AROARECEIVER0000001:fn")));
        assert!(read.redrivers.vouch_for(Some("AROAOPERATOR0000001:bob")));
        assert!(!read.redrivers.vouch_for(Some("AROAPRODUCER0000001:x")));
        assert_eq!(read.batch_settings().redrivers, read.redrivers);
        for bad in ["aroa-lower", "AROA:session", "SHORT"] {
            let error = config(&[("TABLE_NAME", "T1x"), ("REDRIVE_ROLE_ID", bad)]).unwrap_err();
            assert!(error.to_string().contains("REDRIVE_ROLE_ID"), "{error}");
        }
    }

    #[test]
    fn values_are_read() {
        let config = config(&[
            ("TABLE_NAME", "audit.prod-1"),
            ("MAX_CONCURRENCY", "1024"),
            ("DEADLINE_MARGIN_MS", "250"),
            ("RETENTION_DAYS", "365"),
            (
                "DEAD_LETTER_QUEUE_URL",
                "https://sqs.eu-west-1.amazonaws.com/123456789012/AuditDeadLetterQueue",
            ),
            ("MAX_RECEIVE_COUNT", "7"),
            (
                "ACCESS_QUEUE_ARN",
                "arn:aws:sqs:eu-west-1:123456789012:AuditAccessQueue",
            ),
        ])
        .unwrap();
        assert_eq!(
            config.access_queue_arn.as_deref(),
            Some("arn:aws:sqs:eu-west-1:123456789012:AuditAccessQueue")
        );
        assert_eq!(
            config.batch_settings().access_queue_arn,
            config.access_queue_arn
        );
        assert_eq!(
            config.dead_letter_queue_url.as_deref(),
            Some("https://sqs.eu-west-1.amazonaws.com/123456789012/AuditDeadLetterQueue")
        );
        assert_eq!(config.max_receive_count, 7);
        assert_eq!(config.max_concurrency, 1024);
        assert_eq!(config.deadline_margin, Duration::from_millis(250));
        assert_eq!(config.retention_days, Some(365));
    }

    #[test]
    fn empty_optional_values_count_as_unset() {
        let config = config(&[("TABLE_NAME", "AuditMessages"), ("RETENTION_DAYS", "")]).unwrap();
        assert_eq!(config.retention_days, None);
    }

    #[test]
    fn every_bad_value_names_its_variable() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], "TABLE_NAME"),
            (&[("TABLE_NAME", "")], "TABLE_NAME"),
            (&[("TABLE_NAME", "no spaces allowed")], "TABLE_NAME"),
            (
                &[("TABLE_NAME", "T"), ("MAX_CONCURRENCY", "5")],
                "TABLE_NAME",
            ),
            (
                &[("TABLE_NAME", "Audit"), ("MAX_CONCURRENCY", "0")],
                "MAX_CONCURRENCY",
            ),
            (
                &[("TABLE_NAME", "Audit"), ("MAX_CONCURRENCY", "1025")],
                "MAX_CONCURRENCY",
            ),
            (
                &[("TABLE_NAME", "Audit"), ("MAX_CONCURRENCY", "many")],
                "MAX_CONCURRENCY",
            ),
            (
                &[("TABLE_NAME", "Audit"), ("DEADLINE_MARGIN_MS", "-1")],
                "DEADLINE_MARGIN_MS",
            ),
            (
                &[("TABLE_NAME", "Audit"), ("DEADLINE_MARGIN_MS", "1s")],
                "DEADLINE_MARGIN_MS",
            ),
            (
                &[("TABLE_NAME", "Audit"), ("RETENTION_DAYS", "0")],
                "RETENTION_DAYS",
            ),
            (
                &[("TABLE_NAME", "Audit"), ("RETENTION_DAYS", "forever")],
                "RETENTION_DAYS",
            ),
            (
                &[
                    ("TABLE_NAME", "Audit"),
                    ("DEAD_LETTER_QUEUE_URL", "AuditDLQ"),
                ],
                "DEAD_LETTER_QUEUE_URL",
            ),
            (
                &[
                    ("TABLE_NAME", "Audit"),
                    ("DEAD_LETTER_QUEUE_URL", "arn:aws:sqs:us-east-1:1:q"),
                ],
                "DEAD_LETTER_QUEUE_URL",
            ),
            (
                &[("TABLE_NAME", "Audit"), ("MAX_RECEIVE_COUNT", "0")],
                "MAX_RECEIVE_COUNT",
            ),
            (
                &[("TABLE_NAME", "Audit"), ("ACCESS_QUEUE_ARN", "")],
                "ACCESS_QUEUE_ARN",
            ),
            (
                &[("TABLE_NAME", "Audit"), ("ACCESS_QUEUE_ARN", "  ")],
                "ACCESS_QUEUE_ARN",
            ),
            (
                &[
                    ("TABLE_NAME", "Audit"),
                    (
                        "ACCESS_QUEUE_ARN",
                        "https://sqs.eu-west-1.amazonaws.com/123456789012/AuditAccessQueue",
                    ),
                ],
                "ACCESS_QUEUE_ARN",
            ),
            (
                &[("TABLE_NAME", "Audit"), ("MAX_RECEIVE_COUNT", "five")],
                "MAX_RECEIVE_COUNT",
            ),
        ];
        for (vars, name) in cases {
            let error = config(vars).expect_err("bad configuration");
            assert!(error.to_string().starts_with(name), "{vars:?}: {error}");
        }
    }
}
