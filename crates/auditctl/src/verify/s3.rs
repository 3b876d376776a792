//! Owns the archive port over `audit_aws::s3`: its S3 adapter and its in-memory twin read the
//! archive (versions page by page, one version streamed) through one implementation, which maps
//! their errors to ones that name the fix. Must not know the archive's layout or what is checked.

use std::ops::Deref;
use std::sync::{Arc, Mutex};

use audit_aws::error::{AwsError, ErrorKind};
use audit_aws::s3::Bucket;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use super::ports::{Archive, Entry, Fetched};
use crate::TrailError;
use crate::tlog::LogReader;

/// The archive bucket, read: S3's (`audit_aws::s3::S3Bucket`) or its twin.
#[derive(Debug, Clone)]
pub struct S3Archive<B = audit_aws::s3::S3Bucket> {
    bucket: B,
    name: String,
    /// Where the bucket was looked for (endpoint or region), for error messages.
    location: String,
    /// Where the bucket's default Object Lock retention is read.
    lock: Lock,
}

/// Where the default retention comes from: S3's GetObjectLockConfiguration, or (the twin) a
/// value the test sets, as a bucket created with it would answer.
#[derive(Debug, Clone)]
enum Lock {
    S3(aws_sdk_s3::Client),
    Fixed(Arc<Mutex<Option<u32>>>),
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
        let mut archive = Self::over(
            audit_aws::s3::S3Bucket::new(client.clone(), name.clone()),
            name,
            location,
        );
        archive.lock = Lock::S3(client);
        archive
    }
}

impl<B> S3Archive<B> {
    /// The archive `name` (at `location`) read through `bucket`.
    pub fn over(bucket: B, name: impl Into<String>, location: impl Into<String>) -> Self {
        Self {
            bucket,
            name: name.into(),
            location: location.into(),
            lock: Lock::Fixed(Arc::default()),
        }
    }

    /// The twin's default retention in days (`None`: no Object Lock rule), as
    /// GetObjectLockConfiguration would answer for a bucket created with it.
    pub fn set_default_retention(&self, days: Option<u32>) {
        if let Lock::Fixed(fixed) = &self.lock {
            *fixed.lock().unwrap_or_else(|e| e.into_inner()) = days;
        }
    }

    /// A failed read in words that name the fix, by the one classification (a missing key or
    /// version never gets here: the adapter answers those as no object).
    pub(crate) fn error(&self, error: &AwsError) -> TrailError {
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
    type Bucket = B;

    fn log(&self) -> LogReader<'_, B> {
        LogReader { archive: self }
    }

    fn versions(&self, prefix: String) -> BoxStream<'_, Result<Entry, TrailError>> {
        self.bucket
            .versions(prefix)
            .map_err(|e| self.error(&e))
            .boxed()
    }

    async fn default_retention_days(&self) -> Result<Option<u32>, TrailError> {
        let client = match &self.lock {
            Lock::Fixed(fixed) => return Ok(*fixed.lock().unwrap_or_else(|e| e.into_inner())),
            Lock::S3(client) => client,
        };
        let answer = client
            .get_object_lock_configuration()
            .bucket(&self.name)
            .send()
            .await;
        let output = match answer {
            Ok(output) => output,
            Err(error) => {
                let error = AwsError::from_sdk(&error);
                // A bucket without Object Lock has no configuration to read: no retention.
                if error.is(&["ObjectLockConfigurationNotFoundError"]) {
                    return Ok(None);
                }
                return Err(match error.kind {
                    ErrorKind::Denied => TrailError::Aws(format!(
                        "not allowed to read the Object Lock configuration of the archive bucket {}: {error}; attach AuditReaderPolicy (s3:GetBucketObjectLockConfiguration on the archive)",
                        self.name
                    )),
                    _ => self.error(&error),
                });
            }
        };
        let retention = output
            .object_lock_configuration()
            .and_then(|c| c.rule())
            .and_then(|r| r.default_retention());
        Ok(retention.and_then(|r| match (r.days(), r.years()) {
            (Some(days), _) => u32::try_from(days).ok(),
            (None, Some(years)) => u32::try_from(years).ok().map(|y| y.saturating_mul(366)),
            (None, None) => None,
        }))
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
