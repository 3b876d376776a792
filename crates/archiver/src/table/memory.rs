//! Owns the in-memory twin of the table port: items by key, read as DynamoDB's BatchGetItem reads
//! them (a key it does not hold left out, more than 100 keys refused), and a fault to inject.
//! Must not know the repair.

use std::collections::HashMap;
use std::sync::Mutex;

use audit_aws::dynamodb::batch_get::BatchGetError;
use audit_aws::error::AwsError;
use audit_model::keys::{PARTITION_KEY, SORT_KEY};
use audit_model::repair::ItemKey;
use serde_json::Value;

use super::ItemTable;
use crate::event::Image;

/// The audit table in memory.
#[derive(Debug, Default)]
pub struct MemoryTable {
    items: Mutex<HashMap<ItemKey, Image>>,
    fail: Mutex<Option<BatchGetError>>,
    reads: Mutex<usize>,
}

impl MemoryTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores `item` (DynamoDB's JSON with `messageId` and `auditTime` as strings), over any item
    /// of its key.
    pub fn put(&self, item: Image) {
        let text = |name: &str| {
            item.get(name)
                .and_then(|v| v.get("S"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let key = ItemKey {
            message_id: text(PARTITION_KEY),
            audit_time: text(SORT_KEY),
        };
        self.lock_items().insert(key, item);
    }

    /// Every read fails with `error` from now on (`None`: reads work again).
    pub fn fail_with(&self, error: Option<BatchGetError>) {
        *self.fail.lock().unwrap_or_else(|e| e.into_inner()) = error;
    }

    /// BatchGetItem requests served.
    pub fn reads(&self) -> usize {
        *self.reads.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_items(&self) -> std::sync::MutexGuard<'_, HashMap<ItemKey, Image>> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ItemTable for MemoryTable {
    async fn get_items(&self, keys: &[ItemKey]) -> Result<Vec<Image>, BatchGetError> {
        *self.reads.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        if let Some(error) = self.fail.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Err(error);
        }
        if keys.len() > 100 {
            return Err(BatchGetError::Request(AwsError::from_answer(
                400,
                "ValidationException",
                "Too many items requested for the BatchGetItem call",
            )));
        }
        let distinct: std::collections::HashSet<&ItemKey> = keys.iter().collect();
        if distinct.len() < keys.len() {
            return Err(BatchGetError::Request(AwsError::from_answer(
                400,
                "ValidationException",
                "Provided list of item keys contains duplicates",
            )));
        }
        let items = self.lock_items();
        Ok(keys.iter().filter_map(|k| items.get(k).cloned()).collect())
    }
}
