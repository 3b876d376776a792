//! Owns the ports `verify` reads through besides the archive bucket (`crate::archive`'s): the
//! digest key (its public key, as KMS describes it) and the table (items by time, items by key),
//! which the caller adapts. Must not know the SDK, nor what is checked.

use std::future::Future;

use futures::stream::BoxStream;

use crate::Error;
use audit_model::range::TimeRange;

pub use crate::archive::{Archive, Entry, Fetched};

/// The digest key as KMS's GetPublicKey describes it (`audit_aws::kms`'s).
pub use audit_aws::kms::PublicKeyInfo;

/// Where the digest key's public key comes from (KMS; never from next to a digest).
pub trait KeySource: Send + Sync {
    fn public_key(&self) -> impl Future<Output = Result<PublicKeyInfo, Error>> + Send;
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
    fn items(&self, range: &TimeRange) -> BoxStream<'static, Result<TableItem, Error>>;

    /// The items the table holds of these keys (`messageId`, `auditTime`), at most 100, in any
    /// order; a key it does not hold is left out.
    fn get(
        &self,
        keys: Vec<(String, String)>,
    ) -> impl Future<Output = Result<Vec<TableItem>, Error>> + Send;
}

#[cfg(any(test, feature = "test-support"))]
pub mod memory;
#[cfg(any(test, feature = "test-support"))]
pub use memory::MemoryTable;
