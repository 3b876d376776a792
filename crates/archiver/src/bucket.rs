//! Owns nothing of its own: the names other crates' tests and the benchmarks import the archive
//! bucket by, which are `audit_aws::s3`'s (docs/architecture.md: S3 is talked to once, there).
//! Must not restate `audit_aws::s3::Bucket`, its values or its errors.

pub use audit_aws::s3::{
    Bucket as ArchiveBucket, Created, NewObject, ObjectInfo, StoredObject, VersionEntry,
    VersionInfo,
};

/// The S3 adapter.
pub mod s3 {
    pub use audit_aws::s3::S3Bucket;
}

/// The in-memory twin and the faults tests inject into it.
pub mod memory {
    pub use audit_aws::s3::memory::{Effect, Fault, MemoryBucket, Operation, Version};
}
