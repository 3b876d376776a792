//! Owns the in-memory twins of verify's ports, for its tests and (feature `test-support`) the
//! tests of its callers: a table, and `audit_aws::kms`'s key as the digest key. The archive's
//! twin is `crate::archive::S3Archive` over `audit_aws::s3::MemoryBucket`; what writes and seals
//! it is the archiver's own. Must not know what is checked.

use std::collections::BTreeMap;
use std::sync::Mutex;

use audit_aws::kms::MemoryKey;
use audit_model::range::TimeRange;
use futures::StreamExt;
use futures::stream::BoxStream;

use super::{KeySource, PublicKeyInfo, Table, TableItem};
use crate::Error;

/// `audit_aws::kms`'s twin (a P-256 key that signs as KMS's ECDSA_SHA_256 with MessageType RAW
/// does) as the digest key.
impl KeySource for MemoryKey {
    async fn public_key(&self) -> Result<PublicKeyInfo, Error> {
        Ok(MemoryKey::public_key(self))
    }
}

/// A table.
#[derive(Debug, Default)]
pub struct MemoryTable {
    pub items: Mutex<BTreeMap<(String, String), TableItem>>,
}

impl MemoryTable {
    pub fn put(&self, item: TableItem) {
        self.items
            .lock()
            .unwrap()
            .insert((item.message_id.clone(), item.audit_time.clone()), item);
    }

    pub fn remove(&self, message_id: &str, audit_time: &str) {
        self.items
            .lock()
            .unwrap()
            .remove(&(message_id.to_owned(), audit_time.to_owned()));
    }

    pub fn get_item(&self, message_id: &str, audit_time: &str) -> Option<TableItem> {
        self.items
            .lock()
            .unwrap()
            .get(&(message_id.to_owned(), audit_time.to_owned()))
            .cloned()
    }
}

impl Table for MemoryTable {
    fn items(&self, range: &TimeRange) -> BoxStream<'static, Result<TableItem, Error>> {
        let mut items: Vec<TableItem> = self
            .items
            .lock()
            .unwrap()
            .values()
            .filter(|i| i.audit_time >= range.from && i.audit_time <= range.to)
            .cloned()
            .collect();
        items.sort_by(|a, b| (&a.audit_time, &a.message_id).cmp(&(&b.audit_time, &b.message_id)));
        futures::stream::iter(items.into_iter().map(Ok)).boxed()
    }

    async fn get(&self, keys: Vec<(String, String)>) -> Result<Vec<TableItem>, Error> {
        assert!(keys.len() <= 100, "BatchGetItem takes at most 100 keys");
        let unique: std::collections::BTreeSet<_> = keys.iter().collect();
        assert_eq!(unique.len(), keys.len(), "BatchGetItem refuses a key twice");
        let items = self.items.lock().unwrap();
        Ok(keys.iter().filter_map(|k| items.get(k).cloned()).collect())
    }
}
