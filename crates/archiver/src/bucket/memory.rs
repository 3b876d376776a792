//! Owns the archive bucket port over `audit_aws::s3`'s in-memory twin of a versioned bucket (S3's
//! behaviour that the archiver relies on: `If-None-Match: *` answered "already exists", versions,
//! ETags, a missing bucket refused; plus the faults that tests and benchmarks inject), through the
//! same implementation as S3's. Must not know the archive's layout.

pub use audit_aws::s3::memory::{Effect, Fault, MemoryBucket, Operation, Version};

super::s3::archive_bucket!(MemoryBucket);

#[cfg(test)]
mod tests {
    use audit_aws::error::{AwsError, ErrorKind};
    use bytes::Bytes;

    use super::*;
    use crate::bucket::{ArchiveBucket, BucketError, Created, NewObject};

    fn object(key: &str, body: &'static str) -> NewObject {
        NewObject {
            key: key.into(),
            body: Bytes::from_static(body.as_bytes()),
            content_type: "text/plain",
            sha256: [0; 32],
            metadata: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_second_create_of_a_key_is_refused_like_s3s_412() {
        let bucket = MemoryBucket::new();
        assert!(matches!(
            bucket.put_if_absent(object("a", "1")).await,
            Ok(Created::New { .. })
        ));
        assert_eq!(
            bucket.put_if_absent(object("a", "2")).await,
            Ok(Created::AlreadyExists)
        );
        assert_eq!(bucket.get("a").await.unwrap().unwrap(), "1");
        assert_eq!(bucket.versions("a").len(), 1);
        assert_eq!(bucket.head("b").await, Ok(None));
        bucket.overwrite("a", Bytes::from_static(b"3"));
        assert_eq!(bucket.versions("a").len(), 2);
        assert_eq!(bucket.get("a").await.unwrap().unwrap(), "3");
    }

    #[tokio::test]
    async fn faults_fail_lose_answers_and_run_out() {
        let bucket = MemoryBucket::new();
        bucket.inject(Fault {
            operation: Operation::Put,
            prefix: "x/".into(),
            times: Some(1),
            effect: Effect::LoseAnswer(AwsError::without_answer(ErrorKind::TimedOut, "timed out")),
        });
        assert_eq!(
            bucket.put_if_absent(object("x/1", "1")).await,
            Err(BucketError::TimedOut)
        );
        assert!(bucket.current("x/1").is_some(), "written, answer lost");
        assert_eq!(
            bucket.put_if_absent(object("x/1", "1")).await,
            Ok(Created::AlreadyExists)
        );
        bucket.set_missing(true);
        assert!(matches!(
            bucket.head("x/1").await,
            Err(BucketError::Refused { code, .. }) if code == "NoSuchBucket"
        ));
    }
}
