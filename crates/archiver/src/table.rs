//! Owns the table port of the repair: the items of given keys, read consistently from the audit
//! table (never from whoever asked for the repair), and its errors. Must not know the archive or
//! the SDK (adapters: `dynamodb` over the SDK's BatchGetItem, `memory` its twin).

pub mod dynamodb;
pub mod memory;

use std::future::Future;

use audit_model::repair::ItemKey;

use crate::event::Image;

/// A failed read of the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// Another attempt may succeed (throttling, 5xx, the network, keys left unprocessed).
    #[error("the table is unavailable: {0}")]
    Unavailable(String),
    /// The table refused (not found, access denied, bad request): fixed by a person.
    #[error("the table refused: {code}: {message}")]
    Refused { code: String, message: String },
}

/// The audit table, read.
pub trait ItemTable: Send + Sync {
    /// The items of `keys` (at most 100) as DynamoDB's JSON, read with ConsistentRead; a key the
    /// table does not hold is left out. Any order.
    fn get_items(
        &self,
        keys: &[ItemKey],
    ) -> impl Future<Output = Result<Vec<Image>, TableError>> + Send;
}

impl<T: ItemTable> ItemTable for &T {
    fn get_items(
        &self,
        keys: &[ItemKey],
    ) -> impl Future<Output = Result<Vec<Image>, TableError>> + Send {
        (**self).get_items(keys)
    }
}
