//! Owns the mapping between the model's `AuditItem` and DynamoDB's JSON: the `PutItem` request
//! (the item's attributes, the condition), the item's size, and a stored item read back. Must not
//! know HTTP, signing or batching.

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

use super::outcome::{PutOutcome, StoreError};
use audit_model::attest::ATTESTATION;
use audit_model::keys::{AUDIT_BUCKET, MAX_ITEM_BYTES, PARTITION_KEY, SORT_KEY};
use audit_model::line::plain_map;
use audit_model::line::written_json;
use audit_model::message::{AuditItem, Decimal, EventFields, EventOutcome, parse_ip};

const CONDITION: &str = "attribute_not_exists(#pk)";

/// The `PutItem` request: the item, written only if no item has its key, returning the stored
/// item when one has. Refuses an item over DynamoDB's size limit before any call.
pub fn put_item_body(table: &str, item: &AuditItem) -> Result<Vec<u8>, StoreError> {
    // Built once: the size and the body both need them.
    let lookup_keys: Vec<(&str, String)> = item.lookup_keys().collect();
    let size = checked(size_with(item, &lookup_keys))?;
    let request = PutItem {
        table,
        item,
        lookup_keys: &lookup_keys,
    };
    let mut body = Vec::with_capacity(256 + size);
    serde_json::to_writer(&mut body, &request)
        .map_err(|e| StoreError::Rejected(format!("the item could not be encoded: {e}")))?;
    Ok(body)
}

/// The item's size, or `ItemTooLarge` over DynamoDB's 400 KB limit (every store applies it).
pub fn check_size(item: &AuditItem) -> Result<usize, StoreError> {
    checked(item_size(item))
}

fn checked(size: usize) -> Result<usize, StoreError> {
    match size {
        size if size > MAX_ITEM_BYTES => Err(StoreError::ItemTooLarge(size)),
        size => Ok(size),
    }
}

struct PutItem<'a> {
    table: &'a str,
    item: &'a AuditItem,
    lookup_keys: &'a [(&'a str, String)],
}

impl Serialize for PutItem<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(5))?;
        map.serialize_entry("TableName", self.table)?;
        map.serialize_entry("Item", &Item(self.item, self.lookup_keys))?;
        map.serialize_entry("ConditionExpression", CONDITION)?;
        map.serialize_entry("ExpressionAttributeNames", &Tagged("#pk", PARTITION_KEY))?;
        map.serialize_entry("ReturnValuesOnConditionCheckFailure", "ALL_OLD")?;
        map.end()
    }
}

/// The item's attributes, in DynamoDB's JSON (`{"S": …}`, `{"N": …}`, `{"M": …}`, …).
struct Item<'a>(&'a AuditItem, &'a [(&'a str, String)]);

impl Serialize for Item<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let item = self.0;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry(PARTITION_KEY, &Tagged("S", &item.message_id))?;
        map.serialize_entry(SORT_KEY, &Tagged("S", &item.audit_time))?;
        map.serialize_entry(AUDIT_BUCKET, &Tagged("S", &item.audit_bucket))?;
        if let Some(text) = &item.audit_text {
            map.serialize_entry("auditText", &Tagged("S", text))?;
        }
        for (name, value) in item.field_attributes() {
            map.serialize_entry(name, &Tagged("S", value.as_ref()))?;
        }
        for (name, value) in self.1 {
            map.serialize_entry(name, &Tagged("S", value))?;
        }
        map.serialize_entry("sqsMessageId", &Tagged("S", &item.sqs_message_id))?;
        map.serialize_entry("receivedAt", &Tagged("S", &item.received_at))?;
        if let Some(sent_at) = &item.sent_at {
            map.serialize_entry("sentAt", &Tagged("S", sent_at))?;
        }
        if let Some(count) = item.receive_count {
            map.serialize_entry("receiveCount", &Tagged("N", &count.to_string()))?;
        }
        if let Some(source) = &item.event_source {
            map.serialize_entry("eventSource", &Tagged("S", source))?;
        }
        if let Some(sender) = &item.sender_id {
            map.serialize_entry("senderId", &Tagged("S", sender))?;
        }
        if let Some(sender) = &item.original_sender_id {
            map.serialize_entry("originalSenderId", &Tagged("S", sender))?;
        }
        if !item.extra.is_empty() {
            map.serialize_entry("extra", &Tagged("M", &Attributes(&item.extra)))?;
        }
        if let Some(expires_at) = item.expires_at {
            map.serialize_entry("expiresAt", &Tagged("N", &expires_at.to_string()))?;
        }
        if let Some(attestation) = &item.attestation {
            map.serialize_entry(ATTESTATION, &Tagged("S", attestation))?;
        }
        map.end()
    }
}

/// The item's line (`audit_model::line`): its attributes as plain JSON, in name order, as the
/// table gives it back and the archive stores it. What the receiver attests (its `attestation`
/// left out by `audit_model::attest::attested_bytes`).
pub fn item_line_map(item: &AuditItem) -> Map<String, Value> {
    let lookup_keys: Vec<(&str, String)> = item.lookup_keys().collect();
    match serde_json::to_value(Item(item, &lookup_keys)) {
        Ok(Value::Object(attributes)) => plain_map(&attributes),
        // A map of strings, numbers and JSON always serialises to an object.
        _ => Map::new(),
    }
}

/// `{"<tag>": value}`: one DynamoDB attribute value.
struct Tagged<'a, T: ?Sized>(&'a str, &'a T);

impl<T: Serialize + ?Sized> Serialize for Tagged<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(self.0, self.1)?;
        map.end()
    }
}

/// A JSON object's fields as a DynamoDB map's entries.
struct Attributes<'a>(&'a Map<String, Value>);

impl Serialize for Attributes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in self.0 {
            map.serialize_entry(name, &Attribute(value))?;
        }
        map.end()
    }
}

/// JSON -> DynamoDB types. Written by hand rather than with serde_dynamo because numbers must
/// keep the producer's exact digits (serde_json's arbitrary_precision text), where serde_dynamo
/// would round anything beyond i64/u64 through f64.
struct Attribute<'a>(&'a Value);

impl Serialize for Attribute<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Null => Tagged("NULL", &true).serialize(serializer),
            Value::Bool(b) => Tagged("BOOL", b).serialize(serializer),
            Value::Number(n) => Tagged("N", &n.to_string()).serialize(serializer),
            Value::String(s) => Tagged("S", s).serialize(serializer),
            Value::Array(values) => Tagged("L", &List(values)).serialize(serializer),
            Value::Object(map) => Tagged("M", &Attributes(map)).serialize(serializer),
        }
    }
}

struct List<'a>(&'a [Value]);

impl Serialize for List<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for value in self.0 {
            seq.serialize_element(&Attribute(value))?;
        }
        seq.end()
    }
}

/// What a write that found `old` under the key did (`old`: the stored item in DynamoDB's JSON, as
/// `ALL_OLD` returns it): read back as the model's item, the same payload by the model's rule
/// (`PutOutcome::existing`) is a duplicate; another payload, or one the function could not have
/// written, a conflict.
pub fn found(old: &Map<String, Value>, new: &AuditItem) -> PutOutcome {
    read_item(old).map_or(PutOutcome::Conflict, |stored| {
        PutOutcome::existing(&stored, new)
    })
}

/// A stored attribute that is not what the function writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the stored {0} is not what audit-receiver writes")]
pub struct Unreadable(pub &'static str);

/// A stored item (DynamoDB's JSON) read back as the model's item. The payload as the function
/// writes it: `auditText` and the structured fields from their `S` (an attribute of another type
/// is not one of them), `outcome` one of its words and `sourceIp` an address in its canonical
/// text; `extra`, when it is an attribute, a non-empty `M` of the types the function writes
/// (`written_json`); otherwise `Unreadable`. The delivery metadata, which the payload rule does not
/// look at, is taken where present (empty where not).
pub fn read_item(old: &Map<String, Value>) -> Result<AuditItem, Unreadable> {
    let typed = |name: &str, tag: &str| {
        old.get(name)
            .and_then(|value| value.get(tag))
            .and_then(Value::as_str)
    };
    let string = |name: &str| typed(name, "S").map(str::to_owned);
    let outcome = match typed("outcome", "S") {
        Some(text) => Some(EventOutcome::parse(text).ok_or(Unreadable("outcome"))?),
        None => None,
    };
    let source_ip = match typed("sourceIp", "S") {
        Some(text) => Some(
            parse_ip(text)
                .filter(|ip| ip.to_string() == text)
                .ok_or(Unreadable("sourceIp"))?,
        ),
        None => None,
    };
    // The function writes `extra` only when it has fields.
    let extra = match old.get("extra").map(|extra| (tagged(extra), extra)) {
        None | Some((None, _)) => Map::new(),
        Some((Some(("M", _)), extra)) => match written_json(extra) {
            Some(Value::Object(map)) if !map.is_empty() => map,
            _ => return Err(Unreadable("extra")),
        },
        Some((Some(_), _)) => return Err(Unreadable("extra")),
    };
    Ok(AuditItem {
        message_id: string(PARTITION_KEY).unwrap_or_default(),
        audit_time: string(SORT_KEY).unwrap_or_default(),
        audit_bucket: string(AUDIT_BUCKET).unwrap_or_default(),
        audit_text: string("auditText"),
        fields: EventFields {
            actor: string("actor"),
            action: string("action"),
            resource: string("resource"),
            outcome,
            source_ip,
        },
        sqs_message_id: string("sqsMessageId").unwrap_or_default(),
        sent_at: string("sentAt"),
        receive_count: typed("receiveCount", "N").and_then(|n| n.parse().ok()),
        event_source: string("eventSource"),
        sender_id: string("senderId"),
        original_sender_id: string("originalSenderId"),
        received_at: string("receivedAt").unwrap_or_default(),
        extra,
        expires_at: typed("expiresAt", "N").and_then(|n| n.parse().ok()),
        attestation: string(ATTESTATION),
    })
}

/// A DynamoDB attribute value's one tag and its content (`{"S": "x"}` -> `("S", "x")`).
fn tagged(attribute: &Value) -> Option<(&str, &Value)> {
    let attribute = attribute.as_object().filter(|a| a.len() == 1)?;
    attribute
        .iter()
        .next()
        .map(|(tag, inner)| (tag.as_str(), inner))
}

/// DynamoDB's item size: attribute names plus values, by the rules AWS documents (strings by
/// UTF-8 length, numbers about one byte per two significant digits plus one, 3 bytes of overhead
/// and 1 per element for lists and maps). Hand-written: no crate computes it.
pub fn item_size(item: &AuditItem) -> usize {
    let lookup_keys: Vec<(&str, String)> = item.lookup_keys().collect();
    size_with(item, &lookup_keys)
}

/// `item_size` with the item's lookup keys already built.
fn size_with(item: &AuditItem, lookup_keys: &[(&str, String)]) -> usize {
    let strings = [
        (PARTITION_KEY, Some(&item.message_id)),
        (SORT_KEY, Some(&item.audit_time)),
        (AUDIT_BUCKET, Some(&item.audit_bucket)),
        ("auditText", item.audit_text.as_ref()),
        ("sqsMessageId", Some(&item.sqs_message_id)),
        ("receivedAt", Some(&item.received_at)),
        ("sentAt", item.sent_at.as_ref()),
        ("eventSource", item.event_source.as_ref()),
        ("senderId", item.sender_id.as_ref()),
        ("originalSenderId", item.original_sender_id.as_ref()),
        (ATTESTATION, item.attestation.as_ref()),
    ];
    let numbers = [
        ("receiveCount", item.receive_count.map(|n| n.to_string())),
        ("expiresAt", item.expires_at.map(|n| n.to_string())),
    ];
    let extra = (!item.extra.is_empty()).then(|| "extra".len() + map_size(&item.extra));
    let fields = item
        .field_attributes()
        .map(|(name, value)| name.len() + value.len())
        .chain(
            lookup_keys
                .iter()
                .map(|(name, value)| name.len() + value.len()),
        )
        .sum::<usize>();
    strings
        .iter()
        .filter_map(|(name, value)| value.map(|v| name.len() + v.len()))
        .chain([fields])
        .chain(
            numbers
                .iter()
                .filter_map(|(name, value)| value.as_ref().map(|v| name.len() + number_size(v))),
        )
        .chain(extra)
        .sum()
}

fn map_size(map: &Map<String, Value>) -> usize {
    3 + map
        .iter()
        .map(|(k, v)| 1 + k.len() + value_size(v))
        .sum::<usize>()
}

fn value_size(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Number(n) => number_size(&n.to_string()),
        Value::Bool(_) | Value::Null => 1,
        Value::Array(values) => 3 + values.iter().map(|v| 1 + value_size(v)).sum::<usize>(),
        Value::Object(map) => map_size(map),
    }
}

fn number_size(text: &str) -> usize {
    let digits = Decimal::parse(text).map_or(text.len(), |d| d.digits.len());
    digits.div_ceil(2) + 1
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use audit_model::message::{AuditMessage, Delivery, parse_audit_time};

    pub(crate) fn item(body: &str) -> AuditItem {
        let message = AuditMessage::parse(Some(body), None).unwrap();
        let delivery = Delivery {
            sqs_message_id: "sqs-1".into(),
            original_message_id: "sqs-1".into(),
            sent_at: Some(parse_audit_time("2026-11-22T10:00:00Z").unwrap()),
            receive_count: Some(1),
            event_source: Some("arn:aws:sqs:us-east-1:000000000000:AuditQueue".into()),
            sender_id: Some("AROAEXAMPLE:orders-service".into()),
            original_sender_id: None,
        };
        AuditItem::new(
            message,
            delivery,
            parse_audit_time("2026-11-22T10:00:01Z").unwrap(),
            Some(30),
        )
    }

    #[test]
    fn the_attested_bytes_written_from_the_item_are_those_of_its_line() {
        use audit_model::attest::{attested_bytes, item_attested_bytes};
        for body in [
            r#"{"auditText":"t","auditTime":"2026-11-22T10:00:00Z"}"#,
            r#"{"auditTime":"2026-11-22T10:00:00Z","auditText":"é \"quoted\" \u0001 line\nbreak","actor":"alice","action":"user.login","resource":"r/1","outcome":"success","sourceIp":"2001:db8::1"}"#,
            r#"{"auditText":"t","auditTime":"2026-11-22T10:00:00Z","amount":12.50,"big":1E+2,"tiny":-0.0010,"negzero":-0,"int":-120,"huge":1234567890123456789012345.5,"list":[1.0,"x",{"b":true,"a":null}],"nested":{"z":{},"a":[]}}"#,
            r#"{"messageId":"m-1","auditTime":"2026-11-22T10:00:00Z","auditText":"t","actor":"bob"}"#,
            r#"{"auditTime":"2026-11-22T10:00:00Z","auditText":"back\\slash \u007f del","resource":"only/a/resource","outcome":"failure","sourceIp":"192.0.2.7"}"#,
            &format!(
                r#"{{"auditTime":"2026-11-22T10:00:00Z","auditText":"t","actor":"{}","action":"a\"b"}}"#,
                "é".repeat(1000)
            ),
        ] {
            let mut item = item(body);
            // A redriven delivery also carries its first sender.
            item.original_sender_id = Some("AROAFIRST:receiver".into());
            assert_eq!(
                String::from_utf8(item_attested_bytes(&item)).unwrap(),
                String::from_utf8(attested_bytes(&item_line_map(&item))).unwrap(),
                "{body}"
            );
            item.attestation = Some("v1.x".into());
            item.expires_at = None;
            item.sent_at = None;
            item.receive_count = None;
            assert_eq!(
                item_attested_bytes(&item),
                attested_bytes(&item_line_map(&item)),
                "{body}: without the optional ones, the attestation left out"
            );
        }
    }

    /// The request body `PutItem` sends, parsed back.
    fn request(body: &str) -> Value {
        serde_json::from_slice(&put_item_body("AuditMessages", &item(body)).unwrap()).unwrap()
    }

    /// What the adapter makes of an `ALL_OLD` item: read back, then the model's payload rule.
    fn compare_payload(new: &AuditItem, old: &Map<String, Value>) -> PutOutcome {
        found(old, new)
    }

    /// A stored value (DynamoDB's JSON) against the producer's, through the same path: as the one
    /// field of `extra` in an `ALL_OLD` item, against an item whose body has `new` there.
    fn same_value(stored: &Value, new: &Value) -> bool {
        let body = format!(r#"{{"auditText":"x","auditTime":"2026-11-22T10:00:00Z","v":{new}}}"#);
        let mut old = request(&body)["Item"].as_object().unwrap().clone();
        old.insert("extra".into(), serde_json::json!({ "M": { "v": stored } }));
        compare_payload(&item(&body), &old) == PutOutcome::Duplicate
    }

    /// The `ALL_OLD` item of `body` as the function writes it.
    pub(crate) fn stored(body: &str) -> Map<String, Value> {
        request(body)["Item"].as_object().unwrap().clone()
    }

    #[test]
    fn item_maps_to_every_attribute_of_the_layout() {
        let request = request(
            r#"{"auditText":"login","auditTime":"2026-11-22T12:00:00+02:00","user":{"id":7,"tags":["a",true,null]},"amount":12.50}"#,
        );
        let attrs = &request["Item"];
        let s = |name: &str| attrs[name]["S"].as_str().map(str::to_owned);
        assert_eq!(s("messageId").as_deref(), Some("sqs-1"));
        assert_eq!(s("auditTime").as_deref(), Some("2026-11-22T10:00:00.000Z"));
        assert_eq!(s("auditText").as_deref(), Some("login"));
        assert_eq!(s("auditBucket").as_deref(), Some("2026-11-22#24"));
        assert_eq!(s("sqsMessageId").as_deref(), Some("sqs-1"));
        assert_eq!(s("sentAt").as_deref(), Some("2026-11-22T10:00:00.000Z"));
        assert_eq!(s("receivedAt").as_deref(), Some("2026-11-22T10:00:01.000Z"));
        assert_eq!(
            s("eventSource").as_deref(),
            Some("arn:aws:sqs:us-east-1:000000000000:AuditQueue")
        );
        assert_eq!(s("senderId").as_deref(), Some("AROAEXAMPLE:orders-service"));
        assert_eq!(attrs["receiveCount"], serde_json::json!({"N": "1"}));
        assert_eq!(
            attrs["expiresAt"],
            serde_json::json!({"N": (1_795_341_600i64 + 30 * 86_400).to_string()})
        );
        // originalSenderId only on an item from a redriven record (below).
        assert_eq!(attrs.as_object().unwrap().len(), 12);
        // The producer's digits are kept exactly: 12.50 stays 12.50.
        assert_eq!(
            attrs["extra"].to_string(),
            r#"{"M":{"amount":{"N":"12.50"},"user":{"M":{"id":{"N":"7"},"tags":{"L":[{"S":"a"},{"BOOL":true},{"NULL":true}]}}}}}"#
        );
    }

    #[test]
    fn a_redriven_item_keeps_its_first_sender_beside_the_redriver() {
        let first = item(r#"{"auditText":"x","auditTime":"2026-11-22T10:00:00Z"}"#);
        let mut redriven = first.clone();
        redriven.sender_id = Some("AIDAOPERATOR".into());
        redriven.original_sender_id = first.sender_id.clone();
        let request: Value =
            serde_json::from_slice(&put_item_body("AuditMessages", &redriven).unwrap()).unwrap();
        let attrs = request["Item"].as_object().unwrap();
        assert_eq!(attrs["senderId"], serde_json::json!({"S": "AIDAOPERATOR"}));
        assert_eq!(
            attrs["originalSenderId"],
            serde_json::json!({"S": "AROAEXAMPLE:orders-service"})
        );
        assert_eq!(read_item(attrs), Ok(redriven.clone()));
        assert_eq!(
            item_size(&redriven),
            item_size(&first) - 26 + "AIDAOPERATOR".len() + "originalSenderId".len() + 26
        );
        // The sender is delivery metadata: the same event sent by another is a duplicate.
        assert_eq!(
            compare_payload(
                &redriven,
                &stored(r#"{"auditText":"x","auditTime":"2026-11-22T10:00:00Z"}"#)
            ),
            PutOutcome::Duplicate
        );
    }

    #[test]
    fn structured_fields_are_top_level_attributes_with_their_lookup_keys() {
        let request = request(
            r#"{"action":"invoice.delete","actor":"alice","resource":"invoice/4711","outcome":"failure","sourceIp":"2001:DB8::1","auditTime":"2026-11-22T12:00:00Z","reason":"r"}"#,
        );
        let attrs = request["Item"].as_object().unwrap();
        let s = |name: &str| attrs[name]["S"].as_str().map(str::to_owned);
        assert_eq!(s("actor").as_deref(), Some("alice"));
        assert_eq!(s("action").as_deref(), Some("invoice.delete"));
        assert_eq!(s("resource").as_deref(), Some("invoice/4711"));
        assert_eq!(s("outcome").as_deref(), Some("failure"));
        assert_eq!(s("sourceIp").as_deref(), Some("2001:db8::1"));
        // FNV-1a("sqs-1") = ...24 modulo 32, so 0 modulo 4: the shard of every lookup key.
        assert_eq!(s("actorKey").as_deref(), Some("alice#0"));
        assert_eq!(s("actionKey").as_deref(), Some("invoice.delete#0"));
        assert_eq!(s("resourceKey").as_deref(), Some("invoice/4711#0"));
        // No auditText (action says what happened), and the fields are not repeated in extra.
        assert!(!attrs.contains_key("auditText"));
        assert_eq!(attrs["extra"].to_string(), r#"{"M":{"reason":{"S":"r"}}}"#);
    }

    #[test]
    fn an_item_without_a_field_is_not_in_that_lookup_index() {
        let request =
            request(r#"{"auditText":"x","actor":"bob","auditTime":"2026-11-22T12:00:00Z"}"#);
        let attrs = request["Item"].as_object().unwrap();
        assert!(attrs.contains_key("actorKey"));
        for absent in [
            "action",
            "actionKey",
            "resource",
            "resourceKey",
            "outcome",
            "sourceIp",
        ] {
            assert!(!attrs.contains_key(absent), "{absent}");
        }
    }

    #[test]
    fn the_write_is_conditional_on_the_key_being_absent_and_returns_the_old_item() {
        let request = request(r#"{"auditText":"x","auditTime":"2026-11-22T10:00:00Z"}"#);
        assert_eq!(request["TableName"], "AuditMessages");
        assert_eq!(request["ConditionExpression"], "attribute_not_exists(#pk)");
        assert_eq!(
            request["ExpressionAttributeNames"],
            serde_json::json!({"#pk": "messageId"})
        );
        assert_eq!(request["ReturnValuesOnConditionCheckFailure"], "ALL_OLD");
    }

    #[test]
    fn extra_is_absent_when_the_body_has_no_other_fields() {
        let request = request(r#"{"auditText":"x","auditTime":"2026-11-22T10:00:00Z"}"#);
        assert!(request["Item"].get("extra").is_none());
    }

    #[test]
    fn an_item_over_400_kb_is_refused_before_any_call() {
        let body = format!(
            r#"{{"auditText":"{}","auditTime":"2026-11-22T10:00:00Z"}}"#,
            "x".repeat(MAX_ITEM_BYTES)
        );
        assert!(
            matches!(put_item_body("t", &item(&body)), Err(StoreError::ItemTooLarge(n)) if n > MAX_ITEM_BYTES)
        );
        let body = format!(
            r#"{{"auditText":"{}","auditTime":"2026-11-22T10:00:00Z"}}"#,
            "x".repeat(MAX_ITEM_BYTES - 400)
        );
        assert!(put_item_body("t", &item(&body)).is_ok());
    }

    #[test]
    fn item_size_counts_names_values_and_map_overhead() {
        let item = item(
            r#"{"auditText":"ab","auditTime":"2026-11-22T10:00:00Z","k":[1,"xy"],"m":{"b":true}}"#,
        );
        let fixed = "messageId".len() + 5 // sqs-1
            + "auditTime".len() + 24
            + "auditBucket".len() + 13
            + "auditText".len() + 2
            + "sqsMessageId".len() + 5
            + "receivedAt".len() + 24
            + "sentAt".len() + 24
            + "eventSource".len() + 45
            + "senderId".len() + 26
            + "receiveCount".len() + 2 // 1 digit: 1 + 1
            + "expiresAt".len() + 5; // 1797933600: 8 significant digits, 4 + 1
        // extra: M(3) + k: 1 + 1 + L(3 + (1 + 2) + (1 + 2)) + m: 1 + 1 + M(3 + 1 + 1 + 1)
        let extra = "extra".len() + 3 + (1 + 1 + (3 + 3 + 3)) + (1 + 1 + (3 + 1 + 1 + 1));
        assert_eq!(item_size(&item), fixed + extra);
    }

    #[test]
    fn numbers_compare_by_value() {
        let n = |text: &str| serde_json::json!({ "N": text });
        let json = |text: &str| serde_json::from_str::<Value>(text).unwrap();
        for (a, b) in [
            ("1", "1.0"),
            ("100", "1e2"),
            ("0.5", "5E-1"),
            ("-0", "0"),
            ("12.50", "12.5"),
            ("7", "7"),
        ] {
            assert!(same_value(&n(a), &json(b)), "{a} == {b}");
        }
        for (a, b) in [("1", "2"), ("1", "-1"), ("10", "1"), ("0.1", "0.01")] {
            assert!(!same_value(&n(a), &json(b)), "{a} != {b}");
        }
        assert!(!same_value(&serde_json::json!({"S": "1"}), &json("1")));
    }

    #[test]
    fn same_payload_is_a_duplicate_and_other_payload_a_conflict() {
        let new = item(r#"{"auditText":"x","auditTime":"2026-11-22T10:00:00Z","n":1.0}"#);
        let mut stored = request(r#"{"auditText":"x","auditTime":"2026-11-22T10:00:00Z","n":1.0}"#)
            ["Item"]
            .as_object()
            .unwrap()
            .clone();
        // DynamoDB normalises numbers and the delivery metadata differs: still a duplicate.
        stored.insert("extra".into(), serde_json::json!({"M": {"n": {"N": "1"}}}));
        stored.insert(
            "sqsMessageId".into(),
            serde_json::json!({"S": "another-delivery"}),
        );
        assert_eq!(compare_payload(&new, &stored), PutOutcome::Duplicate);

        stored.insert("auditText".into(), serde_json::json!({"S": "y"}));
        assert_eq!(compare_payload(&new, &stored), PutOutcome::Conflict);

        let plain = item(r#"{"auditText":"x","auditTime":"2026-11-22T10:00:00Z"}"#);
        let stored =
            request(r#"{"auditText":"x","auditTime":"2026-11-22T10:00:00Z","n":1}"#)["Item"]
                .as_object()
                .unwrap()
                .clone();
        assert_eq!(
            compare_payload(&plain, &stored),
            PutOutcome::Conflict,
            "extra only on one side"
        );
    }

    #[test]
    fn a_stored_item_reads_back_as_the_item_written() {
        for body in [
            r#"{"auditText":"login","auditTime":"2026-11-22T12:00:00+02:00","user":{"id":7,"tags":["a",true,null]},"amount":12.50}"#,
            r#"{"action":"invoice.delete","actor":"alice","resource":"invoice/4711","outcome":"failure","sourceIp":"2001:DB8::1","auditTime":"2026-11-22T12:00:00Z"}"#,
        ] {
            assert_eq!(read_item(&stored(body)), Ok(item(body)), "{body}");
        }
    }

    #[test]
    fn a_stored_payload_the_function_could_not_have_written_is_a_conflict() {
        let body = r#"{"auditText":"x","outcome":"success","sourceIp":"2001:db8::1","auditTime":"2026-11-22T10:00:00Z","tags":["a"]}"#;
        let new = item(body);
        assert_eq!(compare_payload(&new, &stored(body)), PutOutcome::Duplicate);
        for (name, value) in [
            ("outcome", serde_json::json!({"S": "maybe"})),
            ("sourceIp", serde_json::json!({"S": "2001:DB8::1"})),
            ("extra", serde_json::json!({"M": {"tags": {"SS": ["a"]}}})),
            ("extra", serde_json::json!({"M": {}})),
            ("extra", serde_json::json!({"S": "tags"})),
        ] {
            let mut old = stored(body);
            old.insert(name.into(), value.clone());
            assert!(read_item(&old).is_err(), "{name}: {value}");
            assert_eq!(compare_payload(&new, &old), PutOutcome::Conflict, "{value}");
        }
    }
}
