//! Owns what the viewer fails on, as types (the libraries' errors it met, its own).
//! Must not word them for people: the command line does (auditctl's words.rs, through `Words`).

use std::net::SocketAddr;

/// What a request, or the viewer's start, failed on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Trail(#[from] audit_trail::Error),
    #[error(transparent)]
    Access(#[from] audit_trail::access::AccessError),
    #[error(transparent)]
    Tags(#[from] audit_trail::stack::TagError),
    #[error(transparent)]
    Proof(#[from] audit_proof::Error),
    /// The digests' or the tamper records' names could not be listed.
    #[error("listing the {what} of bucket {bucket}: {}", read_failure(error))]
    Listing {
        what: &'static str,
        bucket: String,
        error: audit_proof::Error,
    },
    /// A search reaches before the table's hot window and no archive is configured.
    #[error(
        "the search reaches before {start}, where the table's hot window starts (RetentionDays {days}: DynamoDB's TTL deletes older items; the archive keeps them): start auditctl ui with ARCHIVE_BUCKET or --bucket (stack output AuditArchiveBucketName) to search that part in the archive, or search from {start} on"
    )]
    PastHotWindow { start: String, days: u32 },
    /// A verify run's task ended without an answer.
    #[error("verify stopped: {0}")]
    VerifyStopped(String),
    /// Verify asked for without the digest key.
    #[error(
        "verify needs the digest key: start auditctl ui with DIGEST_KEY_ID or --key-id (stack output AuditDigestKeyArn)"
    )]
    NoKey,
    /// No random bytes for the session's secrets.
    #[error(transparent)]
    NoRandom(#[from] crate::session::NoRandom),
    /// The loopback port could not be listened on.
    #[error("cannot listen on {address}: {error}")]
    Listen {
        address: SocketAddr,
        error: std::io::Error,
    },
}

impl Error {
    /// The error's kind, short, as a failed read's access event says it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Trail(error) => error.kind(),
            Self::Access(_) => "access_not_recorded",
            Self::Tags(_) => "tags",
            Self::Proof(error) => match error {
                audit_proof::Error::BucketNotFound { .. } => "bucket_not_found",
                audit_proof::Error::KeyNotFound { .. } => "key_not_found",
                audit_proof::Error::BucketDenied { .. }
                | audit_proof::Error::LockDenied { .. }
                | audit_proof::Error::KeyDenied { .. }
                | audit_proof::Error::CosignatureDenied { .. } => "denied",
                audit_proof::Error::Prove(_) => "no_proof",
                _ => "archive",
            },
            Self::Listing { .. } => "archive_listing",
            Self::VerifyStopped(_) => "verify_stopped",
            Self::NoKey | Self::PastHotWindow { .. } => "not_configured",
            Self::NoRandom(_) => "no_random",
            Self::Listen { .. } => "listen",
        }
    }

    /// Whether AWS refused the caller (no retry helps): the dead-letter queue is the operator's.
    pub fn denied(&self) -> bool {
        matches!(self, Self::Trail(audit_trail::Error::QueueDenied { .. }))
    }
}

/// How the pages word an error for people: the command line's words (auditctl's words.rs), or
/// the libraries' own when none are given.
pub type Words = fn(Error) -> String;

/// The libraries' own words.
pub fn own_words(error: Error) -> String {
    error.to_string()
}

/// A failed read of the archive as the service said it (its error, when the read port kept it;
/// else the port's own words).
pub fn read_failure(error: &audit_proof::Error) -> String {
    match error {
        audit_proof::Error::Bucket { error, .. }
        | audit_proof::Error::BucketDenied { error, .. } => error.to_string(),
        audit_proof::Error::BucketNotFound { error, .. } => error.to_string(),
        other => other.to_string(),
    }
}
