//! Owns what the programs ask of a versioned S3 bucket, once: the `Bucket` interface (create a key
//! only if it is free, head, get, get or head one version, list keys, list versions page by page)
//! and its values; the S3 adapter (`client`) and its in-memory twin (`memory`). Must not know the
//! archive's layout, nor any program's port or errors (every error is an `AwsError`).

mod client;
pub mod memory;

use std::collections::BTreeMap;
use std::future::Future;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

pub use client::S3Bucket;
pub use memory::MemoryBucket;

use crate::error::{AwsError, ErrorKind};

/// An object to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewObject {
    pub key: String,
    pub body: Bytes,
    pub content_type: &'static str,
    /// The body's SHA-256: S3 checks it and keeps it (`x-amz-checksum-sha256`), so that a HEAD
    /// gives each object's hash without reading the object.
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

/// An object read whole, with its version and user metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredObject {
    pub body: Bytes,
    pub version_id: Option<String>,
    /// User metadata (`x-amz-meta-*`), names in lower case.
    pub metadata: Vec<(String, String)>,
}

impl StoredObject {
    /// A user metadata value by (lower-case) name.
    pub fn metadata(&self, name: &str) -> Option<&str> {
        self.metadata
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One version read as its bytes arrive: its user metadata (names in lower case, without
/// `x-amz-meta-`) and its body.
pub struct StreamedObject {
    pub metadata: BTreeMap<String, String>,
    pub body: BoxStream<'static, Result<Bytes, AwsError>>,
}

/// One entry of a version listing: a version of a key, or a delete marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionEntry {
    pub key: String,
    pub version_id: String,
    /// The key's current version (or its current delete marker).
    pub latest: bool,
    pub delete_marker: bool,
}

/// What a HEAD of one version says: the SHA-256 S3 kept for it (when it was written with one),
/// its user metadata `events` and `marker`, its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionInfo {
    pub sha256: Option<[u8; 32]>,
    pub events: Option<u64>,
    pub size: u64,
    /// The user metadata `marker`: the run marker that names this object (archive objects).
    pub marker: Option<String>,
}

/// Where a version listing goes on: S3's key and version-id markers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionMarker {
    pub key: Option<String>,
    pub version_id: Option<String>,
}

/// One page of a version listing, in S3's order (keys in order, each key's versions and delete
/// markers newest first), and where the next page starts (`None`: the last page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionPage {
    pub entries: Vec<VersionEntry>,
    pub next: Option<VersionMarker>,
}

/// A versioned bucket: what the programs ask of S3 (`S3Bucket`) or of its twin (`MemoryBucket`).
/// Reads of what is not there answer `None`, never an error: a missing key or version, a version
/// id that is not one, a delete marker's version.
pub trait Bucket: Send + Sync {
    /// Creates the object unless its key holds one (`If-None-Match: *`).
    fn put_if_absent(
        &self,
        object: NewObject,
    ) -> impl Future<Output = Result<Created, AwsError>> + Send;

    /// The object's current version, or `None`.
    fn head(&self, key: &str) -> impl Future<Output = Result<Option<ObjectInfo>, AwsError>> + Send;

    /// The object's current version, whole, or `None`.
    fn get(&self, key: &str)
    -> impl Future<Output = Result<Option<StoredObject>, AwsError>> + Send;

    /// One version, whole, or `None`.
    fn get_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> impl Future<Output = Result<Option<StoredObject>, AwsError>> + Send;

    /// One version, streamed, or `None`.
    fn stream_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> impl Future<Output = Result<Option<StreamedObject>, AwsError>> + Send;

    /// One version's SHA-256, event count and size, or `None`.
    fn head_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> impl Future<Output = Result<Option<VersionInfo>, AwsError>> + Send;

    /// Up to `max` keys under `prefix` after `start_after`, in key order (current objects).
    fn list_keys(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max: usize,
    ) -> impl Future<Output = Result<Vec<String>, AwsError>> + Send;

    /// One page of the versions and delete markers under `prefix`, from `from` (`None`: the
    /// first page).
    fn list_versions_page(
        &self,
        prefix: &str,
        from: Option<VersionMarker>,
    ) -> impl Future<Output = Result<VersionPage, AwsError>> + Send;

    /// Every version and delete marker under `prefix`, every page read.
    fn list_versions(
        &self,
        prefix: &str,
    ) -> impl Future<Output = Result<Vec<VersionEntry>, AwsError>> + Send {
        self.versions(prefix.to_owned()).try_collect()
    }

    /// Every version and delete marker under `prefix`, streamed page by page.
    fn versions(&self, prefix: String) -> BoxStream<'_, Result<VersionEntry, AwsError>> {
        // `Some(from)`: a page to read; `None`: the listing is over.
        let start: Option<Option<VersionMarker>> = Some(None);
        futures::stream::try_unfold(start, move |cursor| {
            let prefix = prefix.clone();
            async move {
                let Some(from) = cursor else {
                    return Ok(None);
                };
                let page = self.list_versions_page(&prefix, from).await?;
                Ok(Some((page.entries, page.next.map(Some))))
            }
        })
        .map_ok(|entries| futures::stream::iter(entries.into_iter().map(Ok)))
        .try_flatten()
        .boxed()
    }
}

/// A bucket lent: what a caller holding `&bucket` passes to code that takes a `Bucket`.
impl<B: Bucket + ?Sized> Bucket for &B {
    fn put_if_absent(
        &self,
        object: NewObject,
    ) -> impl Future<Output = Result<Created, AwsError>> + Send {
        (**self).put_if_absent(object)
    }

    fn head(&self, key: &str) -> impl Future<Output = Result<Option<ObjectInfo>, AwsError>> + Send {
        (**self).head(key)
    }

    fn get(
        &self,
        key: &str,
    ) -> impl Future<Output = Result<Option<StoredObject>, AwsError>> + Send {
        (**self).get(key)
    }

    fn get_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> impl Future<Output = Result<Option<StoredObject>, AwsError>> + Send {
        (**self).get_version(key, version_id)
    }

    fn stream_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> impl Future<Output = Result<Option<StreamedObject>, AwsError>> + Send {
        (**self).stream_version(key, version_id)
    }

    fn head_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> impl Future<Output = Result<Option<VersionInfo>, AwsError>> + Send {
        (**self).head_version(key, version_id)
    }

    fn list_keys(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max: usize,
    ) -> impl Future<Output = Result<Vec<String>, AwsError>> + Send {
        (**self).list_keys(prefix, start_after, max)
    }

    fn list_versions_page(
        &self,
        prefix: &str,
        from: Option<VersionMarker>,
    ) -> impl Future<Output = Result<VersionPage, AwsError>> + Send {
        (**self).list_versions_page(prefix, from)
    }
}

/// The listing said there is more without saying where it goes on.
fn unmarked_page(prefix: &str, bucket: &str) -> AwsError {
    AwsError::without_answer(
        ErrorKind::Unavailable,
        format!(
            "listing the versions of {prefix} in {bucket}: S3 said there is more but not where it goes on"
        ),
    )
}
