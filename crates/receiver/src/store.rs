//! Owns the storage port: write an item only if absent, and say whether it was written, was
//! already there with the same payload, or was there with another. Must not know SQS or batching.
//!
//! The adapters are audit-aws's: `DynamoDbStore` (production) and its twin `MemoryStore` (tests),
//! with their vocabulary (`PutOutcome`, `StoreError`) and the one payload rule.

use std::future::Future;

use audit_aws::dynamodb::{DynamoDbStore, MemoryStore, Transport};
use audit_model::message::AuditItem;

pub use audit_aws::dynamodb::{PutOutcome, StoreError};

/// The port the batch writes through. Implementations must never overwrite an existing item.
pub trait AuditStore: Send + Sync {
    fn put_if_absent(
        &self,
        item: &AuditItem,
    ) -> impl Future<Output = Result<PutOutcome, StoreError>> + Send;
}

impl<T: Transport> AuditStore for DynamoDbStore<T> {
    fn put_if_absent(
        &self,
        item: &AuditItem,
    ) -> impl Future<Output = Result<PutOutcome, StoreError>> + Send {
        DynamoDbStore::put_if_absent(self, item)
    }
}

impl AuditStore for MemoryStore {
    fn put_if_absent(
        &self,
        item: &AuditItem,
    ) -> impl Future<Output = Result<PutOutcome, StoreError>> + Send {
        MemoryStore::put_if_absent(self, item)
    }
}

impl<S: AuditStore> AuditStore for std::sync::Arc<S> {
    fn put_if_absent(
        &self,
        item: &AuditItem,
    ) -> impl Future<Output = Result<PutOutcome, StoreError>> + Send {
        (**self).put_if_absent(item)
    }
}
