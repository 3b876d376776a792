//! Owns the archive bucket port over `audit_aws::s3`: its S3 adapter (`S3Bucket`) and its
//! in-memory twin (`memory`) answer the archiver's requests through one implementation, which maps
//! their errors to `BucketError`. Must not know the archive's layout, nor the SDK.

use audit_aws::error::{AwsError, ErrorKind};

use super::BucketError;

pub use audit_aws::s3::S3Bucket;

/// An S3 error as the port's: refusals (4xx: no such bucket, access denied, bad request) stay
/// refused; throttling (429, `SlowDown`), conflicts (409 `ConditionalRequestConflict`, a
/// concurrent conditional write), 5xx, `RequestTimeout`, the network and unreadable answers may
/// pass; a time-out is one. (412 is no error: the adapter answers `Created::AlreadyExists`.)
pub fn bucket_error(error: AwsError) -> BucketError {
    let code = if error.code.is_empty() {
        "Unknown".to_owned()
    } else {
        error.code.clone()
    };
    match error.status {
        _ if error.kind == ErrorKind::TimedOut => BucketError::TimedOut,
        // No answer from S3, or one that could not be read: no code of S3's to go by.
        None => BucketError::Unavailable(error.text),
        Some(_) if error.code.is_empty() && error.kind == ErrorKind::Unavailable => {
            BucketError::Unavailable(error.text)
        }
        Some(409 | 429 | 500..) => BucketError::Unavailable(format!("{code}: {}", error.message)),
        Some(_) if error.is(&["SlowDown", "RequestTimeout"]) => {
            BucketError::Unavailable(format!("{code}: {}", error.message))
        }
        Some(_) => BucketError::Refused {
            code,
            message: error.message,
        },
    }
}

/// `ArchiveBucket` for a bucket of `audit_aws::s3` (the adapter and its twin answer alike).
macro_rules! archive_bucket {
    ($bucket:ty) => {
        impl $crate::bucket::ArchiveBucket for $bucket {
            async fn put_if_absent(
                &self,
                object: $crate::bucket::NewObject,
            ) -> Result<$crate::bucket::Created, $crate::bucket::BucketError> {
                audit_aws::s3::Bucket::put_if_absent(self, object)
                    .await
                    .map_err($crate::bucket::s3::bucket_error)
            }

            async fn head(
                &self,
                key: &str,
            ) -> Result<Option<$crate::bucket::ObjectInfo>, $crate::bucket::BucketError> {
                audit_aws::s3::Bucket::head(self, key)
                    .await
                    .map_err($crate::bucket::s3::bucket_error)
            }

            async fn get(
                &self,
                key: &str,
            ) -> Result<Option<bytes::Bytes>, $crate::bucket::BucketError> {
                audit_aws::s3::Bucket::get(self, key)
                    .await
                    .map(|object| object.map(|o| o.body))
                    .map_err($crate::bucket::s3::bucket_error)
            }

            async fn get_object(
                &self,
                key: &str,
            ) -> Result<Option<$crate::bucket::StoredObject>, $crate::bucket::BucketError> {
                audit_aws::s3::Bucket::get(self, key)
                    .await
                    .map_err($crate::bucket::s3::bucket_error)
            }

            async fn get_version(
                &self,
                key: &str,
                version_id: &str,
            ) -> Result<Option<$crate::bucket::StoredObject>, $crate::bucket::BucketError> {
                audit_aws::s3::Bucket::get_version(self, key, version_id)
                    .await
                    .map_err($crate::bucket::s3::bucket_error)
            }

            async fn head_version(
                &self,
                key: &str,
                version_id: &str,
            ) -> Result<Option<$crate::bucket::VersionInfo>, $crate::bucket::BucketError> {
                audit_aws::s3::Bucket::head_version(self, key, version_id)
                    .await
                    .map_err($crate::bucket::s3::bucket_error)
            }

            async fn list_keys(
                &self,
                prefix: &str,
                start_after: Option<&str>,
                max: usize,
            ) -> Result<Vec<String>, $crate::bucket::BucketError> {
                audit_aws::s3::Bucket::list_keys(self, prefix, start_after, max)
                    .await
                    .map_err($crate::bucket::s3::bucket_error)
            }

            async fn list_versions(
                &self,
                prefix: &str,
            ) -> Result<Vec<$crate::bucket::VersionEntry>, $crate::bucket::BucketError> {
                audit_aws::s3::Bucket::list_versions(self, prefix)
                    .await
                    .map_err($crate::bucket::s3::bucket_error)
            }
        }
    };
}
pub(crate) use archive_bucket;

archive_bucket!(S3Bucket);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3s_answers_map_to_the_port_as_the_archiver_retries_them() {
        let answer = |status, code: &str| bucket_error(AwsError::from_answer(status, code, "m"));
        assert_eq!(
            answer(404, "NoSuchBucket"),
            BucketError::Refused {
                code: "NoSuchBucket".into(),
                message: "m".into()
            }
        );
        assert_eq!(
            answer(403, ""),
            BucketError::Refused {
                code: "Unknown".into(),
                message: "m".into()
            }
        );
        assert_eq!(
            answer(400, "ExpiredToken"),
            BucketError::Refused {
                code: "ExpiredToken".into(),
                message: "m".into()
            }
        );
        assert_eq!(
            answer(409, "ConditionalRequestConflict"),
            BucketError::Unavailable("ConditionalRequestConflict: m".into())
        );
        assert_eq!(
            answer(503, "SlowDown"),
            BucketError::Unavailable("SlowDown: m".into())
        );
        assert_eq!(
            answer(400, "RequestTimeout"),
            BucketError::Unavailable("RequestTimeout: m".into())
        );
        assert!(matches!(answer(503, ""), BucketError::Unavailable(_)));
        assert_eq!(
            bucket_error(AwsError::without_answer(ErrorKind::TimedOut, "t")),
            BucketError::TimedOut
        );
        assert_eq!(
            bucket_error(AwsError::without_answer(ErrorKind::Unavailable, "reset")),
            BucketError::Unavailable("reset".into())
        );
    }
}
