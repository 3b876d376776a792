//! Owns the payload rule: when an item with the key exists, is the new one the same event (a
//! duplicate) or another (a conflict)? Must not know how a store represents items.

use serde_json::Value;

use crate::message::{AuditItem, Decimal};

/// The payload rule every store applies when an item with the key exists: the same `auditText`,
/// the same structured fields (`actor`, `action`, `resource`, `outcome`, `sourceIp`) and the
/// same `extra`, numbers compared by value (`1.0` equals `1`, as DynamoDB normalises them).
/// Delivery metadata (`sqsMessageId`, `receivedAt`, …) naturally differs. The SPEC names
/// `auditText` and `extra` only, from before the fields left `extra`: a re-send that changes who
/// acted is another event, a conflict for a person to look at, never a silent duplicate.
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
