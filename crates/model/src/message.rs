//! Owns the audit message: body -> `AuditMessage` (the field rules of docs/events.md), with its
//! time (`time`), numbers (`number`) and the `AuditItem` that gets stored (`item`) in modules of
//! their own. Must not know DynamoDB, batching or the Lambda runtime; which envelope a body came
//! in is `envelope`'s.

use chrono::{DateTime, Utc};
use std::net::IpAddr;

use serde_json::{Map, Value};

use crate::Reason;

pub mod envelope;
mod item;
mod number;
mod time;

pub use item::{AUDIT_BUCKET_SHARDS, AuditItem, Delivery, audit_bucket, bucket_shard, fnv1a_32};
pub use number::{Decimal, NumberError, check_number};
pub use time::{canonical_time, parse_audit_time, parse_sent_timestamp};

use envelope::Draft;
use number::check_numbers;

/// Longest producer `messageId`, in characters.
pub const MAX_MESSAGE_ID_CHARS: usize = 256;

/// Longest `actor` and `resource`, in characters.
pub const MAX_ACTOR_CHARS: usize = 1024;
pub const MAX_RESOURCE_CHARS: usize = 1024;
/// Longest `action`, in characters.
pub const MAX_ACTION_CHARS: usize = 256;

/// DynamoDB's nesting limit, in levels: a top-level attribute (the item's `extra` map) is level 1,
/// each object or array puts its members one level deeper, and nothing may sit below level 32.
/// Measured against DynamoDB: an attribute of 31 nested maps around a string is stored, of 32 is
/// refused ("Nesting Levels have exceeded supported limits"). So a body field's value may be at
/// most 30 objects or arrays deep.
pub const MAX_NESTING_LEVELS: usize = 32;

/// A body that passed every rule of the contract.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditMessage {
    /// Producer-assigned idempotency key, when the body carries one.
    pub producer_message_id: Option<String>,
    /// From the body's `auditTime`, else the SQS `SentTimestamp`.
    pub audit_time: DateTime<Utc>,
    /// Free text; optional when `action` says what happened.
    pub audit_text: Option<String>,
    /// Who did what, to what, with what result, from where.
    pub fields: EventFields,
    /// The body's other fields, as sent.
    pub extra: Map<String, Value>,
}

/// PCI DSS 10.2.2's structured fields, each only when the event carries it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventFields {
    pub actor: Option<String>,
    pub action: Option<String>,
    pub resource: Option<String>,
    pub outcome: Option<EventOutcome>,
    /// Stored in its canonical text form (RFC 5952 for IPv6).
    pub source_ip: Option<IpAddr>,
}

/// The result of the audited action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventOutcome {
    Success,
    Failure,
    Unknown,
}

impl EventOutcome {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failure => "failure",
            Self::Unknown => "unknown",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Success, Self::Failure, Self::Unknown]
            .into_iter()
            .find(|o| o.as_str() == text)
    }
}

/// Why a body is not an audit message. Each variant has a stable `code()` for logs and metrics;
/// the text never contains the body, the audit text or a field's value (personal data).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidMessage {
    #[error("the record has no body")]
    MissingBody,
    #[error("the body is not JSON: {0}")]
    InvalidJson(String),
    #[error("the body is a JSON {0}, not an object")]
    NotAnObject(&'static str),
    #[error("the body has neither auditText nor action")]
    MissingAuditText,
    #[error("auditText is empty")]
    EmptyAuditText,
    #[error("{field} must be {expected}, found {found}")]
    WrongType {
        field: &'static str,
        expected: &'static str,
        found: &'static str,
    },
    #[error("{field} must be {rule}")]
    InvalidValue {
        field: &'static str,
        rule: &'static str,
    },
    #[error("not a valid {envelope} event: {problem}")]
    InvalidEnvelope {
        envelope: &'static str,
        problem: &'static str,
    },
    #[error("auditTime has no UTC offset (add Z or ±hh:mm)")]
    AuditTimeWithoutOffset,
    #[error("auditTime is not an RFC 3339 time: {0}")]
    InvalidAuditTime(String),
    #[error("the body has no auditTime and the record has no valid SentTimestamp")]
    MissingAuditTime,
    #[error("messageId must be 1 to {MAX_MESSAGE_ID_CHARS} characters, found {0}")]
    InvalidMessageId(usize),
    #[error(
        "the body has a messageId but no auditTime: the item key is (messageId, auditTime), so a re-send would make a second item"
    )]
    MessageIdWithoutAuditTime,
    #[error("{0}")]
    InvalidNumber(NumberError),
    #[error(
        "extra nests deeper than DynamoDB's {MAX_NESTING_LEVELS} levels: a field's value may be at most 30 objects or arrays deep"
    )]
    NestingTooDeep,
}

impl InvalidMessage {
    /// The reason code of this rule.
    pub fn reason(&self) -> Reason {
        match self {
            Self::MissingBody => Reason::MissingBody,
            Self::InvalidJson(_) => Reason::InvalidJson,
            Self::NotAnObject(_) => Reason::NotAnObject,
            Self::MissingAuditText => Reason::MissingAuditText,
            Self::EmptyAuditText => Reason::EmptyAuditText,
            Self::WrongType { .. } => Reason::InvalidFieldType,
            Self::InvalidValue { .. } => Reason::InvalidFieldValue,
            Self::InvalidEnvelope { .. } => Reason::InvalidEnvelope,
            Self::AuditTimeWithoutOffset => Reason::AuditTimeWithoutOffset,
            Self::InvalidAuditTime(_) => Reason::InvalidAuditTime,
            Self::MissingAuditTime => Reason::MissingAuditTime,
            Self::InvalidMessageId(_) => Reason::InvalidMessageId,
            Self::MessageIdWithoutAuditTime => Reason::MessageIdWithoutAuditTime,
            Self::InvalidNumber(_) => Reason::InvalidNumber,
            Self::NestingTooDeep => Reason::NestingTooDeep,
        }
    }

    pub fn code(&self) -> &'static str {
        self.reason().code()
    }
}

impl AuditMessage {
    /// Parses and validates a record body: a native body, a CloudEvent or an EventBridge event
    /// (`envelope`). `sent_at` is the record's `SentTimestamp`, used when the event has no time.
    pub fn parse(
        body: Option<&str>,
        sent_at: Option<DateTime<Utc>>,
    ) -> Result<Self, InvalidMessage> {
        let body = body.ok_or(InvalidMessage::MissingBody)?;
        let value: Value =
            serde_json::from_str(body).map_err(|e| InvalidMessage::InvalidJson(e.to_string()))?;
        let object = match value {
            Value::Object(map) => map,
            other => return Err(InvalidMessage::NotAnObject(json_kind(&other))),
        };
        Self::from_draft(Draft::of(object)?, sent_at)
    }

    /// Applies the field rules to the fields a body or an envelope mapped.
    fn from_draft(draft: Draft, sent_at: Option<DateTime<Utc>>) -> Result<Self, InvalidMessage> {
        let action = bounded(draft.action, "action", MAX_ACTION_CHARS)?;
        let audit_text = match draft.audit_text {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) if text.is_empty() => {
                return Err(InvalidMessage::EmptyAuditText);
            }
            Some(Value::String(text)) => Some(text),
            Some(other) => return Err(wrong_type("auditText", "a string", &other)),
        };
        if audit_text.is_none() && action.is_none() {
            return Err(InvalidMessage::MissingAuditText);
        }

        let (audit_time, time_in_body) = match draft.audit_time {
            None | Some(Value::Null) => (sent_at.ok_or(InvalidMessage::MissingAuditTime)?, false),
            Some(Value::String(time)) => (parse_audit_time(&time)?, true),
            Some(other) => return Err(wrong_type("auditTime", "an RFC 3339 string", &other)),
        };

        let producer_message_id = match draft.message_id {
            None | Some(Value::Null) => None,
            Some(Value::String(id)) => {
                let chars = id.chars().count();
                if !(1..=MAX_MESSAGE_ID_CHARS).contains(&chars) {
                    return Err(InvalidMessage::InvalidMessageId(chars));
                }
                Some(id)
            }
            Some(other) => return Err(wrong_type("messageId", "a string", &other)),
        };
        if producer_message_id.is_some() && !time_in_body {
            return Err(InvalidMessage::MessageIdWithoutAuditTime);
        }

        let fields = EventFields {
            actor: bounded(
                draft.actor,
                draft.actor_label.unwrap_or("actor"),
                MAX_ACTOR_CHARS,
            )?,
            action,
            resource: bounded(draft.resource, "resource", MAX_RESOURCE_CHARS)?,
            outcome: match draft.outcome {
                None | Some(Value::Null) => None,
                Some(Value::String(text)) => Some(EventOutcome::parse(&text).ok_or(
                    InvalidMessage::InvalidValue {
                        field: "outcome",
                        rule: "\"success\", \"failure\" or \"unknown\"",
                    },
                )?),
                Some(other) => return Err(wrong_type("outcome", "a string", &other)),
            },
            source_ip: match draft.source_ip {
                None | Some(Value::Null) => None,
                Some(Value::String(text)) => {
                    Some(parse_ip(&text).ok_or(InvalidMessage::InvalidValue {
                        field: "sourceIp",
                        rule: "an IPv4 or IPv6 address",
                    })?)
                }
                Some(other) => return Err(wrong_type("sourceIp", "a string", &other)),
            },
        };
        // The extra map is level 1, so its fields' values are level 2.
        if !draft.extra.values().all(|value| nests_within(value, 2)) {
            return Err(InvalidMessage::NestingTooDeep);
        }
        for value in draft.extra.values() {
            check_numbers(value).map_err(InvalidMessage::InvalidNumber)?;
        }

        Ok(Self {
            producer_message_id,
            audit_time,
            audit_text,
            fields,
            extra: draft.extra,
        })
    }
}

/// A string field of 1 to `max` characters, when present (`null` counts as absent).
fn bounded(
    value: Option<Value>,
    field: &'static str,
    max: usize,
) -> Result<Option<String>, InvalidMessage> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if (1..=max).contains(&text.chars().count()) => Ok(Some(text)),
        Some(Value::String(_)) => Err(InvalidMessage::InvalidValue {
            field,
            rule: match field {
                "action" => "1 to 256 characters",
                _ => "1 to 1024 characters",
            },
        }),
        Some(other) => Err(wrong_type(field, "a string", &other)),
    }
}

/// An IPv4 or IPv6 address in any text form `std::net` reads (no zone id, no port, no leading
/// zeros in IPv4); `to_string` gives the canonical form (RFC 5952 for IPv6).
pub fn parse_ip(text: &str) -> Option<IpAddr> {
    text.parse().ok()
}

/// `value`, at `level`, and everything in it sit within DynamoDB's `MAX_NESTING_LEVELS`. The
/// recursion is bounded: serde_json refuses to read JSON nested over 128 levels.
fn nests_within(value: &Value, level: usize) -> bool {
    level <= MAX_NESTING_LEVELS
        && match value {
            Value::Array(values) => values.iter().all(|v| nests_within(v, level + 1)),
            Value::Object(map) => map.values().all(|v| nests_within(v, level + 1)),
            _ => true,
        }
}

fn wrong_type(field: &'static str, expected: &'static str, found: &Value) -> InvalidMessage {
    InvalidMessage::WrongType {
        field,
        expected,
        found: json_kind(found),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent() -> Option<DateTime<Utc>> {
        parse_sent_timestamp(Some("1795348800123")) // 2026-11-22T12:00:00.123Z
    }

    fn parse(body: &str) -> Result<AuditMessage, InvalidMessage> {
        AuditMessage::parse(Some(body), sent())
    }

    fn canonical(body: &str) -> String {
        canonical_time(parse(body).expect("valid body").audit_time)
    }

    #[test]
    fn offset_times_are_stored_in_utc() {
        assert_eq!(
            canonical(r#"{"auditText":"x","auditTime":"2026-11-22T12:00:00+02:00"}"#),
            "2026-11-22T10:00:00.000Z"
        );
        assert_eq!(
            canonical(r#"{"auditText":"x","auditTime":"2026-11-22T23:30:00-05:30"}"#),
            "2026-11-23T05:00:00.000Z"
        );
        assert_eq!(
            canonical(r#"{"auditText":"x","auditTime":"2026-11-22T10:00:00Z"}"#),
            "2026-11-22T10:00:00.000Z"
        );
    }

    #[test]
    fn fractional_precision_is_truncated_to_milliseconds() {
        for (sent, stored) in [
            ("2026-11-22T10:00:00.9Z", "2026-11-22T10:00:00.900Z"),
            ("2026-11-22T10:00:00.12Z", "2026-11-22T10:00:00.120Z"),
            ("2026-11-22T10:00:00.1239Z", "2026-11-22T10:00:00.123Z"),
            ("2026-11-22T10:00:00.999999999Z", "2026-11-22T10:00:00.999Z"),
            (
                "2026-11-22T10:00:00.123456789123+01:00",
                "2026-11-22T09:00:00.123Z",
            ),
        ] {
            let body = format!(r#"{{"auditText":"x","auditTime":"{sent}"}}"#);
            assert_eq!(canonical(&body), stored, "for {sent}");
        }
    }

    #[test]
    fn canonical_strings_sort_in_time_order() {
        let times = [
            "2026-11-22T09:59:59.999+00:00",
            "2026-11-22T12:00:00.000+02:00",
            "2026-11-22T10:00:00.001Z",
        ];
        let canon: Vec<String> = times
            .iter()
            .map(|t| canonical_time(parse_audit_time(t).unwrap()))
            .collect();
        let mut sorted = canon.clone();
        sorted.sort();
        assert_eq!(canon, sorted);
    }

    #[test]
    fn missing_or_null_time_uses_sent_timestamp() {
        assert_eq!(
            canonical(r#"{"auditText":"x"}"#),
            "2026-11-22T12:00:00.123Z"
        );
        assert_eq!(
            canonical(r#"{"auditText":"x","auditTime":null}"#),
            "2026-11-22T12:00:00.123Z"
        );
    }

    #[test]
    fn missing_time_without_sent_timestamp_is_invalid() {
        assert_eq!(
            AuditMessage::parse(Some(r#"{"auditText":"x"}"#), None),
            Err(InvalidMessage::MissingAuditTime)
        );
        assert_eq!(parse_sent_timestamp(Some("not-a-number")), None);
    }

    #[test]
    fn producer_message_id_and_extra_fields_are_kept() {
        let message = parse(
            r#"{"auditText":"login","messageId":"order-7","auditTime":"2026-11-22T10:00:00Z","user":{"id":42},"amount":12.50,"big":123456789012345678901234567890}"#,
        )
        .unwrap();
        assert_eq!(message.producer_message_id.as_deref(), Some("order-7"));
        assert_eq!(message.audit_text.as_deref(), Some("login"));
        let keys: Vec<&str> = message.extra.keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 3);
        assert!(keys.contains(&"user") && keys.contains(&"amount") && keys.contains(&"big"));
        // Exact digits survive (no f64 rounding).
        assert_eq!(
            message.extra["big"].to_string(),
            "123456789012345678901234567890"
        );
        assert_eq!(message.extra["amount"].to_string(), "12.50");
    }

    #[test]
    fn every_invalid_body_has_its_own_reason() {
        let cases: &[(Option<&str>, &str)] = &[
            (None, "missing_body"),
            (Some("not json"), "invalid_json"),
            (Some(""), "invalid_json"),
            (Some(r#"{"auditText":"x""#), "invalid_json"),
            (Some(r#"["auditText"]"#), "not_an_object"),
            (Some(r#""just a string""#), "not_an_object"),
            (Some("null"), "not_an_object"),
            (
                Some(r#"{"auditTime":"2026-11-22T10:00:00Z"}"#),
                "missing_audit_text",
            ),
            (Some(r#"{"auditText":null}"#), "missing_audit_text"),
            (Some(r#"{"auditText":""}"#), "empty_audit_text"),
            (Some(r#"{"auditText":42}"#), "invalid_field_type"),
            (
                Some(r#"{"auditText":"x","auditTime":1795348800}"#),
                "invalid_field_type",
            ),
            (
                Some(r#"{"auditText":"x","messageId":7}"#),
                "invalid_field_type",
            ),
            (
                Some(r#"{"auditText":"x","auditTime":"2026-11-22T10:00:00"}"#),
                "audit_time_without_offset",
            ),
            (
                Some(r#"{"auditText":"x","auditTime":"2026-11-22 10:00:00.5"}"#),
                "audit_time_without_offset",
            ),
            (
                Some(r#"{"auditText":"x","auditTime":"yesterday"}"#),
                "invalid_audit_time",
            ),
            (
                Some(r#"{"auditText":"x","auditTime":"2026-13-01T10:00:00Z"}"#),
                "invalid_audit_time",
            ),
            (
                Some(r#"{"auditText":"x","auditTime":"2026-11-22"}"#),
                "invalid_audit_time",
            ),
            (
                Some(r#"{"auditText":"x","messageId":"","auditTime":"2026-11-22T10:00:00Z"}"#),
                "invalid_message_id",
            ),
            (
                Some(r#"{"auditText":"x","messageId":"p-1"}"#),
                "message_id_without_audit_time",
            ),
            (
                Some(r#"{"auditText":"x","messageId":"p-1","auditTime":null}"#),
                "message_id_without_audit_time",
            ),
            (
                Some(r#"{"auditText":"x","n":123456789012345678901234567890123456789}"#),
                "invalid_number",
            ),
            (Some(r#"{"auditText":"x","n":1e126}"#), "invalid_number"),
            (Some(r#"{"auditText":"x","n":-1e126}"#), "invalid_number"),
            (Some(r#"{"auditText":"x","n":1e-131}"#), "invalid_number"),
            (
                Some(r#"{"auditText":"x","deep":[{"n":1e99999999999999999999}]}"#),
                "invalid_number",
            ),
            (
                Some(r#"{"auditText":"x","n":9e9223372036854775807}"#),
                "invalid_number",
            ),
        ];
        for (body, code) in cases {
            let error = AuditMessage::parse(*body, sent()).expect_err("invalid body");
            assert_eq!(error.code(), *code, "body {body:?}: {error}");
        }
    }

    #[test]
    fn fnv1a_matches_the_published_test_vectors() {
        // From the FNV reference test suite (32-bit FNV-1a).
        assert_eq!(fnv1a_32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a_32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a_32(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn audit_bucket_is_the_utc_day_and_the_shard_of_the_message_id() {
        // 0xbf9cf968 = 3214735720; 3214735720 % 32 = 8.
        assert_eq!(
            audit_bucket("foobar", "2026-11-22T10:00:00.000Z"),
            "2026-11-22#08"
        );
        // 0xe40c292c % 32 = 12; an offset time is bucketed by its UTC day.
        let utc = canonical_time(parse_audit_time("2026-11-23T01:30:00+02:00").unwrap());
        assert_eq!(audit_bucket("a", &utc), "2026-11-22#12");
        for id in ["x", "order-7", "é", "a much longer producer id"] {
            let shard: u32 = bucket_shard(id).parse().unwrap();
            assert!(shard < AUDIT_BUCKET_SHARDS);
            assert_eq!(bucket_shard(id).len(), 2);
        }
    }

    #[test]
    fn numbers_dynamodb_can_store_are_kept() {
        for n in [
            "0",
            "-0.0",
            "1e125",
            "9.9999999999999999999999999999999999999e125",
            "1e-130",
            "-1e-130",
            "12345678901234567890123456789012345678",
            "1234567890123456789012345678901234567800000",
            "0.000000000000000000000000000000000000000000012345",
        ] {
            let body = format!(r#"{{"auditText":"x","n":{n}}}"#);
            let message = parse(&body).unwrap_or_else(|e| panic!("{n}: {e}"));
            assert_eq!(
                Decimal::parse(&message.extra["n"].to_string()),
                Decimal::parse(n),
                "value kept"
            );
        }
    }

    #[test]
    fn decimals_compare_by_value() {
        let d = |t: &str| Decimal::parse(t).unwrap();
        assert_eq!(d("1"), d("1.0"));
        assert_eq!(d("100"), d("1e2"));
        assert_eq!(d("0.5"), d("5E-1"));
        assert_eq!(d("-0"), d("0"));
        assert_ne!(d("1"), d("-1"));
        assert_ne!(d("0.1"), d("0.01"));
        assert_eq!(Decimal::parse("1e9223372036854775807"), None, "overflow");
        assert_eq!(Decimal::parse("abc"), None);
    }

    #[test]
    fn message_id_length_is_counted_in_characters() {
        let ok = format!(
            r#"{{"auditText":"x","messageId":"{}","auditTime":"2026-11-22T10:00:00Z"}}"#,
            "é".repeat(256)
        );
        assert!(parse(&ok).is_ok());
        let long = format!(
            r#"{{"auditText":"x","messageId":"{}","auditTime":"2026-11-22T10:00:00Z"}}"#,
            "a".repeat(257)
        );
        assert_eq!(parse(&long), Err(InvalidMessage::InvalidMessageId(257)));
    }

    #[test]
    fn error_text_never_contains_the_audit_text() {
        let error = parse(r#"{"auditText":"secret-person","auditTime":"soon"}"#).unwrap_err();
        assert!(!error.to_string().contains("secret-person"));
    }

    #[test]
    fn item_uses_producer_id_or_sqs_id_and_expires_from_audit_time() {
        let delivery = Delivery {
            sqs_message_id: "sqs-1".into(),
            original_message_id: "sqs-1".into(),
            sent_at: sent(),
            receive_count: Some(2),
            event_source: Some("arn:aws:sqs:us-east-1:000000000000:AuditQueue".into()),
            sender_id: Some("AROAEXAMPLE:orders-service".into()),
            original_sender_id: None,
        };
        let received = parse_audit_time("2026-11-22T12:00:01.5Z").unwrap();
        let item = AuditItem::new(
            parse(r#"{"auditText":"x"}"#).unwrap(),
            delivery.clone(),
            received,
            Some(1),
        );
        assert_eq!(item.message_id, "sqs-1");
        assert_eq!(
            item.sender_id.as_deref(),
            Some("AROAEXAMPLE:orders-service")
        );
        assert_eq!(item.original_sender_id, None);
        assert_eq!(item.sent_at.as_deref(), Some("2026-11-22T12:00:00.123Z"));
        assert_eq!(item.received_at, "2026-11-22T12:00:01.500Z");
        assert_eq!(item.expires_at, Some(1_795_348_800 + 86_400));

        let item = AuditItem::new(
            parse(r#"{"auditText":"x","messageId":"p-1","auditTime":"2026-11-22T10:00:00Z"}"#)
                .unwrap(),
            delivery,
            received,
            None,
        );
        assert_eq!(item.message_id, "p-1");
        assert_eq!(item.sqs_message_id, "sqs-1");
        assert_eq!(item.expires_at, None);
    }
}
