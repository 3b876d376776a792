//! Owns the S3 adapter of the archive bucket: aws-sdk-s3 requests (PutObject with
//! `If-None-Match: *` and `x-amz-checksum-sha256`, HeadObject, GetObject) and the mapping of their
//! errors. Must not know the archive's layout. Encryption is the bucket's default (SSE), never set
//! per request, so that the bucket alone decides it.

use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::operation::get_object::GetObjectError;
use aws_sdk_s3::operation::head_object::HeadObjectError;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::ChecksumAlgorithm;
use bytes::Bytes;

use super::{ArchiveBucket, BucketError, Created, NewObject, ObjectInfo};

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

    /// The S3 client for the SDK's configuration: path-style addressing when an endpoint is set
    /// (`AWS_ENDPOINT_URL`, a local S3 on loopback has no per-bucket host names), requests
    /// abandoned after `operation_timeout` (retries included) so that none outlives the write
    /// bound (`audit_model::archive`).
    pub fn client(sdk: &aws_config::SdkConfig, operation_timeout: Duration) -> Client {
        let config = aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(sdk.endpoint_url().is_some())
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(2))
                    .operation_timeout(operation_timeout)
                    .build(),
            )
            .build();
        Client::from_conf(config)
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
}

/// A HEAD has no body, so S3's 404 for a missing bucket looks like a missing key; S3 and moto
/// tell them apart only in the `x-amz-error-code` header when they send it. Absent: a missing key.
fn is_bucket_missing(response: &HttpResponse) -> bool {
    response.headers().get("x-amz-error-code") == Some("NoSuchBucket")
}
