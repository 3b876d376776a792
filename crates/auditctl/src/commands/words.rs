//! Owns the words for people of every error the command line reports: its own (`TrailError`), the
//! trail library's (`audit_trail::Error`) and the proof library's (`audit_proof::Error`), each
//! with the fix ("set TABLE_NAME or --table"; docs/architecture.md "The crates", auditctl). Must
//! not know how the errors arose.

/// What went wrong, each with the fix in words. `auditctl` exits 1 on these.
#[derive(Debug, thiserror::Error)]
pub enum TrailError {
    #[error("table {table} not found at {at}: set TABLE_NAME or --table, or deploy the stack")]
    TableNotFound { table: String, at: String },
    #[error(
        "table {table} has no index {index} (the trail is read in time order from it): deploy the current template.yaml, which adds it"
    )]
    NoTimeIndex { table: String, index: String },
    #[error(
        "table {table} has no index {index} (lookups by {field} read it): deploy template.yaml with LookupIndexes naming {field} (its default names all three)"
    )]
    NoLookupIndex {
        table: String,
        index: String,
        field: &'static str,
    },
    /// A lookup without its index and without --from: reading the time index instead would read
    /// every event of the range, which no one asked for.
    #[error(
        "table {table} has no index {index} (LookupIndexes leaves out {field}) and this lookup has no --from: give --from (and --to) to read every event of that range from the time index and keep those of that {field}, or deploy template.yaml with LookupIndexes naming {field}"
    )]
    LookupWithoutIndexNeedsFrom {
        table: String,
        index: String,
        field: &'static str,
    },
    #[error(
        "index {index} of table {table} is {status}, not ACTIVE: wait until it is built (aws dynamodb describe-table --table-name {table} shows IndexStatus), then run this again"
    )]
    IndexNotActive {
        table: String,
        index: String,
        status: String,
    },
    #[error("no {what} URL: set {env} or {flag} (stack output {output})")]
    NoQueueUrl {
        what: &'static str,
        env: &'static str,
        flag: &'static str,
        output: &'static str,
    },
    #[error("queue {url} not found: check {env} or {flag}, or deploy the stack")]
    QueueNotFound {
        url: String,
        env: &'static str,
        flag: &'static str,
    },
    /// The dead-letter queue refused the caller: it is the operator's.
    #[error(
        "not allowed to work the dead-letter queue {url}: {detail}; listing and redriving it need AuditOperatorPolicy (AuditReaderPolicy reads the trail only)"
    )]
    QueueDenied { url: String, detail: String },
    /// A setting `verify` needs, absent.
    #[error(
        "{var} is not set: export it from the stack's outputs ({output}) or .local/stack.env, or pass {flag}"
    )]
    NotSet {
        var: &'static str,
        flag: &'static str,
        output: &'static str,
    },
    #[error(
        "archive bucket {bucket} not found at {at}: check ARCHIVE_BUCKET or --bucket (stack output AuditArchiveBucketName)"
    )]
    BucketNotFound { bucket: String, at: String },
    #[error(
        "digest key {key} not found at {at}: check DIGEST_KEY_ID or --key-id (stack output AuditDigestKeyArn)"
    )]
    KeyNotFound { key: String, at: String },
    #[error(
        "digest key {key} cannot check the digests: {detail}; DIGEST_KEY_ID or --key-id must name the stack's AuditDigestKey (stack output AuditDigestKeyArn)"
    )]
    KeyUnsuitable { key: String, detail: String },
    /// `verify` was given another digest period than the archiver's (its digests say theirs).
    #[error(
        "the digest {key}, signed by the digest key, is of {found} s periods, not {given}: set DIGEST_PERIOD_SECONDS or --period-seconds to the archiver's ({found})"
    )]
    PeriodMismatch { key: String, found: u32, given: u32 },
    /// A library's error worded here (an access denied with the policy it needs, a listener's
    /// port), or a command's own failure (a local file, a partial redrive), already in words for
    /// people.
    #[error("{0}")]
    Worded(String),
    /// A listing that could not get every message: printed what it got, then this.
    #[error(transparent)]
    Incomplete(#[from] audit_trail::dlq::Shortfall),
    #[error("writing the output: {0}")]
    Output(#[from] std::io::Error),
    /// The access event could not be sent: nothing was read.
    #[error(transparent)]
    Access(#[from] audit_trail::access::AccessError),
    /// The stack's table's tags could not be read.
    #[error(transparent)]
    Tags(#[from] audit_trail::stack::TagError),
    /// The archiver did not repair (`archive repair`).
    #[error(transparent)]
    Repair(#[from] RepairFailure),
    /// A proof of the transparency log could not be made (`prove`, `consistency`): said with
    /// what to do (`prove_words`).
    #[error("{}", prove_words(.0))]
    Prove(#[from] audit_proof::prove::ProveError),
    /// A read failed after its access was recorded, and its failure event could not be sent.
    #[error("{error}\nnote: {why}")]
    Unrecorded {
        error: Box<TrailError>,
        why: audit_trail::access::FailureNotSent,
    },
}

impl TrailError {
    /// The failure's kind, short, as an access event's `error.kind` says it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TableNotFound { .. } => "table_not_found",
            Self::NoTimeIndex { .. }
            | Self::NoLookupIndex { .. }
            | Self::LookupWithoutIndexNeedsFrom { .. } => "no_index",
            Self::IndexNotActive { .. } => "index_not_active",
            Self::NoQueueUrl { .. } | Self::NotSet { .. } => "not_configured",
            Self::QueueNotFound { .. } => "queue_not_found",
            Self::QueueDenied { .. } => "denied",
            Self::BucketNotFound { .. } => "bucket_not_found",
            Self::KeyNotFound { .. } => "key_not_found",
            Self::KeyUnsuitable { .. } => "key_unsuitable",
            Self::PeriodMismatch { .. } => "period_mismatch",
            Self::Worded(text) => cause(text).map_or("failed", Cause::kind),
            Self::Incomplete(_) => "incomplete",
            Self::Output(_) => "output",
            Self::Access(_) => "access_not_recorded",
            Self::Tags(_) => "tags",
            Self::Repair(_) => "repair",
            Self::Prove(_) => "no_proof",
            Self::Unrecorded { error, .. } => error.kind(),
        }
    }
}

/// Why a proof could not be made, in today's words: what the library found, then what to do (the
/// flag to pass, when to try again, `auditctl verify` to find what was changed).
pub fn prove_words(error: &audit_proof::prove::ProveError) -> String {
    use audit_proof::prove::ProveError;
    let found = error.to_string();
    match error {
        ProveError::NotInTable { .. } => format!(
            "{found} (expired by TTL, or never received): pass --audit-time with its auditTime to look for it in the archive's indexes from that time's period"
        ),
        ProveError::Ambiguous { .. } => {
            format!("{found}: pass --audit-time with the one to prove")
        }
        ProveError::NoSuchTime { .. } => {
            format!("{found}: pass one of those, or leave --audit-time out")
        }
        // The event's period and when it is sealed: nothing else to do but wait for it.
        ProveError::NotSealed { .. } => found,
        ProveError::Overdue { .. } => format!(
            "{found}: run `auditctl verify` over it to see why (digest missing?), then try again"
        ),
        ProveError::LogPending { .. } => {
            format!("{found}: the archiver's next run writes it; try again in a few minutes")
        }
        ProveError::NotFound {
            before_log,
            no_digest,
            ..
        } => {
            let mut notes = Vec::new();
            if *before_log > 0 {
                notes.push(format!(
                    "{before_log} of them sealed before the transparency log began: their events are not leaves; `auditctl verify` proves them whole"
                ));
            }
            if *no_digest > 0 {
                notes.push(format!(
                    "{no_digest} of them without a digest although a later period has one: before the trail began, or their digest is missing"
                ));
            }
            let before = if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join("; "))
            };
            format!(
                "{found}{before}: check the messageId and --audit-time (`auditctl get` shows its receivedAt), and run `auditctl verify` over those periods"
            )
        }
        ProveError::NoCheckpoint => format!(
            "{found}: the transparency log starts with the first period sealed by an archiver that writes it; try again after the next period is sealed"
        ),
        ProveError::NoCheckpointOf { .. } => format!(
            "{found}: pass a --tree-size that has one (`aws s3 ls s3://BUCKET/log/checkpoints/` lists them), or leave it out for the newest"
        ),
        ProveError::TooSmall { leaf, .. } => format!(
            "{found}: pass a --tree-size larger than {leaf}, or leave it out for the newest"
        ),
        ProveError::SizesOutOfOrder { .. } => {
            format!("{found}: a consistency proof goes from an older (smaller) tree to a newer one")
        }
        ProveError::Broken { period, .. } => {
            let period = period.as_ref().map(|p| format!(" {p}")).unwrap_or_default();
            format!(
                "{found}: run `auditctl verify` over the period{period} to find what was changed"
            )
        }
        ProveError::Inconsistent(_) => {
            format!("{found}; run `auditctl verify` (it reports the checkpoints that disagree)")
        }
    }
}

/// The proof library's errors in today's words: the policy to attach, the flag or variable to set.
impl From<audit_proof::Error> for TrailError {
    fn from(error: audit_proof::Error) -> Self {
        use audit_proof::Error;
        match error {
            Error::BucketNotFound { bucket, at, .. } => Self::BucketNotFound { bucket, at },
            Error::BucketDenied { bucket, error } => Self::Worded(format!(
                "not allowed to read the archive bucket {bucket}: {error}; attach AuditReaderPolicy (s3:ListBucketVersions, s3:GetObjectVersion on the archive)"
            )),
            Error::LockDenied { bucket, error } => Self::Worded(format!(
                "not allowed to read the Object Lock configuration of the archive bucket {bucket}: {error}; attach AuditReaderPolicy (s3:GetBucketObjectLockConfiguration on the archive)"
            )),
            Error::Vanished { key } => {
                Self::Worded(format!("{key} was listed but is not there: run again"))
            }
            Error::KeyNotFound { key, at } => Self::KeyNotFound { key, at },
            Error::KeyDenied { key, error } => Self::Worded(format!(
                "not allowed to read the public key of the digest key {key}: {error}; attach AuditReaderPolicy (kms:GetPublicKey on it)"
            )),
            Error::KeyUnsuitable { key, detail } => Self::KeyUnsuitable { key, detail },
            Error::AttestationKey {
                key,
                denied: true,
                detail,
            } => Self::Worded(format!(
                "the receiver's attestation key {key}: {detail}; attach AuditReaderPolicy (kms:GetPublicKey on AuditAttestationKey)"
            )),
            Error::AttestationKey { key, detail, .. } => Self::Worded(format!(
                "the receiver's attestation key {key}: {detail}; ATTESTATION_KEY_ID or --attestation-key-id must name the stack's AuditAttestationKey (stack output AuditAttestationKeyArn), or leave it unset not to check attestations"
            )),
            Error::PeriodMismatch { key, found, given } => {
                Self::PeriodMismatch { key, found, given }
            }
            Error::CosignatureDenied { key, error } => Self::Worded(format!(
                "not allowed to write the cosignature {key}: {error}; the witness needs AuditWitnessPolicy (s3:PutObject on log/cosignatures/*), or in another account the bucket policy statement of docs/operations.md \"Witnesses\""
            )),
            Error::Prove(error) => Self::Prove(error),
            Error::Table(error) => match error.downcast::<audit_trail::Error>() {
                Ok(error) => Self::from(*error),
                Err(error) => Self::Worded(error.to_string()),
            },
            Error::Output(error) => Self::Output(error),
            // Said as the library says them: what failed, and the service's own words.
            error @ (Error::Bucket { .. }
            | Error::Body { .. }
            | Error::NotANote { .. }
            | Error::Key { .. }
            | Error::WitnessState(_)
            | Error::Cosignature { .. }) => Self::Worded(error.to_string()),
        }
    }
}

/// The viewer's errors in the commands' words: its pages show them as the commands print them.
impl From<audit_viewer::Error> for TrailError {
    fn from(error: audit_viewer::Error) -> Self {
        use audit_viewer::Error;
        match error {
            Error::Trail(error) => error.into(),
            Error::Access(error) => error.into(),
            Error::Tags(error) => error.into(),
            Error::Proof(error) => error.into(),
            Error::NoKey => Self::NotSet {
                var: "DIGEST_KEY_ID",
                flag: "--key-id",
                output: "AuditDigestKeyArn",
            },
            Error::Listen { address, error } => Self::Worded(format!(
                "cannot listen on {address}: {error}; choose another --port, or leave it out for a free one"
            )),
            error @ (Error::Listing { .. }
            | Error::VerifyStopped(_)
            | Error::NoRandom(_)
            | Error::PastHotWindow { .. }) => Self::Worded(error.to_string()),
        }
    }
}

/// What `auditctl query` says on stderr when it reads a lookup from the time index, the table
/// having no index for `field`.
pub fn lookup_on_time_index(
    table: &str,
    index: &str,
    field: &str,
    range: &audit_model::range::TimeRange,
) -> String {
    format!(
        "warning: table {table} has no index {index} (LookupIndexes leaves out {field}): reading every event from {} to {} in the time index and keeping those of that {field}; deploy template.yaml with LookupIndexes naming {field} for a lookup that reads only them",
        range.from, range.to
    )
}

/// Why `auditctl query` cannot read a range that reaches before the table's hot window: the
/// archive bucket is not set.
pub fn hot_window_needs_bucket(table: &str, window: &audit_trail::hot::HotWindow) -> String {
    format!(
        "the range reaches before {start}, where the hot window of table {table} starts (RetentionDays {days}: DynamoDB's TTL deletes older items; the archive keeps them): set ARCHIVE_BUCKET or --bucket (stack output AuditArchiveBucketName) to read that part from the archive, or start --from at {start}",
        start = window.start,
        days = window.days
    )
}

/// What `auditctl query` says on stderr when it read part of the range from the archive: `first`
/// is the first period read (`None`: the archive holds no object yet).
pub fn read_from_archive(
    window: &audit_trail::hot::HotWindow,
    bucket: &str,
    first: Option<&str>,
    read: &audit_proof::prove::archived::Archived,
    events: usize,
) -> String {
    let start = &window.start;
    let days = window.days;
    let Some(first) = first else {
        return format!(
            "before {start} (the table's hot window: RetentionDays {days}) events are read from the archive s3://{bucket}, which holds none yet; from {start} on, from the table"
        );
    };
    let mut said = format!(
        "before {start} (the table's hot window: RetentionDays {days}) events are read from the archive s3://{bucket}: the {periods} period(s) received from {first} to now ({indexed} through their index, the rest listed), {objects} object(s), {events} event(s); from {start} on, from the table",
        periods = read.periods,
        indexed = read.indexed,
        objects = read.objects,
    );
    if read.unreadable > 0 {
        said.push_str(&format!(
            "; {} object(s) of periods not sealed yet are not gzip JSON lines and were passed over (not the archiver's: `auditctl verify` names them)",
            read.unreadable
        ));
    }
    said
}

/// How the viewer's pages word its errors: as the commands do (`Viewer::with_words`).
pub fn viewer_words(error: audit_viewer::Error) -> String {
    TrailError::from(error).to_string()
}

/// The trail library's errors in today's words: where a flag or a variable fixes it, it is named.
impl From<audit_trail::Error> for TrailError {
    fn from(error: audit_trail::Error) -> Self {
        use audit_trail::Error;
        match error {
            Error::TableNotFound { table, at } => Self::TableNotFound { table, at },
            Error::NoTimeIndex { table, index } => Self::NoTimeIndex { table, index },
            Error::NoLookupIndex {
                table,
                index,
                field,
            } => Self::NoLookupIndex {
                table,
                index,
                field,
            },
            Error::IndexNotActive {
                table,
                index,
                status,
            } => Self::IndexNotActive {
                table,
                index,
                status,
            },
            Error::Unprocessed {
                table,
                left,
                asked,
                tries,
            } => Self::Worded(format!(
                "BatchGetItem on table {table} left {left} of {asked} items unread after {tries} tries (the table's read capacity is exhausted): run the lookup again later, or raise the table's read capacity"
            )),
            Error::QueueNotFound { url } => Self::QueueNotFound {
                url,
                env: "DEAD_LETTER_QUEUE_URL",
                flag: "--dlq-url",
            },
            Error::QueueDenied { url, detail } => Self::QueueDenied { url, detail },
            error @ Error::NotReleased { .. } => Self::Worded(error.to_string()),
            Error::Request(text) => Self::Worded(text),
            Error::Aws(error) => Self::Worded(error.text),
        }
    }
}

/// A failure whose cause lies before any one command: no credentials, refused credentials,
/// nothing answering at the endpoint, a caller without the policy, AWS throttling. The libraries
/// pass the SDK's own account of it on (`audit_aws::error::describe`); this says the cause and
/// its fix first, then what failed. `at` is where requests went (an endpoint, or a region).
/// `None` when the message names none of these, or already names its fix.
pub fn cause_and_fix(message: &str, at: &str) -> Option<String> {
    let local = at.starts_with("http://") || at.starts_with("https://");
    let cause = cause(message)?;
    // A denial already worded with the policy it needs keeps its words.
    if cause == Cause::Denied && message.contains("attach ") {
        return None;
    }
    let fix = match cause {
        Cause::NoCredentials => "no AWS credentials: set AWS_PROFILE (or --profile, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or `. .local/stack.env` for the local stack".to_owned(),
        Cause::CredentialsRefused => format!(
            "AWS refused the credentials at {at}: they are expired or of another account; sign in again (aws sso login) or choose another AWS_PROFILE (--profile), or `. .local/stack.env` for the local stack"
        ),
        Cause::Unreachable if local => format!(
            "nothing answers at {at}: is the local stack running? `make local-up` starts it; or check AWS_ENDPOINT_URL (--endpoint-url)"
        ),
        Cause::Unreachable => {
            format!("AWS cannot be reached at {at}: check the network, and AWS_REGION (--region)")
        }
        Cause::Throttled => format!(
            "AWS throttled the requests at {at} (too many at once for the account or the table): run again in a minute, over a shorter range or with --limit, or raise the table's read capacity"
        ),
        Cause::Denied => "not allowed: attach AuditReaderPolicy (reading the trail and the archive) or AuditOperatorPolicy (also the dead-letter queue and repairs) of the current template.yaml to the caller (`aws sts get-caller-identity` names it)".to_owned(),
    };
    Some(format!("{fix}\n  what failed: {message}"))
}

/// A cause that lies before any one command, as `cause_and_fix` words it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    NoCredentials,
    CredentialsRefused,
    Unreachable,
    Throttled,
    /// AWS denied the caller.
    Denied,
}

impl Cause {
    /// The cause's kind, as an access event's `error.kind` says it.
    pub const fn kind(self) -> &'static str {
        match self {
            Self::NoCredentials => "no_credentials",
            Self::CredentialsRefused => "credentials_refused",
            Self::Unreachable => "unreachable",
            Self::Throttled => "throttled",
            Self::Denied => "denied",
        }
    }
}

/// Which cause `message` (the SDK's own account, passed on by the libraries) names, if any.
pub fn cause(message: &str) -> Option<Cause> {
    let has = |words: &[&str]| words.iter().any(|w| message.contains(w));
    Some(
        if has(&[
            "no credentials found",
            "credential provider was not enabled",
            "failed to load IMDS",
            "IMDS is disabled",
        ]) {
            Cause::NoCredentials
        } else if has(&[
            "UnrecognizedClientException",
            "InvalidClientTokenId",
            "ExpiredToken",
            "InvalidSignatureException",
            "SignatureDoesNotMatch",
            "InvalidAccessKeyId",
        ]) {
            Cause::CredentialsRefused
        } else if has(&[
            "Connection refused",
            "tcp connect error",
            "dns error",
            "error trying to connect",
        ]) {
            Cause::Unreachable
        } else if has(&[
            "Throttl",
            "ProvisionedThroughputExceeded",
            "RequestLimitExceeded",
            "SlowDown",
            "TooManyRequests",
        ]) {
            Cause::Throttled
        } else if has(&["AccessDenied", "not authorized to perform"]) {
            Cause::Denied
        } else {
            return None;
        },
    )
}

/// Why the archiver did not repair (`archive repair`, commands/repair.rs): each names the fix.
#[derive(Debug, thiserror::Error)]
pub enum RepairFailure {
    #[error(
        "no archiver function: set ARCHIVER_FUNCTION or --archiver-function to the stack output AuditArchiverFunctionArn"
    )]
    NoFunction,
    #[error(
        "archiver function {function} not found at {at}: check ARCHIVER_FUNCTION or --archiver-function (stack output AuditArchiverFunctionArn)"
    )]
    NotFound { function: String, at: String },
    #[error(
        "not allowed to invoke the archiver function {function}: {detail}; a repair is an operator's: attach AuditOperatorPolicy of the current template.yaml (it grants lambda:InvokeFunction on AuditArchiverFunction; AuditReaderPolicy does not)"
    )]
    Denied { function: String, detail: String },
    #[error(
        "invoking the archiver function {function} failed: {detail}; run the repair again (it archives only what is still missing)"
    )]
    Invoke { function: String, detail: String },
    #[error("the archiver function {function} refused the repair ({error_type}): {message}")]
    Refused {
        function: String,
        error_type: String,
        message: String,
    },
    #[error(
        "the archiver function {function} answered what is not a repair's answer ({detail}): deploy the current audit-archiver, which repairs"
    )]
    Unreadable { function: String, detail: String },
}

#[cfg(test)]
mod tests {
    use super::*;
    use audit_trail::Error;

    #[test]
    fn a_missing_table_is_named_with_where_it_was_looked_for_and_the_fix() {
        let error = TrailError::from(Error::TableNotFound {
            table: "AuditMessages".into(),
            at: "region eu-west-1".into(),
        });
        assert_eq!(
            error.to_string(),
            "table AuditMessages not found at region eu-west-1: set TABLE_NAME or --table, or deploy the stack"
        );
    }

    #[test]
    fn a_digest_key_of_another_kind_is_refused_with_the_fix() {
        use audit_proof::verify::key::TrustedKey;
        let signer = audit_aws::kms::MemoryKey::new("arn:k");
        let rsa = audit_aws::kms::PublicKeyInfo {
            key_spec: "RSA_2048".into(),
            ..signer.public_key()
        };
        let error = TrailError::from(TrustedKey::new(rsa).unwrap_err()).to_string();
        assert!(
            error.contains("RSA_2048, not ECC_NIST_P256") && error.contains("DIGEST_KEY_ID"),
            "{error}"
        );
    }

    #[test]
    fn digests_of_another_period_length_name_the_flag() {
        let error = TrailError::from(audit_proof::Error::PeriodMismatch {
            key: "digest/dt=2026-11-22/hour=10/p1795341600.json".into(),
            found: 3600,
            given: 60,
        })
        .to_string();
        assert!(
            error.contains(
                "of 3600 s periods, not 60: set DIGEST_PERIOD_SECONDS or --period-seconds"
            ),
            "{error}"
        );
    }

    #[test]
    fn the_proof_librarys_errors_keep_their_words() {
        use audit_aws::error::{AwsError, ErrorKind};
        let denied = AwsError::without_answer(ErrorKind::Denied, "AccessDenied");
        let bucket = TrailError::from(audit_proof::Error::BucketDenied {
            bucket: "b".into(),
            error: denied.clone(),
        });
        assert_eq!(
            bucket.to_string(),
            "not allowed to read the archive bucket b: AccessDenied; attach AuditReaderPolicy (s3:ListBucketVersions, s3:GetObjectVersion on the archive)"
        );
        let gone = TrailError::from(audit_proof::Error::Vanished {
            key: "log/checkpoints/00000000000000000007".into(),
        });
        assert_eq!(
            gone.to_string(),
            "log/checkpoints/00000000000000000007 was listed but is not there: run again"
        );
        let table = TrailError::from(audit_proof::Error::Table(Box::new(
            audit_trail::Error::TableNotFound {
                table: "AuditMessages".into(),
                at: "region eu-west-1".into(),
            },
        )));
        assert_eq!(
            table.to_string(),
            "table AuditMessages not found at region eu-west-1: set TABLE_NAME or --table, or deploy the stack"
        );
    }

    #[test]
    fn why_a_proof_could_not_be_made_is_said_with_what_to_do() {
        use audit_proof::prove::ProveError;
        let missing = TrailError::from(audit_proof::Error::Prove(ProveError::NotFound {
            message_id: "m".into(),
            audit_time: "2026-11-22T10:00:00.000Z".into(),
            first: "2026-11-22T09:59:00Z".into(),
            last: "2026-11-22T10:02:00Z".into(),
            before_log: 1,
            no_digest: 2,
        }));
        assert_eq!(
            missing.to_string(),
            "messageId m (auditTime 2026-11-22T10:00:00.000Z) is not in the index of the periods 2026-11-22T09:59:00Z to 2026-11-22T10:02:00Z (1 of them sealed before the transparency log began: their events are not leaves; `auditctl verify` proves them whole; 2 of them without a digest although a later period has one: before the trail began, or their digest is missing): check the messageId and --audit-time (`auditctl get` shows its receivedAt), and run `auditctl verify` over those periods"
        );
        let broken = |period: Option<&str>| {
            TrailError::Prove(ProveError::Broken {
                what: "the index x is not text".into(),
                period: period.map(str::to_owned),
            })
            .to_string()
        };
        assert_eq!(
            broken(Some("2026-11-22T10:00:00Z")),
            "the index x is not text: run `auditctl verify` over the period 2026-11-22T10:00:00Z to find what was changed"
        );
        assert_eq!(
            broken(None),
            "the index x is not text: run `auditctl verify` over the period to find what was changed"
        );
        let pending = TrailError::Prove(ProveError::NotSealed {
            message_id: "m".into(),
            period: "P".into(),
            sealed_by: "T".into(),
        });
        assert_eq!(
            pending.to_string(),
            "the period P of messageId m is not sealed yet; the archiver seals it by T"
        );
    }

    #[test]
    fn a_failure_before_any_command_names_its_cause_and_fix_first() {
        let refused = cause_and_fix(
            "reading the tags of table T failed: UnrecognizedClientException: The security token included in the request is invalid.",
            "region eu-west-1",
        )
        .unwrap();
        assert!(
            refused.starts_with("AWS refused the credentials at region eu-west-1: ")
                && refused.ends_with("\n  what failed: reading the tags of table T failed: UnrecognizedClientException: The security token included in the request is invalid."),
            "{refused}"
        );
        let unreachable = cause_and_fix(
            "dispatch failure: io error: dns error: failed to lookup address information",
            "region eu-west-1",
        )
        .unwrap();
        assert!(
            unreachable.starts_with(
                "AWS cannot be reached at region eu-west-1: check the network, and AWS_REGION (--region)\n"
            ),
            "{unreachable}"
        );
        // A denial already worded with the policy it needs keeps its words.
        let worded = TrailError::from(audit_proof::Error::BucketDenied {
            bucket: "b".into(),
            error: audit_aws::error::AwsError::without_answer(
                audit_aws::error::ErrorKind::Denied,
                "AccessDenied",
            ),
        })
        .to_string();
        assert_eq!(cause_and_fix(&worded, "region eu-west-1"), None);
        assert_eq!(
            cause_and_fix("table T not found at region eu-west-1", "region eu-west-1"),
            None
        );
    }

    #[test]
    fn unread_keys_and_unreleased_messages_keep_their_words() {
        let unread = TrailError::from(Error::Unprocessed {
            table: "T".into(),
            left: 3,
            asked: 100,
            tries: 11,
        });
        assert_eq!(
            unread.to_string(),
            "BatchGetItem on table T left 3 of 100 items unread after 11 tries (the table's read capacity is exhausted): run the lookup again later, or raise the table's read capacity"
        );
        let held = TrailError::from(Error::NotReleased {
            failed: 2,
            seconds: 120,
        });
        assert_eq!(
            held.to_string(),
            "2 message(s) could not be made visible again; they will be after 120 s"
        );
        let gone = TrailError::from(Error::QueueNotFound {
            url: "https://q".into(),
        });
        assert_eq!(
            gone.to_string(),
            "queue https://q not found: check DEAD_LETTER_QUEUE_URL or --dlq-url, or deploy the stack"
        );
    }
}
