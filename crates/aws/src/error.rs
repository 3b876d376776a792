//! Owns the one classification of what AWS answered: an SDK error, or a status and an error code
//! read off the wire, becomes an `AwsError` of one `ErrorKind` (not found, denied, throttled,
//! unavailable, timed out, rejected) that every port maps from. Must not know any port's errors.

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

/// What an AWS error means to a caller deciding what to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The thing named does not exist (a table, bucket, queue, key; or a key or version in a
    /// bucket): it will not appear by trying again.
    NotFound,
    /// The caller may not do this (IAM, a service or resource control policy, a VPC endpoint
    /// policy, a KMS key policy, a disabled key): the deployment's fault, fixed by a person.
    Denied,
    /// The service asked the caller to slow down.
    Throttled,
    /// The service or the way to it failed (5xx, a lost connection, refused credentials, a
    /// conflicting concurrent request): another attempt may succeed.
    Unavailable,
    /// The request took longer than the caller allows: its outcome is unknown.
    TimedOut,
    /// The service refused the request as it was made: it fails again unchanged.
    Rejected,
}

impl ErrorKind {
    /// Whether another attempt of the same request may succeed.
    pub fn is_transient(self) -> bool {
        matches!(self, Self::Throttled | Self::Unavailable | Self::TimedOut)
    }
}

/// An AWS error: its kind, the service's code and message (empty when there is none), and the
/// HTTP status when an answer came.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text}")]
pub struct AwsError {
    pub kind: ErrorKind,
    pub code: String,
    pub message: String,
    pub status: Option<u16>,
    /// The error in words: `code: message`, or the SDK's own account of it with its causes.
    pub text: String,
}

impl AwsError {
    /// An error from an answer read off the wire (a status, the service's code and message).
    pub fn from_answer(status: u16, code: &str, message: &str) -> Self {
        Self {
            kind: classify(Some(status), code),
            code: code.to_owned(),
            message: message.to_owned(),
            status: Some(status),
            text: code_and_message(code, message),
        }
    }

    /// An error of a given kind with no answer behind it (a connection that failed, a time-out).
    pub fn without_answer(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self {
            kind,
            code: String::new(),
            message: String::new(),
            status: None,
            text: text.into(),
        }
    }

    /// An SDK error of any client: a service error by its status and code; a time-out; a
    /// connection or response failure as unavailable; anything else (a request the SDK could not
    /// build) as rejected.
    pub fn from_sdk<E>(error: &SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let status = error.raw_response().map(|r| r.status().as_u16());
        let kind = match error {
            SdkError::ServiceError(_) => classify(status, error.code().unwrap_or_default()),
            SdkError::TimeoutError(_) => ErrorKind::TimedOut,
            SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => ErrorKind::Unavailable,
            _ => ErrorKind::Rejected,
        };
        Self {
            kind,
            code: error.code().unwrap_or_default().to_owned(),
            message: error.message().unwrap_or_default().to_owned(),
            status,
            text: describe(error),
        }
    }

    /// Whether the service's code is one of `codes`.
    pub fn is(&self, codes: &[&str]) -> bool {
        codes.contains(&self.code.as_str())
    }
}

/// `code: message`, or the one that is there.
fn code_and_message(code: &str, message: &str) -> String {
    match (code.is_empty(), message.is_empty()) {
        (false, false) => format!("{code}: {message}"),
        (false, true) => code.to_owned(),
        (true, _) => message.to_owned(),
    }
}

/// An SDK error in words: the service's code and message when there is one, else the SDK's own
/// account of it (with its source chain, which names the connection problem).
pub fn describe<E, R>(error: &SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    if let (Some(code), message) = (error.code(), error.message()) {
        return format!("{code}: {}", message.unwrap_or_default());
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Codes that name a missing thing, across DynamoDB, S3, SQS and KMS.
const NOT_FOUND: [&str; 8] = [
    "ResourceNotFoundException",
    "NotFoundException",
    "NoSuchBucket",
    "NoSuchKey",
    "NoSuchVersion",
    "AWS.SimpleQueueService.NonExistentQueue",
    "NonExistentQueue",
    "QueueDoesNotExist",
];

/// Codes that say the caller may not do this (`ErrorKind::Denied`):
/// - `AccessDeniedException`, `AccessDenied`, `NotAuthorized`, `AllAccessDisabled`: whatever
///   policy refuses the call (the role's, a boundary, a service or resource control policy, a
///   resource policy, a VPC endpoint policy), in each service's and AWS's common words;
/// - `KMSAccessDeniedException`, `KMSDisabledException`, `KMSInvalidStateException`,
///   `KMSNotFoundException`: how services that encrypt with KMS name a refused, disabled,
///   pending-deletion or missing key: the deployment's problem, never the request's;
/// - `KMS.AccessDeniedException`, `KmsAccessDenied`: SQS's words (query and JSON protocol) for
///   a key policy that refuses the queue's encryption.
///
/// Not here: refused credentials or signatures (`CREDENTIALS_REFUSED`): they are unavailable,
/// retried with the credentials fetched again.
const DENIED: [&str; 10] = [
    "AccessDeniedException",
    "AccessDenied",
    "NotAuthorized",
    "AllAccessDisabled",
    "KMSAccessDeniedException",
    "KMSDisabledException",
    "KMSInvalidStateException",
    "KMSNotFoundException",
    "KMS.AccessDeniedException",
    "KmsAccessDenied",
];

/// Answers that say the request's signature or credentials were refused: not a property of the
/// request's content, so worth another attempt once the credentials are fetched again (expired
/// or rotated ones).
pub const CREDENTIALS_REFUSED: [&str; 5] = [
    "ExpiredTokenException",
    "InvalidSignatureException",
    "IncompleteSignatureException",
    "UnrecognizedClientException",
    "MissingAuthenticationTokenException",
];

/// Codes that ask the caller to slow down, besides any code that contains `Throttl`.
const THROTTLED: [&str; 5] = [
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "LimitExceededException",
    "SlowDown",
    "TooManyRequestsException",
];

/// Codes of a service that failed or of a request that lost a race, worth another attempt.
const UNAVAILABLE: [&str; 11] = [
    "InternalServerError",
    "InternalError",
    "ServiceUnavailable",
    "TransactionConflictException",
    "ReplicatedWriteConflictException",
    "RequestTimeout",
    "RequestTimeoutException",
    "KMSInternalException",
    "DependencyTimeoutException",
    "KeyUnavailableException",
    "ConditionalRequestConflict",
];

/// The one classification: by the service's error code first (the same code means the same in
/// every service), then by the HTTP status where the code says nothing (429 and 409: slow down
/// or a concurrent request; 5xx: the service; a bare 403: a policy in front of it).
///
/// `Rejected` needs the service's own word: a 4xx that names an error code. A 4xx with no code
/// at all (a bare 400, 404, 413, an HTML page) did not come from an AWS service judging the
/// request, since they always name their error (S3's HEAD answers aside, whose 404 the SDK names
/// `NotFound` and whose bare 403 is `Denied` above): it came from something on the way (a proxy,
/// a gateway, a load balancer, a firewall), and says nothing against the request. It is
/// `Unavailable`: another attempt, or the same one once the way is fixed, may succeed, and a
/// caller must not give the request up for good because of it.
pub fn classify(status: Option<u16>, code: &str) -> ErrorKind {
    match code {
        _ if NOT_FOUND.contains(&code) => ErrorKind::NotFound,
        _ if CREDENTIALS_REFUSED.contains(&code) => ErrorKind::Unavailable,
        _ if DENIED.contains(&code) => ErrorKind::Denied,
        _ if THROTTLED.contains(&code) || code.contains("Throttl") => ErrorKind::Throttled,
        _ if UNAVAILABLE.contains(&code) => ErrorKind::Unavailable,
        _ => match status {
            Some(500..) | None => ErrorKind::Unavailable,
            Some(429) => ErrorKind::Throttled,
            Some(409) => ErrorKind::Unavailable,
            Some(403) if code.is_empty() => ErrorKind::Denied,
            Some(_) if code.is_empty() => ErrorKind::Unavailable,
            Some(_) => ErrorKind::Rejected,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_code_means_the_same_in_every_service() {
        for code in [
            "ResourceNotFoundException",
            "NoSuchBucket",
            "AWS.SimpleQueueService.NonExistentQueue",
            "NotFoundException",
        ] {
            assert_eq!(classify(Some(400), code), ErrorKind::NotFound, "{code}");
        }
        for code in [
            "AccessDeniedException",
            "AccessDenied",
            "KMSDisabledException",
        ] {
            assert_eq!(classify(Some(400), code), ErrorKind::Denied, "{code}");
        }
        for code in [
            "ThrottlingException",
            "ProvisionedThroughputExceededException",
            "SlowDown",
            "Throttling",
        ] {
            assert_eq!(classify(Some(400), code), ErrorKind::Throttled, "{code}");
        }
        for code in [
            "ExpiredTokenException",
            "UnrecognizedClientException",
            "KMSInternalException",
            "TransactionConflictException",
        ] {
            assert_eq!(classify(Some(400), code), ErrorKind::Unavailable, "{code}");
        }
        assert_eq!(
            classify(Some(400), "ValidationException"),
            ErrorKind::Rejected
        );
    }

    #[test]
    fn a_status_decides_where_the_code_says_nothing() {
        assert_eq!(classify(Some(503), ""), ErrorKind::Unavailable);
        assert_eq!(classify(Some(500), "Weird"), ErrorKind::Unavailable);
        assert_eq!(classify(Some(429), "Weird"), ErrorKind::Throttled);
        assert_eq!(classify(Some(409), "Weird"), ErrorKind::Unavailable);
        assert_eq!(classify(Some(403), ""), ErrorKind::Denied);
        assert_eq!(classify(Some(403), "Weird"), ErrorKind::Rejected);
        assert_eq!(classify(None, "Weird"), ErrorKind::Unavailable);
        // A 4xx the service named is its refusal; one with no code came from something on the
        // way (a proxy, a gateway) and says nothing against the request.
        assert_eq!(classify(Some(400), "Weird"), ErrorKind::Rejected);
        for status in [400, 404, 413] {
            assert_eq!(
                classify(Some(status), ""),
                ErrorKind::Unavailable,
                "{status}"
            );
        }
        assert_eq!(classify(Some(429), ""), ErrorKind::Throttled);
    }

    #[test]
    fn an_answer_is_described_by_its_code_and_message() {
        let error = AwsError::from_answer(400, "ThrottlingException", "slow down");
        assert_eq!(error.kind, ErrorKind::Throttled);
        assert_eq!(error.to_string(), "ThrottlingException: slow down");
        assert_eq!(AwsError::from_answer(400, "X", "").to_string(), "X");
        assert!(error.kind.is_transient());
        assert!(!ErrorKind::Denied.is_transient());
    }
}
