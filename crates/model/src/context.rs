//! Owns the `failureContext` of a dead-lettered message: why it is there and which original
//! delivery it was, kept across redrives. Must not know SQS clients, DynamoDB or batching.

use serde::{Deserialize, Serialize};

/// Message attribute holding the reason code (String).
pub const FAILURE_REASON: &str = "failureReason";
/// Message attribute holding the `FailureContext` as JSON (String).
pub const FAILURE_CONTEXT: &str = "failureContext";
/// The reason `auditctl dlq redrive` gives a message that SQS moved by itself after
/// `maxReceiveCount` receives (it carries no `failureContext`).
pub const MAX_RECEIVES: &str = crate::Reason::MaxReceives.code();

/// The `failureContext` attribute: why, and which original delivery. `sqs_message_id`,
/// `sent_timestamp` and `original_sender_id` are always the **original** delivery's, kept across
/// redrives, so that a redriven message is keyed and timed as it was the first time, and its item
/// still says who AWS said sent it first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureContext {
    pub reason: String,
    /// The error in words; never the body or the audit text.
    #[serde(default)]
    pub detail: String,
    pub sqs_message_id: String,
    /// Epoch milliseconds, as a string (as SQS writes `SentTimestamp`); absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_count: Option<u64>,
    /// Canonical time (`YYYY-MM-DDTHH:MM:SS.mmmZ`).
    #[serde(default)]
    pub failed_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_source_arn: Option<String>,
    /// The original delivery's SQS `SenderId` (attested by AWS): the function writes it when it
    /// dead-letters; a redriven record's item keeps it as `originalSenderId`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_sender_id: Option<String>,
    /// The failing delivery's own SQS `SenderId` (attested by AWS), which the function writes
    /// beside `originalSenderId` on every dead letter: who sent the message that failed, whatever
    /// context it carried. Not identity: a redrive does not carry it forward.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_id: Option<String>,
}

/// Who may carry a `failureContext` the function honours: the function's own role (a dead letter
/// it wrote, moved back by SQS) and the operator role `auditctl dlq redrive` runs as, each by its
/// role id (`RECEIVER_ROLE_ID`, `REDRIVE_ROLE_ID`; a `SenderId` is `<RoleId>:<session>` for a
/// role, a user's own id for a user). From anyone else the context's delivery facts (original
/// SQS id, `SentTimestamp`, `originalSenderId`) are not taken (docs/events.md "Delivery facts").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redrivers {
    ids: Vec<String>,
}

impl Redrivers {
    /// The principals (role ids, or a user's id) whose deliveries' contexts are honoured.
    pub fn new(ids: impl IntoIterator<Item = String>) -> Self {
        Self {
            ids: ids.into_iter().filter(|id| !id.is_empty()).collect(),
        }
    }

    /// Whether a delivery that AWS says `sender` sent may carry a context: its principal (the
    /// part before `:`) is one of them. No sender: no.
    pub fn vouch_for(&self, sender: Option<&str>) -> bool {
        sender.is_some_and(|sender| self.ids.iter().any(|id| is_principal(sender, id)))
    }
}

/// Whether `sender` (a `SenderId`: a user id, or `<RoleId>:<session>`) is the principal `id`.
pub fn is_principal(sender: &str, id: &str) -> bool {
    sender.split(':').next() == Some(id)
}

/// Longest `sqsMessageId` and `originalSenderId` a context may carry, in characters.
pub const MAX_CONTEXT_ID_CHARS: usize = 256;

/// Why a `failureContext` attribute was not used; the record is then its own original delivery.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MalformedContext {
    #[error("failureContext is not a JSON object of the expected fields: {0}")]
    NotJson(String),
    #[error("failureContext has no sqsMessageId")]
    NoMessageId,
    #[error("failureContext.sentTimestamp is not epoch milliseconds")]
    BadSentTimestamp,
    #[error(
        "failureContext has an sqsMessageId but no sentTimestamp: the original delivery's time is unknown"
    )]
    NoSentTimestamp,
}

impl FailureContext {
    /// Reads the attribute's text. Identity needs `sqsMessageId` (non-empty, at most 256
    /// characters) and `sentTimestamp`, epoch milliseconds (a string, or a number written by
    /// another tool): without the original time a body without `auditTime` would be keyed by
    /// the redrive's own time, a second item.
    pub fn parse(text: &str) -> Result<Self, MalformedContext> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Lenient {
            #[serde(default)]
            reason: Option<String>,
            #[serde(default)]
            detail: Option<String>,
            #[serde(default)]
            sqs_message_id: Option<String>,
            #[serde(default)]
            sent_timestamp: Option<serde_json::Value>,
            #[serde(default)]
            receive_count: Option<serde_json::Value>,
            #[serde(default)]
            failed_at: Option<String>,
            #[serde(default)]
            event_source_arn: Option<String>,
            #[serde(default)]
            original_sender_id: Option<serde_json::Value>,
            #[serde(default)]
            sender_id: Option<serde_json::Value>,
        }
        let raw: Lenient =
            serde_json::from_str(text).map_err(|e| MalformedContext::NotJson(e.to_string()))?;
        let sqs_message_id = raw
            .sqs_message_id
            .filter(|id| is_context_id(id))
            .ok_or(MalformedContext::NoMessageId)?;
        let sent_timestamp = match raw.sent_timestamp {
            None | Some(serde_json::Value::Null) => return Err(MalformedContext::NoSentTimestamp),
            Some(serde_json::Value::String(s)) if epoch_millis(&s).is_some() => Some(s),
            Some(serde_json::Value::Number(n)) if epoch_millis(&n.to_string()).is_some() => {
                Some(n.to_string())
            }
            Some(_) => return Err(MalformedContext::BadSentTimestamp),
        };
        let receive_count = raw.receive_count.and_then(|v| match v {
            serde_json::Value::Number(n) => n.as_u64(),
            serde_json::Value::String(s) => s.trim().parse().ok(),
            _ => None,
        });
        Ok(Self {
            reason: raw.reason.unwrap_or_default(),
            detail: raw.detail.unwrap_or_default(),
            sqs_message_id,
            sent_timestamp,
            receive_count,
            failed_at: raw.failed_at.unwrap_or_default(),
            event_source_arn: raw.event_source_arn,
            // Optional: anything but a non-empty string of at most 256 characters is left out,
            // never a reason to drop the identity the rest of the context carries.
            original_sender_id: context_id(raw.original_sender_id),
            sender_id: context_id(raw.sender_id),
        })
    }

    /// The attribute's text.
    pub fn to_json(&self) -> String {
        // A struct of strings and integers always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// An optional id: anything but a non-empty string of at most 256 characters is left out.
fn context_id(value: Option<serde_json::Value>) -> Option<String> {
    match value {
        Some(serde_json::Value::String(id)) if is_context_id(&id) => Some(id),
        _ => None,
    }
}

/// A non-empty id of at most `MAX_CONTEXT_ID_CHARS` characters.
fn is_context_id(id: &str) -> bool {
    !id.is_empty() && id.chars().count() <= MAX_CONTEXT_ID_CHARS
}

/// Epoch milliseconds within chrono's range, as `SentTimestamp` holds them.
fn epoch_millis(text: &str) -> Option<i64> {
    let millis = text.trim().parse::<i64>().ok()?;
    chrono::DateTime::from_timestamp_millis(millis).map(|_| millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_round_trips_with_the_spec_field_names() {
        let context = FailureContext {
            reason: "conflict".into(),
            detail: "an item with this key and another payload exists".into(),
            sqs_message_id: "0f1e".into(),
            sent_timestamp: Some("1795348800000".into()),
            receive_count: Some(1),
            failed_at: "2026-11-22T12:00:00.000Z".into(),
            event_source_arn: Some("arn:aws:sqs:us-east-1:123456789012:AuditQueue".into()),
            original_sender_id: Some("AROAEXAMPLE:orders-service".into()),
            sender_id: Some("AROAOPERATOR:bob".into()),
        };
        let json: serde_json::Value = serde_json::from_str(&context.to_json()).unwrap();
        for field in [
            "reason",
            "detail",
            "sqsMessageId",
            "sentTimestamp",
            "receiveCount",
            "failedAt",
            "eventSourceArn",
            "originalSenderId",
            "senderId",
        ] {
            assert!(json.get(field).is_some(), "{field} missing in {json}");
        }
        assert_eq!(json["sentTimestamp"], "1795348800000");
        assert_eq!(json["originalSenderId"], "AROAEXAMPLE:orders-service");
        assert_eq!(FailureContext::parse(&context.to_json()), Ok(context));
    }

    #[test]
    fn a_context_without_an_original_sender_leaves_the_field_out() {
        let text = r#"{"sqsMessageId":"m","sentTimestamp":"1795348800000"}"#;
        let context = FailureContext::parse(text).unwrap();
        assert_eq!(context.original_sender_id, None);
        assert!(!context.to_json().contains("originalSenderId"));
    }

    #[test]
    fn an_unusable_original_sender_is_ignored_and_the_identity_kept() {
        let long = format!(r#""{}""#, "A".repeat(257));
        for value in ["42", "null", r#""""#, "{}", r#"["AIDA"]"#, long.as_str()] {
            let text = format!(
                r#"{{"sqsMessageId":"m","sentTimestamp":"1795348800000","originalSenderId":{value}}}"#
            );
            let context = FailureContext::parse(&text).unwrap_or_else(|e| panic!("{value}: {e}"));
            assert_eq!(context.original_sender_id, None, "{value}");
            assert_eq!(context.sqs_message_id, "m", "{value}");
        }
        let longest = "é".repeat(256);
        let text = format!(
            r#"{{"sqsMessageId":"m","sentTimestamp":"1795348800000","originalSenderId":"{longest}"}}"#
        );
        assert_eq!(
            FailureContext::parse(&text).unwrap().original_sender_id,
            Some(longest),
            "256 characters, counted as characters"
        );
    }

    #[test]
    fn malformed_contexts_are_told_apart() {
        assert!(matches!(
            FailureContext::parse("not json"),
            Err(MalformedContext::NotJson(_))
        ));
        assert!(matches!(
            FailureContext::parse("[1,2]"),
            Err(MalformedContext::NotJson(_))
        ));
        assert_eq!(
            FailureContext::parse(r#"{"reason":"throttled"}"#),
            Err(MalformedContext::NoMessageId)
        );
        assert_eq!(
            FailureContext::parse(r#"{"sqsMessageId":""}"#),
            Err(MalformedContext::NoMessageId)
        );
        assert_eq!(
            FailureContext::parse(r#"{"sqsMessageId":"m","sentTimestamp":"yesterday"}"#),
            Err(MalformedContext::BadSentTimestamp)
        );
        assert_eq!(
            FailureContext::parse(r#"{"sqsMessageId":"m","sentTimestamp":"99999999999999999999"}"#),
            Err(MalformedContext::BadSentTimestamp)
        );
        // A number written by another tool is read as the same epoch milliseconds.
        let context =
            FailureContext::parse(r#"{"sqsMessageId":"m","sentTimestamp":1795348800000}"#).unwrap();
        assert_eq!(context.sent_timestamp.as_deref(), Some("1795348800000"));
        // An identity without its time is no identity: a body without auditTime would take the
        // redrive's own time and make a second item.
        for text in [
            r#"{"sqsMessageId":"m"}"#,
            r#"{"sqsMessageId":"m","sentTimestamp":null}"#,
        ] {
            assert_eq!(
                FailureContext::parse(text),
                Err(MalformedContext::NoSentTimestamp),
                "{text}"
            );
        }
    }

    #[test]
    fn only_the_named_principals_vouch_for_a_context() {
        let redrivers = Redrivers::new(["AROARECEIVER".to_owned(), "AROAOPERATOR".to_owned()]);
        assert!(redrivers.vouch_for(Some("AROARECEIVER:audit-receiver")));
        assert!(redrivers.vouch_for(Some("AROAOPERATOR:bob")));
        for other in [
            Some("AROAPRODUCER:orders"),
            Some("AROARECEIVERX:audit-receiver"),
            Some("AIDAOPERATOR"),
            Some(""),
            None,
        ] {
            assert!(!redrivers.vouch_for(other), "{other:?}");
        }
        assert!(!Redrivers::new([String::new()]).vouch_for(Some("")));
        assert!(!Redrivers::default().vouch_for(Some("AROARECEIVER:audit-receiver")));
        // A user is named by its own id.
        assert!(Redrivers::new(["AIDAUSER".to_owned()]).vouch_for(Some("AIDAUSER")));
    }
}
