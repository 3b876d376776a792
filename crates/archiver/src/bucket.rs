//! Owns the archive bucket port: the three things the archiver asks of S3 (create an object only
//! if its key is free, ask whether one exists, read one) and their errors. Must not know the
//! stream, the archive's layout or the SDK (adapters: `s3`, and the in-memory twin `memory`).
//!
//! Nothing is ever overwritten: archive objects and the archiver's markers are all created with
//! `If-None-Match: *`, so the bucket's versioning and Object Lock keep one version of each key.

pub mod memory;
pub mod s3;

use std::future::Future;

use bytes::Bytes;

/// An object to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewObject {
    pub key: String,
    pub body: Bytes,
    pub content_type: &'static str,
    /// The body's SHA-256: S3 checks it and keeps it (`x-amz-checksum-sha256`), so that a digest
    /// can list each object's hash from a HEAD without reading the object.
    pub sha256: [u8; 32],
    /// User metadata (`x-amz-meta-*`), such as the number of events in the object.
    pub metadata: Vec<(&'static str, String)>,
}

/// What a conditional create did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// The object is new; its version.
    New { version_id: Option<String> },
    /// The key already held an object (HTTP 412): nothing was written.
    AlreadyExists,
}

/// What S3 says about an existing object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub etag: Option<String>,
    pub version_id: Option<String>,
    pub size: u64,
}

/// A failed bucket request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BucketError {
    /// The request may succeed later (throttling, 5xx, network, a conflicting concurrent write).
    #[error("the bucket is unavailable: {0}")]
    Unavailable(String),
    /// S3 refused the request (no such bucket, access denied, bad request): it fails again until
    /// someone changes the bucket or the policy.
    #[error("the bucket refused: {code}: {message}")]
    Refused { code: String, message: String },
    /// The request took longer than the archiver allows; its outcome is unknown.
    #[error("the request timed out")]
    TimedOut,
}

impl BucketError {
    /// A short code for logs.
    pub fn code(&self) -> &str {
        match self {
            Self::Unavailable(_) => "unavailable",
            Self::Refused { code, .. } => code,
            Self::TimedOut => "timed_out",
        }
    }
}

/// The archive bucket.
pub trait ArchiveBucket: Send + Sync {
    /// Creates the object unless its key holds one (`If-None-Match: *`).
    fn put_if_absent(
        &self,
        object: NewObject,
    ) -> impl Future<Output = Result<Created, BucketError>> + Send;

    /// The object's current version, or `None` when there is none.
    fn head(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<ObjectInfo>, BucketError>> + Send;

    /// The object's body, or `None` when there is none.
    fn get(&self, key: &str) -> impl Future<Output = Result<Option<Bytes>, BucketError>> + Send;
}

impl<B: ArchiveBucket> ArchiveBucket for &B {
    fn put_if_absent(
        &self,
        object: NewObject,
    ) -> impl Future<Output = Result<Created, BucketError>> + Send {
        (**self).put_if_absent(object)
    }

    fn head(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<ObjectInfo>, BucketError>> + Send {
        (**self).head(key)
    }

    fn get(&self, key: &str) -> impl Future<Output = Result<Option<Bytes>, BucketError>> + Send {
        (**self).get(key)
    }
}
