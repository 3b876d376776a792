//! Owns the storage port: write an item only if absent, and say whether it was written, was
//! already there with the same payload, or was there with another. Must not know SQS or batching.

pub mod dynamodb;
pub mod memory;

use std::future::Future;

use serde_json::Value;

use crate::message::{AuditItem, Decimal};

/// The payload rule every store applies when an item with the key exists: the same `auditText`
/// and the same `extra`, numbers compared by value (`1.0` equals `1`, as DynamoDB normalises
/// them). Delivery metadata (`sqsMessageId`, `receivedAt`, …) naturally differs.
pub fn same_payload(stored: &AuditItem, new: &AuditItem) -> bool {
    stored.audit_text == new.audit_text
        && stored.extra.len() == new.extra.len()
        && stored
            .extra
            .iter()
            .all(|(k, v)| new.extra.get(k).is_some_and(|w| same_json(v, w)))
}

/// Structural JSON equality with numbers compared by value.
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => same_number(&x.to_string(), &y.to_string()),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_json(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, p)| y.get(k).is_some_and(|q| same_json(p, q)))
        }
        _ => a == b,
    }
}

/// Two numbers' texts (JSON or DynamoDB) compared by value: `1.0` equals `1`, `1e2` equals `100`.
pub fn same_number(x: &str, y: &str) -> bool {
    x == y || matches!((Decimal::parse(x), Decimal::parse(y)), (Some(p), Some(q)) if p == q)
}

/// What a conditional write found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The item was new and is now stored.
    Written,
    /// An item with this key and the same payload (`auditText`, `extra`) was already stored.
    Duplicate,
    /// An item with this key but another payload was already stored; it was left untouched.
    Conflict,
}

/// Why a write did not happen. `is_retryable` tells the batch whether another attempt can help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("throttled: {0}")]
    Throttled(String),
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("table not found: {0}")]
    TableNotFound(String),
    #[error("the item is {0} bytes, over DynamoDB's 400 KB item limit")]
    ItemTooLarge(usize),
    #[error("rejected by the store: {0}")]
    Rejected(String),
    #[error("an item with this key exists, but the store returned no old item to compare payloads")]
    Unverifiable,
}

impl StoreError {
    /// Throttling, 5xx, timeouts and connection errors: worth another attempt.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Throttled(_) | Self::Unavailable(_))
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::Throttled(_) => "throttled",
            Self::Unavailable(_) => "store_unavailable",
            Self::TableNotFound(_) => "table_not_found",
            Self::ItemTooLarge(_) => "item_too_large",
            Self::Rejected(_) => "store_rejected",
            Self::Unverifiable => "duplicate_unverified",
        }
    }
}

/// The port the batch writes through. Implementations must never overwrite an existing item.
pub trait AuditStore: Send + Sync {
    fn put_if_absent(
        &self,
        item: &AuditItem,
    ) -> impl Future<Output = Result<PutOutcome, StoreError>> + Send;
}

impl<S: AuditStore> AuditStore for std::sync::Arc<S> {
    fn put_if_absent(
        &self,
        item: &AuditItem,
    ) -> impl Future<Output = Result<PutOutcome, StoreError>> + Send {
        (**self).put_if_absent(item)
    }
}
