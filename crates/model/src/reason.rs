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
