//! Owns counting a bucket's reads (GETs, their bytes, listings), so that `prove` and the
//! benchmark can say what was read. Must not change what the bucket answers.

use std::sync::atomic::{AtomicU64, Ordering};

use audit_aws::error::AwsError;
use audit_aws::s3::{
    Bucket, Created, NewObject, ObjectInfo, StoredObject, StreamedObject, VersionInfo,
    VersionMarker, VersionPage,
};

/// A bucket whose reads are counted: GETs (objects) and their bytes, and listings (pages), so
/// that a command can say what it read (the benchmark's figures).
#[derive(Debug, Default)]
pub struct Counted<B> {
    inner: B,
    objects: AtomicU64,
    bytes: AtomicU64,
    listings: AtomicU64,
}

/// What was read, by [`Counted`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCount {
    pub objects: u64,
    pub bytes: u64,
    pub listings: u64,
}

impl std::fmt::Display for ReadCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "read {} objects ({} bytes) and {} listing pages",
            self.objects, self.bytes, self.listings
        )
    }
}

impl<B> Counted<B> {
    pub fn new(inner: B) -> Self {
        Self {
            inner,
            objects: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            listings: AtomicU64::new(0),
        }
    }

    /// What was read so far.
    pub fn count(&self) -> ReadCount {
        ReadCount {
            objects: self.objects.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            listings: self.listings.load(Ordering::Relaxed),
        }
    }

    fn got(&self, object: &Option<StoredObject>) {
        self.objects.fetch_add(1, Ordering::Relaxed);
        if let Some(object) = object {
            self.bytes
                .fetch_add(object.body.len() as u64, Ordering::Relaxed);
        }
    }

    /// The bucket underneath.
    pub fn inner(&self) -> &B {
        &self.inner
    }
}

impl<B: Bucket> Bucket for Counted<B> {
    async fn put_if_absent(&self, object: NewObject) -> Result<Created, AwsError> {
        self.inner.put_if_absent(object).await
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, AwsError> {
        self.objects.fetch_add(1, Ordering::Relaxed);
        self.inner.head(key).await
    }

    async fn get(&self, key: &str) -> Result<Option<StoredObject>, AwsError> {
        let object = self.inner.get(key).await?;
        self.got(&object);
        Ok(object)
    }

    async fn get_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<StoredObject>, AwsError> {
        let object = self.inner.get_version(key, version_id).await?;
        self.got(&object);
        Ok(object)
    }

    async fn stream_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<StreamedObject>, AwsError> {
        self.objects.fetch_add(1, Ordering::Relaxed);
        self.inner.stream_version(key, version_id).await
    }

    async fn head_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<VersionInfo>, AwsError> {
        self.objects.fetch_add(1, Ordering::Relaxed);
        self.inner.head_version(key, version_id).await
    }

    async fn list_keys(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>, AwsError> {
        self.listings.fetch_add(1, Ordering::Relaxed);
        self.inner.list_keys(prefix, start_after, max).await
    }

    async fn list_versions_page(
        &self,
        prefix: &str,
        from: Option<VersionMarker>,
    ) -> Result<VersionPage, AwsError> {
        self.listings.fetch_add(1, Ordering::Relaxed);
        self.inner.list_versions_page(prefix, from).await
    }
}
