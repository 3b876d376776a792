//! Owns the S3 adapter of the archive port: ListObjectVersions page by page, GetObject of one
//! version streamed, and the mapping of their errors to ones that name the fix. Must not know the
//! archive's layout or what is checked.

use std::collections::BTreeMap;

use aws_sdk_s3::Client;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use super::ports::{Archive, Entry, Fetched};
use crate::TrailError;
use audit_aws::error::describe as sdk_error;

/// The archive bucket in S3, read.
#[derive(Debug, Clone)]
pub struct S3Archive {
    client: Client,
    bucket: String,
    /// Where the bucket was looked for (endpoint or region), for error messages.
    location: String,
}

impl S3Archive {
    /// Path-style addressing when an endpoint is set (`AWS_ENDPOINT_URL`: a local S3 on loopback
    /// has no per-bucket host names), as the archiver's client.
    pub fn new(
        sdk: &aws_config::SdkConfig,
        bucket: impl Into<String>,
        location: impl Into<String>,
    ) -> Self {
        let config = aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(sdk.endpoint_url().is_some())
            .build();
        Self {
            client: Client::from_conf(config),
            bucket: bucket.into(),
            location: location.into(),
        }
    }

    fn error<E, R>(&self, error: &SdkError<E, R>) -> TrailError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        match error.code() {
            Some("NoSuchBucket") => TrailError::BucketNotFound {
                bucket: self.bucket.clone(),
                at: self.location.clone(),
            },
            Some("AccessDenied" | "AllAccessDisabled") => TrailError::Aws(format!(
                "not allowed to read the archive bucket {}: {}; attach AuditReaderPolicy (s3:ListBucketVersions, s3:GetObjectVersion on the archive)",
                self.bucket,
                sdk_error(error)
            )),
            _ => TrailError::Aws(format!(
                "reading the archive bucket {}: {}",
                self.bucket,
                sdk_error(error)
            )),
        }
    }
}

/// Where a listing goes on: the next key and version markers, or the end.
type Cursor = Option<(Option<String>, Option<String>)>;

impl Archive for S3Archive {
    fn versions(&self, prefix: String) -> BoxStream<'_, Result<Entry, TrailError>> {
        let start: Cursor = Some((None, None));
        futures::stream::try_unfold(start, move |cursor| {
            let prefix = prefix.clone();
            async move {
                let Some((key_marker, version_marker)) = cursor else {
                    return Ok(None);
                };
                let page = self
                    .client
                    .list_object_versions()
                    .bucket(&self.bucket)
                    .prefix(prefix)
                    .set_key_marker(key_marker)
                    .set_version_id_marker(version_marker)
                    .send()
                    .await
                    .map_err(|e| self.error(&e))?;
                let mut entries: Vec<Entry> = page
                    .versions()
                    .iter()
                    .map(|v| Entry {
                        key: v.key().unwrap_or_default().to_owned(),
                        version_id: v.version_id().unwrap_or("null").to_owned(),
                        latest: v.is_latest().unwrap_or(false),
                        delete_marker: false,
                    })
                    .chain(page.delete_markers().iter().map(|m| Entry {
                        key: m.key().unwrap_or_default().to_owned(),
                        version_id: m.version_id().unwrap_or("null").to_owned(),
                        latest: m.is_latest().unwrap_or(false),
                        delete_marker: true,
                    }))
                    .collect();
                // The SDK gives versions and delete markers apart: keys in order, each key's
                // versions (newest first) before its markers (stable sort).
                entries.sort_by(|a, b| a.key.cmp(&b.key));
                let next = if page.is_truncated().unwrap_or(false) {
                    match (page.next_key_marker(), page.next_version_id_marker()) {
                        (None, None) => {
                            return Err(TrailError::Aws(format!(
                                "listing the versions of {} in {}: S3 said there is more but not where it goes on",
                                page.prefix().unwrap_or_default(),
                                self.bucket
                            )));
                        }
                        (key, version) => Some((key.map(str::to_owned), version.map(str::to_owned))),
                    }
                } else {
                    None
                };
                Ok(Some((entries, next)))
            }
        })
        .map_ok(|entries| futures::stream::iter(entries.into_iter().map(Ok)))
        .try_flatten()
        .boxed()
    }

    async fn get(&self, key: &str, version_id: &str) -> Result<Option<Fetched>, TrailError> {
        let output = match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .version_id(version_id)
            .send()
            .await
        {
            Ok(output) => output,
            Err(error) => {
                let status = error.raw_response().map(|r| r.status().as_u16());
                return match (error.code(), status) {
                    (Some("NoSuchBucket"), _) => Err(self.error(&error)),
                    // No such key or version; a version id that is not one (400), or that is a
                    // delete marker's (405): no object either.
                    (
                        Some(
                            "NoSuchKey" | "NoSuchVersion" | "InvalidArgument" | "MethodNotAllowed",
                        ),
                        _,
                    )
                    | (_, Some(404 | 405)) => Ok(None),
                    _ => Err(self.error(&error)),
                };
            }
        };
        let metadata: BTreeMap<String, String> = output
            .metadata()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let bucket = self.bucket.clone();
        let key = key.to_owned();
        let body = futures::stream::try_unfold(output.body, move |mut body| {
            let (bucket, key) = (bucket.clone(), key.clone());
            async move {
                match body.try_next().await {
                    Ok(Some(chunk)) => Ok(Some((chunk, body))),
                    Ok(None) => Ok(None),
                    Err(e) => Err(TrailError::Aws(format!("reading s3://{bucket}/{key}: {e}"))),
                }
            }
        })
        .boxed();
        Ok(Some(Fetched { metadata, body }))
    }
}
