//! Owns the payload rule: when an item with the key exists, is the new one the same event (a
//! duplicate) or another (a conflict)? Must not know how a store represents items.

use serde_json::Value;

use crate::message::{AuditItem, Decimal};

/// The payload rule every store applies when an item with the key exists: the same `auditText`, the
/// same structured fields (`actor`, `action`, `resource`, `outcome`, `sourceIp`) and the same
/// `extra`, numbers compared by value (`1.0` equals `1`, as DynamoDB normalises them). Delivery
/// metadata (`sqsMessageId`, `senderId`, `receivedAt`, …) naturally differs. Before the fields left
/// `extra`, the payload was `auditText` and `extra` only (docs/events.md "The item"): a re-send
/// that changes who acted is another event, a conflict for a person to look at, never a silent
/// duplicate.
pub fn same_payload(stored: &AuditItem, new: &AuditItem) -> bool {
    stored.audit_text == new.audit_text
        && stored.fields == new.fields
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{AuditMessage, Delivery};

    fn item(body: &str, sqs_message_id: &str, sender_id: Option<&str>) -> AuditItem {
        let delivery = Delivery {
            sqs_message_id: sqs_message_id.into(),
            original_message_id: "first".into(),
            sent_at: chrono::DateTime::from_timestamp_millis(1_795_348_800_000),
            receive_count: Some(1),
            event_source: None,
            sender_id: sender_id.map(str::to_owned),
            original_sender_id: None,
        };
        let message = AuditMessage::parse(Some(body), delivery.sent_at).unwrap();
        AuditItem::new(message, delivery, chrono::Utc::now(), None)
    }

    #[test]
    fn a_resend_by_another_sender_is_the_same_event() {
        // Who sent a delivery is delivery metadata: a redrive is sent by whoever redrove it.
        let body = r#"{"auditText":"x","amount":1.0}"#;
        let first = item(body, "sqs-1", Some("AROAPRODUCER:orders"));
        let redriven = item(body, "sqs-2", Some("AIDAOPERATOR"));
        assert!(same_payload(&first, &redriven));
        assert!(same_payload(&first, &item(body, "sqs-3", None)));
        let other = item(
            r#"{"auditText":"x","amount":2}"#,
            "sqs-2",
            Some("AROAPRODUCER:orders"),
        );
        assert!(!same_payload(&first, &other));
    }
}
