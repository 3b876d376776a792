//! Owns the S3 adapter of the archive bucket: aws-sdk-s3 requests (PutObject with
//! `If-None-Match: *` and `x-amz-checksum-sha256`, HeadObject, GetObject) and the mapping of their
//! errors. Must not know the archive's layout. Encryption is the bucket's default (SSE), never set
//! per request, so that the bucket alone decides it.

use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::operation::get_object::GetObjectError;
use aws_sdk_s3::operation::head_object::HeadObjectError;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ChecksumAlgorithm, ChecksumMode};
use bytes::Bytes;

use super::{
    ArchiveBucket, BucketError, Created, NewObject, ObjectInfo, StoredObject, VersionEntry,
    VersionInfo,
};

/// The archive bucket in S3.
#[derive(Debug, Clone)]
pub struct S3Bucket {
    client: Client,
    bucket: String,
}

impl S3Bucket {
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        Self {
            client,
            bucket: bucket.into(),
        }
    }
}

/// An SDK error as the port's: refusals (4xx: no such bucket, access denied, bad request) stay
/// refused; throttling, conflicts, 5xx, timeouts and the network may pass. (412 is handled by the
/// caller, which asked for it.)
fn bucket_error<E>(error: &SdkError<E, HttpResponse>) -> BucketError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match error {
        SdkError::TimeoutError(_) => BucketError::TimedOut,
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or("Unknown").to_owned();
            let message = service.err().message().unwrap_or_default().to_owned();
            match status(error) {
                // 409 ConditionalRequestConflict (a concurrent conditional write), throttling.
                Some(409 | 429 | 500..) | None => {
                    BucketError::Unavailable(format!("{code}: {message}"))
                }
                Some(_) if code == "SlowDown" || code == "RequestTimeout" => {
                    BucketError::Unavailable(format!("{code}: {message}"))
                }
                Some(_) => BucketError::Refused { code, message },
            }
        }
        other => BucketError::Unavailable(DisplayErrorContext(other).to_string()),
    }
}

fn status<E>(error: &SdkError<E, HttpResponse>) -> Option<u16> {
    error.raw_response().map(|r| r.status().as_u16())
}

impl ArchiveBucket for S3Bucket {
    async fn put_if_absent(&self, object: NewObject) -> Result<Created, BucketError> {
        let mut request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(&object.key)
            .if_none_match("*")
            .content_type(object.content_type)
            // Object Lock requires a checksum algorithm header (or Content-MD5) on every PUT.
            .checksum_algorithm(ChecksumAlgorithm::Sha256)
            .checksum_sha256(aws_smithy_types::base64::encode(object.sha256))
            .body(ByteStream::from(object.body));
        for (name, value) in object.metadata {
            request = request.metadata(name, value);
        }
        match request.send().await {
            Ok(output) => Ok(Created::New {
                version_id: output.version_id,
            }),
            Err(error) if status(&error) == Some(412) => Ok(Created::AlreadyExists),
            Err(error) => Err(bucket_error(&error)),
        }
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, BucketError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(output) => Ok(Some(ObjectInfo {
                etag: output.e_tag,
                version_id: output.version_id,
                size: output
                    .content_length
                    .and_then(|n| u64::try_from(n).ok())
                    .unwrap_or(0),
            })),
            Err(SdkError::ServiceError(service))
                if matches!(service.err(), HeadObjectError::NotFound(_))
                    && !is_bucket_missing(service.raw()) =>
            {
                Ok(None)
            }
            Err(error) => Err(bucket_error(&error)),
        }
    }

    async fn get(&self, key: &str) -> Result<Option<Bytes>, BucketError> {
        match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(output) => output
                .body
                .collect()
                .await
                .map(|body| Some(body.into_bytes()))
                .map_err(|e| BucketError::Unavailable(e.to_string())),
            Err(SdkError::ServiceError(service))
                if matches!(service.err(), GetObjectError::NoSuchKey(_)) =>
            {
                Ok(None)
            }
            Err(error) => Err(bucket_error(&error)),
        }
    }

    async fn get_object(&self, key: &str) -> Result<Option<StoredObject>, BucketError> {
        self.read_version(key, None).await
    }

    async fn get_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<StoredObject>, BucketError> {
        self.read_version(key, Some(version_id)).await
    }

    async fn head_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<VersionInfo>, BucketError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .version_id(version_id)
            .checksum_mode(ChecksumMode::Enabled)
            .send()
            .await
        {
            Ok(output) => Ok(Some(VersionInfo {
                sha256: output
                    .checksum_sha256
                    .as_deref()
                    .and_then(|b64| aws_smithy_types::base64::decode(b64).ok())
                    .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok()),
                events: output
                    .metadata
                    .as_ref()
                    .and_then(|m| m.get("events"))
                    .and_then(|e| e.parse().ok()),
                size: output
                    .content_length
                    .and_then(|n| u64::try_from(n).ok())
                    .unwrap_or(0),
            })),
            Err(SdkError::ServiceError(service))
                if matches!(service.raw().status().as_u16(), 400 | 404 | 405)
                    && !is_bucket_missing(service.raw()) =>
            {
                Ok(None)
            }
            Err(error) => Err(bucket_error(&error)),
        }
    }

    async fn list_keys(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>, BucketError> {
        let mut keys = Vec::new();
        let mut token = None;
        loop {
            let output = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_start_after(start_after.map(str::to_owned))
                .set_continuation_token(token.take())
                .max_keys(i32::try_from(max.saturating_sub(keys.len()).min(1000)).unwrap_or(1000))
                .send()
                .await
                .map_err(|e| bucket_error(&e))?;
            keys.extend(output.contents().iter().filter_map(|o| o.key.clone()));
            token = output.next_continuation_token;
            if token.is_none() || keys.len() >= max {
                keys.truncate(max);
                return Ok(keys);
            }
        }
    }

    async fn list_versions(&self, prefix: &str) -> Result<Vec<VersionEntry>, BucketError> {
        // The SDK hands versions and delete markers back in two lists; each entry keeps its
        // time and whether it is the latest, which put them back in S3's order.
        let mut entries: Vec<(VersionEntry, bool, i64)> = Vec::new();
        let (mut key_marker, mut version_marker) = (None, None);
        loop {
            let output = self
                .client
                .list_object_versions()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_key_marker(key_marker.take())
                .set_version_id_marker(version_marker.take())
                .send()
                .await
                .map_err(|e| bucket_error(&e))?;
            for v in output.versions() {
                entries.push((
                    VersionEntry {
                        key: v.key.clone().unwrap_or_default(),
                        version_id: v.version_id.clone().unwrap_or_default(),
                        delete_marker: false,
                    },
                    v.is_latest.unwrap_or(false),
                    v.last_modified.map_or(0, |t| t.to_millis().unwrap_or(0)),
                ));
            }
            for m in output.delete_markers() {
                entries.push((
                    VersionEntry {
                        key: m.key.clone().unwrap_or_default(),
                        version_id: m.version_id.clone().unwrap_or_default(),
                        delete_marker: true,
                    },
                    m.is_latest.unwrap_or(false),
                    m.last_modified.map_or(0, |t| t.to_millis().unwrap_or(0)),
                ));
            }
            if output.is_truncated != Some(true) {
                break;
            }
            key_marker = output.next_key_marker;
            version_marker = output.next_version_id_marker;
        }
        entries.sort_by(|(a, a_latest, a_at), (b, b_latest, b_at)| {
            a.key
                .cmp(&b.key)
                .then(b_latest.cmp(a_latest))
                .then(b_at.cmp(a_at))
        });
        Ok(entries.into_iter().map(|(entry, _, _)| entry).collect())
    }
}

impl S3Bucket {
    /// One version's body (`None`: no such version, or a delete marker).
    async fn read_version(
        &self,
        key: &str,
        version_id: Option<&str>,
    ) -> Result<Option<StoredObject>, BucketError> {
        match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .set_version_id(version_id.map(str::to_owned))
            .send()
            .await
        {
            Ok(output) => {
                let metadata = output
                    .metadata
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(n, v)| (n.to_ascii_lowercase(), v))
                    .collect();
                let version_id = output.version_id.clone();
                let body = output
                    .body
                    .collect()
                    .await
                    .map_err(|e| BucketError::Unavailable(e.to_string()))?
                    .into_bytes();
                Ok(Some(StoredObject {
                    body,
                    version_id,
                    metadata,
                }))
            }
            Err(SdkError::ServiceError(service))
                if matches!(service.err(), GetObjectError::NoSuchKey(_))
                    || (version_id.is_some()
                        && matches!(service.raw().status().as_u16(), 400 | 404 | 405)
                        && matches!(
                            service.err().code(),
                            Some("NoSuchVersion" | "InvalidArgument" | "MethodNotAllowed")
                        )) =>
            {
                Ok(None)
            }
            Err(error) => Err(bucket_error(&error)),
        }
    }
}

/// A HEAD has no body, so S3's 404 for a missing bucket looks like a missing key; S3 and moto
/// tell them apart only in the `x-amz-error-code` header when they send it. Absent: a missing key.
fn is_bucket_missing(response: &HttpResponse) -> bool {
    response.headers().get("x-amz-error-code") == Some("NoSuchBucket")
}
