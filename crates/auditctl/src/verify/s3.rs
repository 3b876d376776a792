//! Owns the archive port over `audit_aws::s3`: its S3 adapter and its in-memory twin read the
//! archive (versions page by page, one version streamed) through one implementation, which maps
//! their errors to ones that name the fix. Must not know the archive's layout or what is checked.

use std::ops::Deref;

use audit_aws::error::{AwsError, ErrorKind};
use audit_aws::s3::Bucket;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use super::ports::{Archive, Entry, Fetched};
use crate::TrailError;

/// The archive bucket, read: S3's (`audit_aws::s3::S3Bucket`) or its twin.
#[derive(Debug, Clone)]
pub struct S3Archive<B = audit_aws::s3::S3Bucket> {
    bucket: B,
    name: String,
    /// Where the bucket was looked for (endpoint or region), for error messages.
    location: String,
}

impl S3Archive {
    /// The archiver's client (path-style addressing when an endpoint is set), as configured.
    pub fn new(
        sdk: &aws_config::SdkConfig,
        bucket: impl Into<String>,
        location: impl Into<String>,
    ) -> Self {
        let name = bucket.into();
        let client = audit_aws::config::s3(sdk, audit_aws::config::ClientOptions::AS_CONFIGURED);
        Self::over(
            audit_aws::s3::S3Bucket::new(client, name.clone()),
            name,
            location,
        )
    }
}

impl<B> S3Archive<B> {
    /// The archive `name` (at `location`) read through `bucket`.
    pub fn over(bucket: B, name: impl Into<String>, location: impl Into<String>) -> Self {
        Self {
            bucket,
            name: name.into(),
            location: location.into(),
        }
    }

    /// A failed read in words that name the fix, by the one classification (a missing key or
    /// version never gets here: the adapter answers those as no object).
    fn error(&self, error: &AwsError) -> TrailError {
        match error.kind {
            ErrorKind::NotFound => TrailError::BucketNotFound {
                bucket: self.name.clone(),
                at: self.location.clone(),
            },
            ErrorKind::Denied => TrailError::Aws(format!(
                "not allowed to read the archive bucket {}: {error}; attach AuditReaderPolicy (s3:ListBucketVersions, s3:GetObjectVersion on the archive)",
                self.name
            )),
            _ => TrailError::Aws(format!("reading the archive bucket {}: {error}", self.name)),
        }
    }
}

/// The bucket underneath (the twin's tests write to it).
impl<B> Deref for S3Archive<B> {
    type Target = B;

    fn deref(&self) -> &B {
        &self.bucket
    }
}

impl<B: Bucket> Archive for S3Archive<B> {
    fn versions(&self, prefix: String) -> BoxStream<'_, Result<Entry, TrailError>> {
        self.bucket
            .versions(prefix)
            .map_err(|e| self.error(&e))
            .boxed()
    }

    async fn get(&self, key: &str, version_id: &str) -> Result<Option<Fetched>, TrailError> {
        let Some(object) = self
            .bucket
            .stream_version(key, version_id)
            .await
            .map_err(|e| self.error(&e))?
        else {
            return Ok(None);
        };
        let place = format!("s3://{}/{key}", self.name);
        let body = object
            .body
            .map_err(move |e| TrailError::Aws(format!("reading {place}: {e}")))
            .boxed();
        Ok(Some(Fetched {
            metadata: object.metadata,
            body,
        }))
    }
}
