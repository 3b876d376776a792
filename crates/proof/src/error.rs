//! Owns what can stop verify, prove and the witness, as types: the bucket, the digest key, the
//! table port or the report's output failed, or the archive holds what cannot be read on. Must
//! not know the words for people (which flag or variable fixes it): auditctl's `words.rs` has them.

use audit_aws::error::AwsError;

pub use crate::prove::ProveError;

/// Why a run stopped (a problem found is no error: it is reported and the run goes on).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The archive bucket is not there.
    #[error("archive bucket {bucket} not found at {at}")]
    BucketNotFound {
        bucket: String,
        at: String,
        /// The service's own answer, for those who word it as it was said (boxed: the variant
        /// stays as small as the others).
        error: Box<AwsError>,
    },
    /// The caller may not read the archive bucket.
    #[error("not allowed to read the archive bucket {bucket}: {error}")]
    BucketDenied { bucket: String, error: AwsError },
    /// Reading the archive bucket failed otherwise.
    #[error("reading the archive bucket {bucket}: {error}")]
    Bucket { bucket: String, error: AwsError },
    /// The caller may not read the bucket's Object Lock configuration.
    #[error(
        "not allowed to read the Object Lock configuration of the archive bucket {bucket}: {error}"
    )]
    LockDenied { bucket: String, error: AwsError },
    /// A version's bytes stopped arriving (`place`: its `s3://` address).
    #[error("reading {place}: {error}")]
    Body { place: String, error: AwsError },
    /// A checkpoint's bytes are not a signed note.
    #[error("{key}: {why}")]
    NotANote { key: String, why: String },
    /// An object listed a moment ago is not there.
    #[error("{key} was listed but is not there")]
    Vanished { key: String },
    /// The digest key is not there.
    #[error("digest key {key} not found at {at}")]
    KeyNotFound { key: String, at: String },
    /// The caller may not read the digest key's public key.
    #[error("not allowed to read the public key of the digest key {key}: {error}")]
    KeyDenied { key: String, error: AwsError },
    /// Reading the digest key's public key failed otherwise.
    #[error("reading the public key of the digest key {key}: {error}")]
    Key { key: String, error: AwsError },
    /// The receiver's attestation key could not be read (`denied`: not allowed to), or is not an
    /// ECDSA P-256 signing key.
    #[error("the receiver's attestation key {key}: {detail}")]
    AttestationKey {
        key: String,
        denied: bool,
        detail: String,
    },
    /// The digest key is not one that signs the digests.
    #[error("digest key {key} cannot check the digests: {detail}")]
    KeyUnsuitable { key: String, detail: String },
    /// The digests are of another period length than the one given.
    #[error("the digest {key}, signed by the digest key, is of {found} s periods, not {given}")]
    PeriodMismatch { key: String, found: u32, given: u32 },
    /// The witness's state does not hold a tree's root.
    #[error("the witness's state: {0}")]
    WitnessState(String),
    /// The caller may not write the witness's cosignature.
    #[error("not allowed to write the cosignature {key}: {error}")]
    CosignatureDenied { key: String, error: AwsError },
    /// Writing the witness's cosignature failed otherwise.
    #[error("writing the cosignature {key}: {error}")]
    Cosignature { key: String, error: AwsError },
    /// A proof could not be made.
    #[error(transparent)]
    Prove(#[from] ProveError),
    /// The table port failed (its adapter's own error, kept for its caller to word).
    #[error("reading the table: {0}")]
    Table(Box<dyn std::error::Error + Send + Sync>),
    /// The report could not be written.
    #[error("writing the report: {0}")]
    Output(#[from] std::io::Error),
}
