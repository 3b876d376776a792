//! Owns the ports `verify` reads through: the archive bucket (its versions and delete markers, one
//! version's bytes), the digest key (its public key, as KMS describes it) and the table (items by
//! time, items by key). Must not know the SDK, nor what is checked.

use std::collections::BTreeMap;
use std::future::Future;

use bytes::Bytes;
use futures::TryStreamExt;
use futures::stream::BoxStream;

use crate::TrailError;
use crate::tlog::LogReader;
use audit_model::range::TimeRange;

/// One entry of a version listing: a version of a key, or a delete marker (`audit_aws::s3`'s).
pub use audit_aws::s3::VersionEntry as Entry;

/// One version read: its user metadata (names in lower case, without `x-amz-meta-`) and its
/// bytes, streamed as they arrive.
pub struct Fetched {
    pub metadata: BTreeMap<String, String>,
    pub body: BoxStream<'static, Result<Bytes, TrailError>>,
}

impl Fetched {
    /// The whole body (for a digest: small).
    pub async fn bytes(self) -> Result<Vec<u8>, TrailError> {
        self.body
            .try_fold(Vec::new(), |mut all, chunk| async move {
                all.extend_from_slice(&chunk);
                Ok(all)
            })
            .await
    }
}

/// The archive bucket, read.
pub trait Archive: Send + Sync {
    /// The bucket underneath, as the transparency log's objects are read from it.
    type Bucket: audit_aws::s3::Bucket;

    /// The transparency log's objects (tiles, checkpoints, cosignatures), read at their current
    /// version through `tlog::LogReader`, shared with the other commands.
    fn log(&self) -> LogReader<'_, Self::Bucket>;

    /// Every version and delete marker whose key starts with `prefix`, in S3's order (keys in
    /// order, each key's versions and delete markers newest first), page by page.
    fn versions(&self, prefix: String) -> BoxStream<'_, Result<Entry, TrailError>>;

    /// The bucket's default Object Lock retention in days (a year counted as 366), `None`
    /// when it has none: how long a digest is kept for certain.
    fn default_retention_days(
        &self,
    ) -> impl Future<Output = Result<Option<u32>, TrailError>> + Send;

    /// One version, or `None` when the key has no such version.
    fn get(
        &self,
        key: &str,
        version_id: &str,
    ) -> impl Future<Output = Result<Option<Fetched>, TrailError>> + Send;
}

/// The digest key as KMS's GetPublicKey describes it (`audit_aws::kms`'s).
pub use audit_aws::kms::PublicKeyInfo;

/// Where the digest key's public key comes from (KMS; never from next to a digest).
pub trait KeySource: Send + Sync {
    fn public_key(&self) -> impl Future<Output = Result<PublicKeyInfo, TrailError>> + Send;
}

/// An item of the table as `verify` compares it: its key, its JSON line (`item_line`, what the
/// archive stores) and when the function wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableItem {
    pub message_id: String,
    pub audit_time: String,
    pub line: String,
    /// `receivedAt`, when the item has one.
    pub received_at: Option<String>,
}

/// The audit table, read.
pub trait Table: Send + Sync {
    /// Every item with `range.from <= auditTime <= range.to`, streamed (the byAuditTime index).
    fn items(&self, range: &TimeRange) -> BoxStream<'static, Result<TableItem, TrailError>>;

    /// The items the table holds of these keys (`messageId`, `auditTime`), at most 100, in any
    /// order; a key it does not hold is left out.
    fn get(
        &self,
        keys: Vec<(String, String)>,
    ) -> impl Future<Output = Result<Vec<TableItem>, TrailError>> + Send;
}
