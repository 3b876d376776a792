//! Owns the S3 adapter of `Bucket`: aws-sdk-s3's requests (PutObject with `If-None-Match: *` and
//! `x-amz-checksum-sha256`, HeadObject, GetObject whole or streamed, ListObjectsV2,
//! ListObjectVersions with its two lists merged back into S3's order) and which answers mean "not
//! there". Must not know the archive's layout. Encryption is the bucket's default (SSE), never set
//! per request, so that the bucket alone decides it.

use std::collections::BTreeMap;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::SdkError;
use aws_sdk_s3::operation::get_object::{GetObjectError, GetObjectOutput};
use aws_sdk_s3::operation::head_object::HeadObjectError;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ChecksumAlgorithm, ChecksumMode};
use futures::StreamExt;

use super::{
    Bucket, Created, NewObject, ObjectInfo, StoredObject, StreamedObject, VersionEntry,
    VersionInfo, VersionMarker, VersionPage, unmarked_page,
};
use crate::error::{AwsError, ErrorKind};

/// A bucket in S3.
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

    /// The bucket's name.
    pub fn name(&self) -> &str {
        &self.bucket
    }

    /// One version's or the current version's body read whole, with its version id and user
    /// metadata; `None` when there is no such object.
    async fn whole(
        &self,
        key: &str,
        version_id: Option<&str>,
    ) -> Result<Option<StoredObject>, AwsError> {
        let Some(output) = self.get_object(key, version_id).await? else {
            return Ok(None);
        };
        let metadata = metadata(&output).collect();
        let version_id = output.version_id.clone();
        Ok(Some(StoredObject {
            body: collect(output.body).await?,
            version_id,
            metadata,
        }))
    }

    /// One version's or the current version's GetObject; `None` when there is no such object.
    async fn get_object(
        &self,
        key: &str,
        version_id: Option<&str>,
    ) -> Result<Option<GetObjectOutput>, AwsError> {
        match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .set_version_id(version_id.map(str::to_owned))
            .send()
            .await
        {
            Ok(output) => Ok(Some(output)),
            Err(SdkError::ServiceError(service))
                if matches!(service.err(), GetObjectError::NoSuchKey(_)) =>
            {
                Ok(None)
            }
            Err(error) => {
                let error = AwsError::from_sdk(&error);
                match version_id {
                    Some(_) if is_no_such_version(&error) => Ok(None),
                    _ => Err(error),
                }
            }
        }
    }
}

/// A GET of a version that is not one: no such key or version; a version id that is not one
/// (400 `InvalidArgument`) or that is a delete marker's (405 `MethodNotAllowed`). A missing bucket
/// stays an error.
fn is_no_such_version(error: &AwsError) -> bool {
    !error.is(&["NoSuchBucket"])
        && (error.is(&[
            "NoSuchKey",
            "NoSuchVersion",
            "InvalidArgument",
            "MethodNotAllowed",
        ]) || matches!(error.status, Some(404 | 405)))
}

/// A HEAD has no body, so S3's 404 for a missing bucket looks like a missing key; S3 and moto
/// tell them apart only in the `x-amz-error-code` header when they send it. Absent: a missing key.
fn is_bucket_missing(response: &HttpResponse) -> bool {
    response.headers().get("x-amz-error-code") == Some("NoSuchBucket")
}

/// A body read to its end; a failure while reading it is the service's.
async fn collect(body: ByteStream) -> Result<bytes::Bytes, AwsError> {
    body.collect()
        .await
        .map(|body| body.into_bytes())
        .map_err(|e| AwsError::without_answer(ErrorKind::Unavailable, e.to_string()))
}

/// User metadata with names in lower case.
fn metadata(output: &GetObjectOutput) -> impl Iterator<Item = (String, String)> + '_ {
    output
        .metadata()
        .into_iter()
        .flatten()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
}

fn size(content_length: Option<i64>) -> u64 {
    content_length
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(0)
}

impl Bucket for S3Bucket {
    async fn put_if_absent(&self, object: NewObject) -> Result<Created, AwsError> {
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
            Err(error) if error.raw_response().map(|r| r.status().as_u16()) == Some(412) => {
                Ok(Created::AlreadyExists)
            }
            Err(error) => Err(AwsError::from_sdk(&error)),
        }
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, AwsError> {
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
                size: size(output.content_length),
            })),
            Err(SdkError::ServiceError(service))
                if matches!(service.err(), HeadObjectError::NotFound(_))
                    && !is_bucket_missing(service.raw()) =>
            {
                Ok(None)
            }
            Err(error) => Err(AwsError::from_sdk(&error)),
        }
    }

    async fn get(&self, key: &str) -> Result<Option<StoredObject>, AwsError> {
        self.whole(key, None).await
    }

    async fn get_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<StoredObject>, AwsError> {
        self.whole(key, Some(version_id)).await
    }

    async fn stream_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<StreamedObject>, AwsError> {
        let Some(output) = self.get_object(key, Some(version_id)).await? else {
            return Ok(None);
        };
        let metadata: BTreeMap<String, String> = metadata(&output).collect();
        let body = futures::stream::try_unfold(output.body, |mut body| async move {
            match body.try_next().await {
                Ok(Some(chunk)) => Ok(Some((chunk, body))),
                Ok(None) => Ok(None),
                Err(e) => Err(AwsError::without_answer(
                    ErrorKind::Unavailable,
                    e.to_string(),
                )),
            }
        })
        .boxed();
        Ok(Some(StreamedObject { metadata, body }))
    }

    async fn head_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<VersionInfo>, AwsError> {
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
                size: size(output.content_length),
                marker: output
                    .metadata
                    .as_ref()
                    .and_then(|m| m.get("marker"))
                    .cloned(),
            })),
            // No such key or version, a version id that is not one, a delete marker's.
            Err(SdkError::ServiceError(service))
                if matches!(service.raw().status().as_u16(), 400 | 404 | 405)
                    && !is_bucket_missing(service.raw()) =>
            {
                Ok(None)
            }
            Err(error) => Err(AwsError::from_sdk(&error)),
        }
    }

    async fn list_keys(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>, AwsError> {
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
                .map_err(|e| AwsError::from_sdk(&e))?;
            keys.extend(output.contents().iter().filter_map(|o| o.key.clone()));
            token = output.next_continuation_token;
            if token.is_none() || keys.len() >= max {
                keys.truncate(max);
                return Ok(keys);
            }
        }
    }

    async fn list_versions_page(
        &self,
        prefix: &str,
        from: Option<VersionMarker>,
    ) -> Result<VersionPage, AwsError> {
        let from = from.unwrap_or_default();
        let page = self
            .client
            .list_object_versions()
            .bucket(&self.bucket)
            .prefix(prefix)
            .set_key_marker(from.key)
            .set_version_id_marker(from.version_id)
            .send()
            .await
            .map_err(|e| AwsError::from_sdk(&e))?;
        // S3 sends one list, in its order; the SDK hands back versions and delete markers apart.
        // Each keeps its time and whether it is the latest, which put them back in that order:
        // keys in order, each key's latest first, then newest first (a stable sort: versions
        // before markers of the same time).
        let at =
            |t: Option<&aws_smithy_types::DateTime>| t.map_or(0, |t| t.to_millis().unwrap_or(0));
        let mut entries: Vec<(VersionEntry, i64)> = page
            .versions()
            .iter()
            .map(|v| {
                let entry = VersionEntry {
                    key: v.key().unwrap_or_default().to_owned(),
                    version_id: v.version_id().unwrap_or("null").to_owned(),
                    latest: v.is_latest().unwrap_or(false),
                    delete_marker: false,
                };
                (entry, at(v.last_modified()))
            })
            .chain(page.delete_markers().iter().map(|m| {
                let entry = VersionEntry {
                    key: m.key().unwrap_or_default().to_owned(),
                    version_id: m.version_id().unwrap_or("null").to_owned(),
                    latest: m.is_latest().unwrap_or(false),
                    delete_marker: true,
                };
                (entry, at(m.last_modified()))
            }))
            .collect();
        entries.sort_by(|(a, a_at), (b, b_at)| {
            a.key
                .cmp(&b.key)
                .then(b.latest.cmp(&a.latest))
                .then(b_at.cmp(a_at))
        });
        let next = match (
            page.is_truncated().unwrap_or(false),
            page.next_key_marker(),
            page.next_version_id_marker(),
        ) {
            (false, _, _) => None,
            (true, None, None) => return Err(unmarked_page(prefix, &self.bucket)),
            (true, key, version_id) => Some(VersionMarker {
                key: key.map(str::to_owned),
                version_id: version_id.map(str::to_owned),
            }),
        };
        Ok(VersionPage {
            entries: entries.into_iter().map(|(entry, _)| entry).collect(),
            next,
        })
    }
}
