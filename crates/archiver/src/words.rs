//! Owns how the archiver words an AWS error in its logs, metrics and invocation errors ("the
//! bucket is unavailable: …", a refusal's code), from `audit_aws::error`'s one classification
//! (docs/architecture.md). Must not classify an answer itself, nor know which request failed.

use std::fmt;

use audit_aws::dynamodb::batch_get::BatchGetError;
use audit_aws::error::{AwsError, ErrorKind};

/// A request's failure as the archiver decides on it: it may pass, or it was refused.
pub fn refused(error: &AwsError) -> bool {
    !error.kind.is_transient()
}

/// A short code for logs and metrics: `timed_out`, `unavailable` (it may pass), or the service's
/// code of a refusal (`Unknown` when it gave none).
pub fn code(error: &AwsError) -> &str {
    match error.kind {
        ErrorKind::TimedOut => "timed_out",
        _ if !refused(error) => "unavailable",
        _ => refusal_code(error),
    }
}

/// The service's code of a refusal, `Unknown` when it gave none.
pub fn refusal_code(error: &AwsError) -> &str {
    if error.code.is_empty() {
        "Unknown"
    } else {
        &error.code
    }
}

/// A bucket request's failure in words.
pub struct Bucket<'a>(pub &'a AwsError);

impl fmt::Display for Bucket<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let error = self.0;
        match error.kind {
            ErrorKind::TimedOut => f.write_str("the request timed out"),
            _ if !refused(error) && error.code.is_empty() => {
                write!(f, "the bucket is unavailable: {}", error.text)
            }
            _ if !refused(error) => write!(
                f,
                "the bucket is unavailable: {}: {}",
                error.code, error.message
            ),
            _ => write!(
                f,
                "the bucket refused: {}: {}",
                refusal_code(error),
                error.message
            ),
        }
    }
}

/// A short code for the signing key's failure: `unavailable` (it may pass, a time-out too), or
/// KMS's code of a refusal (`Unknown` when it gave none).
pub fn sign_code(error: &AwsError) -> &str {
    if refused(error) {
        refusal_code(error)
    } else {
        "unavailable"
    }
}

/// A signing request's failure in words.
pub struct SigningKey<'a>(pub &'a AwsError);

impl fmt::Display for SigningKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let error = self.0;
        if refused(error) {
            let code = refusal_code(error);
            write!(f, "the signing key refused: {code}: {}", error.message)
        } else {
            write!(f, "the signing key is unavailable: {}", error.text)
        }
    }
}

/// A read of the audit table's failure in words (a refusal with the service's code and its
/// whole text, as the repair's invocation error gives it).
pub struct Table<'a>(pub &'a BatchGetError);

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            BatchGetError::Request(error) if refused(error) => {
                write!(f, "the table refused: {}: {}", error.code, error.text)
            }
            BatchGetError::Request(error) => {
                write!(f, "the table is unavailable: {}", error.text)
            }
            BatchGetError::Unprocessed { left, tries, .. } => write!(
                f,
                "the table is unavailable: DynamoDB left {left} key(s) unprocessed after {} retries (read capacity)",
                tries.saturating_sub(1)
            ),
        }
    }
}

/// A bucket failure of the archiver's own (not an answer of S3's) that another attempt may pass.
pub fn unavailable(text: impl Into<String>) -> AwsError {
    AwsError::without_answer(ErrorKind::Unavailable, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3s_answers_are_worded_as_the_archiver_retries_them() {
        let answer = |status, code: &str| AwsError::from_answer(status, code, "m");
        let words = |error: &AwsError| (Bucket(error).to_string(), code(error).to_owned());
        assert_eq!(
            words(&answer(404, "NoSuchBucket")),
            (
                "the bucket refused: NoSuchBucket: m".into(),
                "NoSuchBucket".into()
            )
        );
        assert_eq!(
            words(&answer(403, "")),
            ("the bucket refused: Unknown: m".into(), "Unknown".into())
        );
        assert!(refused(&answer(400, "ExpiredToken")));
        for (status, code) in [
            (409, "ConditionalRequestConflict"),
            (503, "SlowDown"),
            (400, "RequestTimeout"),
        ] {
            assert_eq!(
                words(&answer(status, code)),
                (
                    format!("the bucket is unavailable: {code}: m"),
                    "unavailable".into()
                )
            );
        }
        assert!(!refused(&answer(503, "")));
        let timed_out = AwsError::without_answer(ErrorKind::TimedOut, "t");
        assert_eq!(
            words(&timed_out),
            ("the request timed out".into(), "timed_out".into())
        );
        assert_eq!(
            Bucket(&unavailable("reset")).to_string(),
            "the bucket is unavailable: reset"
        );
    }

    #[test]
    fn kms_errors_are_unavailable_when_they_may_pass_and_refused_otherwise() {
        for code in [
            "ThrottlingException",
            "KMSInternalException",
            "DependencyTimeoutException",
            "KeyUnavailableException",
            "LimitExceededException",
        ] {
            let error = AwsError::from_answer(400, code, "m");
            assert_eq!(
                SigningKey(&error).to_string(),
                format!("the signing key is unavailable: {code}: m"),
                "{code}"
            );
            assert_eq!(sign_code(&error), "unavailable");
        }
        let disabled = AwsError::from_answer(400, "DisabledException", "off");
        assert_eq!(
            SigningKey(&disabled).to_string(),
            "the signing key refused: DisabledException: off"
        );
        assert_eq!(sign_code(&disabled), "DisabledException");
        assert!(refused(&AwsError::from_answer(
            400,
            "AccessDeniedException",
            "no"
        )));
    }
}
