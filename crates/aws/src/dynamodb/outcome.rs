//! Owns the DynamoDB adapter's vocabulary: what a conditional write found (`PutOutcome`, by the
//! model's payload rule), why a write did not happen (`StoreError`), and why the start-up check
//! refused the table (`StartupError`). Must not know HTTP or SQS.

use audit_model::Reason;
use audit_model::message::AuditItem;
use audit_model::payload::same_payload;

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

impl PutOutcome {
    /// What a write that found `stored` under the new item's key did: the same payload by the
    /// model's rule (`payload::same_payload`, the only one) is a duplicate, another a conflict.
    /// The adapter and its in-memory twin both decide here.
    pub fn existing(stored: &AuditItem, new: &AuditItem) -> Self {
        if same_payload(stored, new) {
            Self::Duplicate
        } else {
            Self::Conflict
        }
    }
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
    /// The caller may not do this (IAM, a service control policy, a VPC endpoint policy, a KMS
    /// key policy): the deployment's fault, not the message's.
    #[error("access denied: {0}")]
    AccessDenied(String),
    #[error("an item with this key exists, but the store returned no old item to compare payloads")]
    Unverifiable,
}

impl StoreError {
    /// Throttling, 5xx, timeouts and connection errors: worth another attempt within the
    /// invocation. A refused access is not (a policy is not fixed in milliseconds, and hammering
    /// it helps nobody), but it is transient across receives (its `Reason`).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Throttled(_) | Self::Unavailable(_))
    }

    pub fn reason(&self) -> Reason {
        match self {
            Self::Throttled(_) => Reason::Throttled,
            Self::Unavailable(_) => Reason::StoreUnavailable,
            Self::TableNotFound(_) => Reason::TableNotFound,
            Self::ItemTooLarge(_) => Reason::ItemTooLarge,
            Self::Rejected(_) => Reason::StoreRejected,
            Self::AccessDenied(_) => Reason::AccessDenied,
            Self::Unverifiable => Reason::DuplicateUnverified,
        }
    }

    pub fn code(&self) -> &'static str {
        self.reason().code()
    }
}

/// What the start-up check (`DynamoDbStore::warm_up`) found wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartupError {
    /// The table's key is not the one the function writes: every write would be refused, and
    /// every record would end in the dead-letter queue. The function must not start; the text
    /// names both keys and what to do.
    #[error("{0}")]
    WrongTable(String),
    /// The check could not be made or failed on its way (the table missing, access refused, no
    /// answer in time): the function starts, and its writes say what is wrong, record by record.
    #[error(transparent)]
    Store(#[from] StoreError),
}
