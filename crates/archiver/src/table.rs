//! Owns the table port of the repair: the items of given keys, read consistently from the audit
//! table (never from whoever asked for the repair); its errors are `audit_aws::error`'s. Must not
//! know the archive or the SDK (adapters: `dynamodb` over the SDK's BatchGetItem, `memory` its twin).

pub mod dynamodb;
pub mod memory;

use std::future::Future;

use audit_aws::dynamodb::batch_get::BatchGetError;
use audit_model::repair::ItemKey;

use crate::event::Image;

/// The audit table, read.
pub trait ItemTable: Send + Sync {
    /// The items of `keys` (at most 100) as DynamoDB's JSON, read with ConsistentRead; a key the
    /// table does not hold is left out. Any order.
    fn get_items(
        &self,
        keys: &[ItemKey],
    ) -> impl Future<Output = Result<Vec<Image>, BatchGetError>> + Send;
}

impl<T: ItemTable> ItemTable for &T {
    fn get_items(
        &self,
        keys: &[ItemKey],
    ) -> impl Future<Output = Result<Vec<Image>, BatchGetError>> + Send {
        (**self).get_items(keys)
    }
}
