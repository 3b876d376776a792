//! Owns the one read port over the archive bucket (`Archive`) and its one implementation over
//! `audit_aws::s3::Bucket`, through which S3 and its in-memory twin are read alike (versions page
//! by page, one version streamed, current objects, keys), their failures as typed `Error`s. Must
//! not know the archive's layout, the transparency log or what is checked.

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use audit_aws::error::{AwsError, ErrorKind};
use audit_aws::s3::Bucket;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use crate::Error;

/// One entry of a version listing: a version of a key, or a delete marker (`audit_aws::s3`'s).
pub use audit_aws::s3::VersionEntry as Entry;

/// One version read: its user metadata (names in lower case, without `x-amz-meta-`) and its
/// bytes, streamed as they arrive.
pub struct Fetched {
    pub metadata: BTreeMap<String, String>,
    pub body: BoxStream<'static, Result<Bytes, Error>>,
}

impl Fetched {
    /// The whole body (for a digest: small).
    pub async fn bytes(self) -> Result<Vec<u8>, Error> {
        self.body
            .try_fold(Vec::new(), |mut all, chunk| async move {
                all.extend_from_slice(&chunk);
                Ok(all)
            })
            .await
    }
}

/// The archive bucket, read: verify's, prove's, the witness's and the viewer's one port.
pub trait Archive: Send + Sync {
    /// Every version and delete marker whose key starts with `prefix`, in S3's order (keys in
    /// order, each key's versions and delete markers newest first), page by page.
    fn versions(&self, prefix: String) -> BoxStream<'_, Result<Entry, Error>>;

    /// The bucket's default Object Lock retention in days (a year counted as 366), `None`
    /// when it has none: how long a digest is kept for certain.
    fn default_retention_days(&self) -> impl Future<Output = Result<Option<u32>, Error>> + Send;

    /// One version, or `None` when the key has no such version.
    fn get(
        &self,
        key: &str,
        version_id: &str,
    ) -> impl Future<Output = Result<Option<Fetched>, Error>> + Send;

    /// The current version's bytes of `key`, or `None` when it has none (the transparency log's
    /// objects are read so).
    fn current(&self, key: &str) -> impl Future<Output = Result<Option<Vec<u8>>, Error>> + Send;

    /// The current version's bytes of `key` when it has one of at most `max` bytes (its size read
    /// first, so that a large object is never read): `Ok(None)` when there is none, `Err(size)`
    /// inside when it is larger.
    fn current_small(
        &self,
        key: &str,
        max: u64,
    ) -> impl Future<Output = Result<Option<Result<Vec<u8>, u64>>, Error>> + Send;

    /// At most `max` keys that start with `prefix`, after `after`, in order.
    fn keys(
        &self,
        prefix: &str,
        after: Option<&str>,
        max: usize,
    ) -> impl Future<Output = Result<Vec<String>, Error>> + Send;
}

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

    /// The bucket's name, as digests name it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A failed read, by the one classification (a missing key or version never gets here: the
    /// adapter answers those as no object).
    pub fn error(&self, error: &AwsError) -> Error {
        match error.kind {
            ErrorKind::NotFound => Error::BucketNotFound {
                bucket: self.name.clone(),
                at: self.location.clone(),
                error: Box::new(error.clone()),
            },
            ErrorKind::Denied => Error::BucketDenied {
                bucket: self.name.clone(),
                error: error.clone(),
            },
            _ => Error::Bucket {
                bucket: self.name.clone(),
                error: error.clone(),
            },
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
    fn versions(&self, prefix: String) -> BoxStream<'_, Result<Entry, Error>> {
        self.bucket
            .versions(prefix)
            .map_err(|e| self.error(&e))
            .boxed()
    }

    async fn default_retention_days(&self) -> Result<Option<u32>, Error> {
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
                    ErrorKind::Denied => Error::LockDenied {
                        bucket: self.name.clone(),
                        error,
                    },
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

    async fn get(&self, key: &str, version_id: &str) -> Result<Option<Fetched>, Error> {
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
            .map_err(move |error| Error::Body {
                place: place.clone(),
                error,
            })
            .boxed();
        Ok(Some(Fetched {
            metadata: object.metadata,
            body,
        }))
    }

    async fn current(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        Ok(self
            .bucket
            .get(key)
            .await
            .map_err(|e| self.error(&e))?
            .map(|o| o.body.to_vec()))
    }

    async fn current_small(
        &self,
        key: &str,
        max: u64,
    ) -> Result<Option<Result<Vec<u8>, u64>>, Error> {
        let Some(info) = self.bucket.head(key).await.map_err(|e| self.error(&e))? else {
            return Ok(None);
        };
        if info.size > max {
            return Ok(Some(Err(info.size)));
        }
        Ok(self.current(key).await?.map(|body| {
            // Replaced between the two requests: still never more than `max` bytes kept.
            if body.len() as u64 > max {
                Err(body.len() as u64)
            } else {
                Ok(body)
            }
        }))
    }

    async fn keys(
        &self,
        prefix: &str,
        after: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>, Error> {
        self.bucket
            .list_keys(prefix, after, max)
            .await
            .map_err(|e| self.error(&e))
    }
}
