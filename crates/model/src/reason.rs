//! Owns the reason codes of every failure and, in one exhaustive `match`, whether another
//! receive can cure each one. Must not know how a failure happened or how it is reported.

/// Why a record did not end in the table: the code in logs, metrics, the dead-letter queue's
/// `failureReason` and `auditctl dlq list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    // The body (every one the same on every receive).
    MissingBody,
    InvalidJson,
    NotAnObject,
    MissingAuditText,
    EmptyAuditText,
    InvalidFieldType,
    InvalidFieldValue,
    InvalidEnvelope,
    AuditTimeWithoutOffset,
    InvalidAuditTime,
    MissingAuditTime,
    InvalidMessageId,
    MessageIdWithoutAuditTime,
    InvalidNumber,
    /// `extra` nested deeper than DynamoDB's 32 levels.
    NestingTooDeep,
    // The write.
    ItemTooLarge,
    Conflict,
    DuplicateUnverified,
    StoreRejected,
    Throttled,
    StoreUnavailable,
    AccessDenied,
    TableNotFound,
    // The batch.
    Deadline,
    Panic,
    GroupStopped,
    /// Not the function's: SQS moved the message after `maxReceiveCount` receives, with no
    /// reason of its own; `auditctl dlq redrive` names it so when it builds a `failureContext`.
    MaxReceives,
    // The delivery: which queue it came from and who AWS says sent it.
    /// An `auditctl.*` action from a queue other than the access queue: only `auditctl` records
    /// access, and only through the access queue.
    ReservedAction,
    /// A delivery from the access queue that is not an access event of its attested sender.
    AccessEventInvalid,
}

/// What a failure with this reason becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Fails the same way on every receive: dead-lettered at the first one.
    Permanent,
    /// Another receive may succeed: reported for SQS to deliver again, dead-lettered by the
    /// function only on the last receive.
    Transient,
}

impl Reason {
    /// Every reason, in the order above.
    pub const ALL: [Reason; 29] = [
        Self::MissingBody,
        Self::InvalidJson,
        Self::NotAnObject,
        Self::MissingAuditText,
        Self::EmptyAuditText,
        Self::InvalidFieldType,
        Self::InvalidFieldValue,
        Self::InvalidEnvelope,
        Self::AuditTimeWithoutOffset,
        Self::InvalidAuditTime,
        Self::MissingAuditTime,
        Self::InvalidMessageId,
        Self::MessageIdWithoutAuditTime,
        Self::InvalidNumber,
        Self::NestingTooDeep,
        Self::ItemTooLarge,
        Self::Conflict,
        Self::DuplicateUnverified,
        Self::StoreRejected,
        Self::Throttled,
        Self::StoreUnavailable,
        Self::AccessDenied,
        Self::TableNotFound,
        Self::Deadline,
        Self::Panic,
        Self::GroupStopped,
        Self::MaxReceives,
        Self::ReservedAction,
        Self::AccessEventInvalid,
    ];

    /// The stable code.
    pub const fn code(self) -> &'static str {
        match self {
            Self::MissingBody => "missing_body",
            Self::InvalidJson => "invalid_json",
            Self::NotAnObject => "not_an_object",
            Self::MissingAuditText => "missing_audit_text",
            Self::EmptyAuditText => "empty_audit_text",
            Self::InvalidFieldType => "invalid_field_type",
            Self::InvalidFieldValue => "invalid_field_value",
            Self::InvalidEnvelope => "invalid_envelope",
            Self::AuditTimeWithoutOffset => "audit_time_without_offset",
            Self::InvalidAuditTime => "invalid_audit_time",
            Self::MissingAuditTime => "missing_audit_time",
            Self::InvalidMessageId => "invalid_message_id",
            Self::MessageIdWithoutAuditTime => "message_id_without_audit_time",
            Self::InvalidNumber => "invalid_number",
            Self::NestingTooDeep => "nesting_too_deep",
            Self::ItemTooLarge => "item_too_large",
            Self::Conflict => "conflict",
            Self::DuplicateUnverified => "duplicate_unverified",
            Self::StoreRejected => "store_rejected",
            Self::Throttled => "throttled",
            Self::StoreUnavailable => "store_unavailable",
            Self::AccessDenied => "access_denied",
            Self::TableNotFound => "table_not_found",
            Self::Deadline => "deadline",
            Self::Panic => "panic",
            Self::GroupStopped => "group_stopped",
            Self::MaxReceives => "max_receives",
            Self::ReservedAction => "reserved_action",
            Self::AccessEventInvalid => "access_event_invalid",
        }
    }

    /// The one decision of permanence. Exhaustive on purpose: a new reason does not compile
    /// until someone says which it is.
    pub const fn disposition(self) -> Disposition {
        match self {
            Self::MissingBody
            | Self::InvalidJson
            | Self::NotAnObject
            | Self::MissingAuditText
            | Self::EmptyAuditText
            | Self::InvalidFieldType
            | Self::InvalidFieldValue
            | Self::InvalidEnvelope
            | Self::AuditTimeWithoutOffset
            | Self::InvalidAuditTime
            | Self::MissingAuditTime
            | Self::InvalidMessageId
            | Self::MessageIdWithoutAuditTime
            | Self::InvalidNumber
            | Self::NestingTooDeep
            | Self::ItemTooLarge
            | Self::Conflict
            | Self::DuplicateUnverified
            | Self::StoreRejected
            | Self::Panic
            // Where a message came from and who sent it are the same on every receive.
            | Self::ReservedAction
            | Self::AccessEventInvalid => Disposition::Permanent,
            // A refused caller (IAM, SCP, VPC endpoint or KMS key policy) is the deployment's
            // fault, not the message's: the queue drains by itself once the policy is fixed.
            Self::Throttled
            | Self::StoreUnavailable
            | Self::AccessDenied
            | Self::TableNotFound
            | Self::Deadline
            | Self::GroupStopped
            // SQS already retried it to exhaustion; a redrive gives it a fresh start.
            | Self::MaxReceives => Disposition::Transient,
        }
    }

    pub const fn is_transient(self) -> bool {
        matches!(self.disposition(), Disposition::Transient)
    }

    /// What it means, in a sentence (docs/operations.md "Reason codes" says more, and what to do).
    pub const fn meaning(self) -> &'static str {
        match self {
            Self::MissingBody => "the record has no body",
            Self::InvalidJson => "the body is not JSON",
            Self::NotAnObject => "the body is JSON but not an object",
            Self::MissingAuditText => "neither auditText nor action",
            Self::EmptyAuditText => "auditText is empty",
            Self::InvalidFieldType => "a field has the wrong JSON type",
            Self::InvalidFieldValue => {
                "a field's value breaks its rule (length, outcome word, IP address)"
            }
            Self::InvalidEnvelope => "a CloudEvent or EventBridge envelope that is not valid",
            Self::AuditTimeWithoutOffset => "auditTime is a local time with no Z or offset",
            Self::InvalidAuditTime => "auditTime is not an RFC 3339 time",
            Self::MissingAuditTime => "no auditTime and no valid SentTimestamp",
            Self::InvalidMessageId => "messageId is empty or longer than 256 characters",
            Self::MessageIdWithoutAuditTime => {
                "a producer messageId without auditTime: every re-send would be a new item"
            }
            Self::InvalidNumber => "a number DynamoDB cannot store",
            Self::NestingTooDeep => "extra is nested deeper than DynamoDB's 32 levels",
            Self::ItemTooLarge => "the item would exceed DynamoDB's 400 KB",
            Self::Conflict => "the same key holds another payload: the stored item is kept",
            Self::DuplicateUnverified => {
                "the key exists and the store returned no old item to compare"
            }
            Self::StoreRejected => "DynamoDB refused the item's own content",
            Self::Throttled => "still throttled after the invocation's retries",
            Self::StoreUnavailable => {
                "DynamoDB did not answer (5xx, timeout, connection) or refused the deployment"
            }
            Self::AccessDenied => "DynamoDB refused the function's role (a policy)",
            Self::TableNotFound => "the table does not exist (yet)",
            Self::Deadline => "not finished before the invocation's deadline",
            Self::Panic => "a bug in the function while processing the record",
            Self::GroupStopped => "an earlier record of its FIFO group failed",
            Self::MaxReceives => "SQS moved it after maxReceiveCount receives",
            Self::ReservedAction => {
                "an auditctl.* action sent to a queue other than the access queue"
            }
            Self::AccessEventInvalid => {
                "on the access queue, but not an access event of its attested sender"
            }
        }
    }

    /// The reason with this code, if any.
    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.code() == code)
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_names_one_reason() {
        for reason in Reason::ALL {
            assert_eq!(Reason::from_code(reason.code()), Some(reason));
        }
        let mut codes: Vec<_> = Reason::ALL.iter().map(|r| r.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Reason::ALL.len(), "a code is used twice");
        assert_eq!(Reason::from_code("something_new"), None);
    }

    #[test]
    fn access_refused_is_transient_and_a_rejected_write_permanent() {
        assert_eq!(Reason::AccessDenied.disposition(), Disposition::Transient);
        assert_eq!(Reason::StoreRejected.disposition(), Disposition::Permanent);
        assert!(Reason::GroupStopped.is_transient());
        assert!(!Reason::Conflict.is_transient());
    }

    #[test]
    fn a_refused_access_delivery_is_dead_lettered_at_once() {
        for (reason, code) in [
            (Reason::ReservedAction, "reserved_action"),
            (Reason::AccessEventInvalid, "access_event_invalid"),
        ] {
            assert_eq!(reason.code(), code);
            assert_eq!(Reason::from_code(code), Some(reason));
            assert_eq!(reason.disposition(), Disposition::Permanent);
        }
    }
}
