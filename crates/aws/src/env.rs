//! Owns reading a program's settings from its environment: each value looked up by name, empty
//! counted as unset, and every error naming the variable at fault and the rule it broke. Must not
//! know which program reads which variable.

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::str::FromStr;
use std::time::Duration;

/// A variable that is absent or does not follow its rule. The message starts with the
/// variable's name.
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

/// The variables of one environment, read through a lookup (the process's, or a test's map).
pub struct Env<F> {
    lookup: F,
}

impl Env<fn(&str) -> Option<String>> {
    /// The process's environment.
    pub fn process() -> Self {
        fn var(name: &str) -> Option<String> {
            std::env::var(name).ok()
        }
        Self { lookup: var }
    }
}

impl Env<Box<dyn Fn(&str) -> Option<String>>> {
    /// A fixed set of variables (tests).
    pub fn of(vars: &[(&str, &str)]) -> Self {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Self {
            lookup: Box::new(move |name| vars.get(name).cloned()),
        }
    }
}

impl<F: Fn(&str) -> Option<String>> Env<F> {
    /// An environment read through `lookup`.
    pub fn new(lookup: F) -> Self {
        Self { lookup }
    }

    /// The value, untrimmed, or `None` when unset or blank.
    pub fn get(&self, name: &str) -> Option<String> {
        (self.lookup)(name).filter(|v| !v.trim().is_empty())
    }

    /// The value, or `Missing`.
    pub fn required(&self, name: &'static str) -> Result<String, ConfigError> {
        self.get(name).ok_or(ConfigError::Missing(name))
    }

    /// The trimmed value when `valid` accepts it; unset is `None`; anything else is `Invalid`
    /// with `rule`.
    pub fn checked(
        &self,
        name: &'static str,
        valid: impl Fn(&str) -> bool,
        rule: &'static str,
    ) -> Result<Option<String>, ConfigError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) if valid(v.trim()) => Ok(Some(v.trim().to_owned())),
            Some(v) => Err(invalid(name, &v, rule)),
        }
    }

    /// As `checked`, but a variable that is set and blank is `Invalid`, not unset: for a setting
    /// whose blank value would quietly turn a check off (a template that lost a reference).
    pub fn checked_when_set(
        &self,
        name: &'static str,
        valid: impl Fn(&str) -> bool,
        rule: &'static str,
    ) -> Result<Option<String>, ConfigError> {
        match (self.lookup)(name) {
            None => Ok(None),
            Some(v) if !v.trim().is_empty() && valid(v.trim()) => Ok(Some(v.trim().to_owned())),
            Some(v) => Err(invalid(name, &v, rule)),
        }
    }

    /// A number within `range`; unset is `None`; anything else is `Invalid` with `rule`.
    pub fn number<T>(
        &self,
        name: &'static str,
        range: RangeInclusive<T>,
        rule: &'static str,
    ) -> Result<Option<T>, ConfigError>
    where
        T: FromStr + PartialOrd,
    {
        self.parsed(
            name,
            |v| v.parse::<T>().ok().filter(|n| range.contains(n)),
            rule,
        )
    }

    /// The trimmed value through `parse`; unset is `None`; `parse` saying `None` is `Invalid`
    /// with `rule`.
    pub fn parsed<T>(
        &self,
        name: &'static str,
        parse: impl Fn(&str) -> Option<T>,
        rule: &'static str,
    ) -> Result<Option<T>, ConfigError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => parse(v.trim())
                .map(Some)
                .ok_or_else(|| invalid(name, &v, rule)),
        }
    }
}

/// The most a function may keep in hand before Lambda's deadline (`DEADLINE_MARGIN_MS`): 15
/// minutes, Lambda's longest timeout.
pub const MAX_DEADLINE_MARGIN_MS: u64 = 900_000;

impl<F: Fn(&str) -> Option<String>> Env<F> {
    /// `DEADLINE_MARGIN_MS`, the time both functions keep in hand before Lambda's deadline:
    /// milliseconds from 0 to 900000, `default` when unset.
    pub fn deadline_margin(&self, default: Duration) -> Result<Duration, ConfigError> {
        Ok(self
            .number(
                "DEADLINE_MARGIN_MS",
                0..=MAX_DEADLINE_MARGIN_MS,
                "expected milliseconds from 0 to 900000",
            )?
            .map_or(default, Duration::from_millis))
    }
}

/// `name`'s value broke `rule`.
pub fn invalid(name: &'static str, value: &str, rule: &'static str) -> ConfigError {
    ConfigError::Invalid {
        name,
        value: value.to_owned(),
        rule,
    }
}

/// An http(s) URL with a host and a path: the form of every SQS queue URL (and of a local one).
pub fn is_queue_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    rest.and_then(|r| r.split_once('/'))
        .is_some_and(|(host, path)| !host.is_empty() && !path.is_empty() && !url.contains(' '))
}

/// An http(s) URL with a host: an endpoint such as `http://127.0.0.1:5000`.
pub fn is_endpoint_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/') && !url.contains(' '))
}

/// A DynamoDB table name: 3-255 characters of a-z, A-Z, 0-9, '_', '-', '.'.
pub fn is_table_name(name: &str) -> bool {
    (3..=255).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// An S3 bucket name: 3-63 characters of a-z, 0-9, '.', '-', starting and ending with a letter
/// or digit, no '..'.
pub fn is_bucket_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (3..=63).contains(&name.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && !name.contains("..")
}

/// An SQS queue's ARN: `arn:<partition>:sqs:<region>:<account>:<name>`, the name 1-80
/// characters of a-z, A-Z, 0-9, '-', '_' (a FIFO queue's ending in `.fifo`).
pub fn is_queue_arn(arn: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    matches!(parts.as_slice(), ["arn", partition, "sqs", region, account, name]
        if !partition.is_empty()
            && !region.is_empty()
            && account.len() == 12
            && account.bytes().all(|b| b.is_ascii_digit())
            && (1..=80).contains(&name.len())
            && name.strip_suffix(".fifo").unwrap_or(name).bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_')))
}

/// A KMS key's ARN: `arn:<partition>:kms:<region>:<account>:key/<id>`.
pub fn is_key_arn(arn: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    matches!(parts.as_slice(), ["arn", partition, "kms", region, account, resource]
        if !partition.is_empty()
            && !region.is_empty()
            && account.len() == 12
            && account.bytes().all(|b| b.is_ascii_digit())
            && resource.strip_prefix("key/").is_some_and(|id| !id.is_empty() && !id.contains(char::is_whitespace)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_is_unset_and_errors_name_the_variable() {
        let env = Env::of(&[("A", " "), ("N", "7"), ("BAD", "seven")]);
        assert_eq!(env.get("A"), None);
        assert_eq!(env.required("A"), Err(ConfigError::Missing("A")));
        assert_eq!(env.number("N", 1..=10u32, "1-10"), Ok(Some(7)));
        assert_eq!(env.number("UNSET", 1..=10u32, "1-10"), Ok(None));
        let error = env.number("BAD", 1..=10u32, "1-10").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("BAD=\"seven\" is invalid: 1-10")
        );
        assert!(env.number("N", 1..=5u32, "1-5").is_err());
    }

    #[test]
    fn a_blank_value_is_invalid_where_it_would_turn_a_check_off() {
        let env = Env::of(&[("A", ""), ("B", " x ")]);
        let error = env
            .checked_when_set("A", |_| true, "not blank")
            .unwrap_err();
        assert!(
            error.to_string().starts_with("A=\"\" is invalid"),
            "{error}"
        );
        assert_eq!(env.checked("A", |_| true, "any"), Ok(None));
        assert_eq!(
            env.checked_when_set("B", |_| true, "any"),
            Ok(Some("x".into()))
        );
        assert_eq!(env.checked_when_set("UNSET", |_| false, "any"), Ok(None));
    }

    #[test]
    fn names_and_urls_are_checked_by_their_form() {
        assert!(is_queue_url("https://sqs.eu-west-1.amazonaws.com/1/q"));
        assert!(!is_queue_url("arn:aws:sqs:us-east-1:1:q"));
        assert!(is_endpoint_url("http://127.0.0.1:5000"));
        assert!(!is_endpoint_url("localhost:5000"));
        assert!(is_table_name("audit.prod-1"));
        assert!(!is_table_name("T"));
        assert!(is_bucket_name("audit-archive-123"));
        assert!(!is_bucket_name("-bucket"));
        assert!(is_key_arn("arn:aws:kms:us-east-1:123456789012:key/abc"));
        assert!(!is_key_arn("alias/audit-digest"));
        assert!(is_queue_arn(
            "arn:aws:sqs:eu-west-1:123456789012:AuditAccessQueue"
        ));
        assert!(is_queue_arn(
            "arn:aws:sqs:us-east-1:123456789012:audit-stack_Access.fifo"
        ));
        assert!(!is_queue_arn(
            "https://sqs.eu-west-1.amazonaws.com/123456789012/q"
        ));
        assert!(!is_queue_arn("arn:aws:sqs:us-east-1:1:q"));
        assert!(!is_queue_arn("arn:aws:sqs:us-east-1:123456789012:"));
        assert!(!is_queue_arn("arn:aws:sqs:us-east-1:123456789012:a:b"));
        assert!(!is_queue_arn("arn:aws:sns:us-east-1:123456789012:topic"));
    }
}
