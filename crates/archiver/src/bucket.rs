//! Owns the archive bucket port: what the archiver asks of S3 (create an object only if its key is
//! free, ask whether one exists, read one; and for sealing digests: list keys, list a prefix's
//! versions, read a given version's hash and event count) and their errors. Must not know the
//! stream, the archive's layout or the SDK (adapters: `s3` over `audit_aws::s3`'s S3 adapter, and
//! `memory` over its in-memory twin).
//!
//! Nothing is ever overwritten: archive objects and the archiver's markers are all created with
//! `If-None-Match: *`, so the bucket's versioning and Object Lock keep one version of each key.

pub mod memory;
pub mod s3;

use std::future::Future;

use bytes::Bytes;

/// What the archiver writes and reads: the values of `audit_aws::s3`'s bucket.
pub use audit_aws::s3::{Created, NewObject, ObjectInfo, StoredObject, VersionEntry, VersionInfo};

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

    /// The object's current version with its version id and user metadata, or `None`.
    fn get_object(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<StoredObject>, BucketError>> + Send;

    /// One version with its user metadata, or `None` when that version does not exist.
    fn get_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> impl Future<Output = Result<Option<StoredObject>, BucketError>> + Send;

    /// One version's SHA-256, event count and size, or `None` when that version does not exist.
    fn head_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> impl Future<Output = Result<Option<VersionInfo>, BucketError>> + Send;

    /// Up to `max` keys under `prefix` after `start_after`, in key order (current objects).
    fn list_keys(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max: usize,
    ) -> impl Future<Output = Result<Vec<String>, BucketError>> + Send;

    /// Every version and delete marker under `prefix`: keys in order, each key's newest first
    /// (as S3's ListObjectVersions).
    fn list_versions(
        &self,
        prefix: &str,
    ) -> impl Future<Output = Result<Vec<VersionEntry>, BucketError>> + Send;
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

    fn get_object(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<StoredObject>, BucketError>> + Send {
        (**self).get_object(key)
    }

    fn get_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> impl Future<Output = Result<Option<StoredObject>, BucketError>> + Send {
        (**self).get_version(key, version_id)
    }

    fn head_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> impl Future<Output = Result<Option<VersionInfo>, BucketError>> + Send {
        (**self).head_version(key, version_id)
    }

    fn list_keys(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max: usize,
    ) -> impl Future<Output = Result<Vec<String>, BucketError>> + Send {
        (**self).list_keys(prefix, start_after, max)
    }

    fn list_versions(
        &self,
        prefix: &str,
    ) -> impl Future<Output = Result<Vec<VersionEntry>, BucketError>> + Send {
        (**self).list_versions(prefix)
    }
}
