//! Owns an audit item as read back from the table: its attributes, its merge key, and its form
//! in DynamoDB's JSON, from which the model makes the plain JSON line (`audit_model::line`, the
//! same line the archive stores; docs/architecture.md "The crates", trail). Must not know how items are queried or printed.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Map, Value};

use super::merge::Keyed;
use super::output::{Column, Record};
use audit_model::keys::{PARTITION_KEY, SORT_KEY};
use audit_model::line::{item_line, plain_json, plain_map};

/// One stored item, with the two strings the merge orders by taken out once.
#[derive(Debug, Clone, PartialEq)]
pub struct TrailItem {
    pub audit_time: String,
    pub message_id: String,
    pub attributes: HashMap<String, AttributeValue>,
}

impl From<HashMap<String, AttributeValue>> for TrailItem {
    fn from(attributes: HashMap<String, AttributeValue>) -> Self {
        let s = |name: &str| match attributes.get(name) {
            Some(AttributeValue::S(text)) => text.clone(),
            _ => String::new(),
        };
        Self {
            audit_time: s(SORT_KEY),
            message_id: s(PARTITION_KEY),
            attributes,
        }
    }
}

impl Keyed for TrailItem {
    fn time(&self) -> &str {
        &self.audit_time
    }
    fn id(&self) -> &str {
        &self.message_id
    }
}

impl TrailItem {
    /// An archived line (the item's JSON line, `audit_model::line`) as the item the table holds:
    /// strings, numbers with their digits, booleans, nulls, maps and lists as the receiver writes
    /// them. `None` for a line that is not an object with `messageId` and `auditTime` strings.
    pub fn from_line(line: &str) -> Option<Self> {
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(line) else {
            return None;
        };
        let item = Self::from(
            map.iter()
                .map(|(name, value)| (name.clone(), super::hot::attribute(value)))
                .collect::<HashMap<_, _>>(),
        );
        (!item.audit_time.is_empty() && !item.message_id.is_empty()).then_some(item)
    }

    /// The item in DynamoDB's JSON (`{"name": {"S": "…"}, …}`), as the wire and an export carry it.
    pub fn dynamo_json(&self) -> Map<String, Value> {
        self.attributes
            .iter()
            .map(|(name, value)| (name.clone(), dynamo_json(value)))
            .collect()
    }

    /// The item's JSON line (`--format jsonl`): the model's, so that auditctl and the archive
    /// print the same bytes for the same item.
    pub fn line(&self) -> String {
        item_line(&self.dynamo_json())
    }

    /// Whether each (attribute, value) pair is a string attribute of the item equal to the value.
    pub fn has(&self, pairs: &[(&str, String)]) -> bool {
        pairs.iter().all(|(name, value)| {
            matches!(self.attributes.get(*name), Some(AttributeValue::S(text)) if text == value)
        })
    }

    /// Whether the item is an access event: auditctl's own record of a read of the trail (an
    /// `auditctl.*` action; docs/auditctl.md "Access to the trail is itself recorded").
    pub fn is_access_event(&self) -> bool {
        matches!(
            self.attributes.get("action"),
            Some(AttributeValue::S(action)) if action.starts_with(audit_model::access::ACCESS_ACTION_PREFIX)
        )
    }

    /// An attribute as text for a cell: strings as they are, numbers with their digits, anything
    /// else as plain JSON; "" if absent.
    pub fn text(&self, name: &str) -> String {
        match self.attributes.get(name) {
            None => String::new(),
            Some(AttributeValue::S(text)) => text.clone(),
            Some(AttributeValue::N(number)) => number.clone(),
            Some(other) => plain_json(&dynamo_json(other)).to_string(),
        }
    }
}

/// An SDK attribute value -> DynamoDB's JSON (`audit_aws::dynamodb::json`, which the archiver's
/// repair reads items with too).
pub fn dynamo_json(value: &AttributeValue) -> Value {
    audit_aws::dynamodb::json::attribute_json(value)
}

/// The columns of an item in `csv` (all) and `table` (those with a width): who did what to what,
/// with what result and from where, next to the time, the actor the producer claims beside the
/// sender SQS attests (`senderId`; `originalSenderId` the first delivery's, on a redriven item);
/// the free text after them.
impl Record for TrailItem {
    /// The senders, the address, extra, then what and who go first: a narrow terminal keeps
    /// when, which event and its text.
    const DROP_FIRST: &'static [&'static str] = &[
        "originalSenderId",
        "senderId",
        "sourceIp",
        "extra",
        "resource",
        "outcome",
        "action",
        "actor",
    ];
    const COLUMNS: &'static [Column] = &ITEM_COLUMNS;

    fn json(&self) -> Value {
        Value::Object(plain_map(&self.dynamo_json()))
    }

    fn line(&self) -> String {
        TrailItem::line(self)
    }

    fn cells(&self) -> Vec<String> {
        Self::COLUMNS.iter().map(|c| self.text(c.name)).collect()
    }
}

/// An item's columns, in order (a caller that prints more of each item adds its own after them).
pub const ITEM_COLUMNS: [Column; 16] = [
    column("auditTime", Some(24)),
    column("messageId", Some(36)),
    column("actor", Some(20)),
    // A role's sender id is its 21-character id, `:`, and the session name.
    column("senderId", Some(32)),
    column("originalSenderId", Some(24)),
    column("action", Some(20)),
    column("resource", Some(24)),
    column("outcome", Some(7)),
    column("sourceIp", Some(15)),
    column("auditText", Some(32)),
    column("sqsMessageId", None),
    column("sentAt", None),
    column("receivedAt", None),
    column("receiveCount", None),
    column("eventSource", None),
    column("extra", Some(24)),
];

const fn column(name: &'static str, table_width: Option<usize>) -> Column {
    Column { name, table_width }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::primitives::Blob;
    use serde_json::json;

    fn item(attributes: Vec<(&str, AttributeValue)>) -> TrailItem {
        TrailItem::from(
            attributes
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect::<HashMap<_, _>>(),
        )
    }

    #[test]
    fn numbers_keep_their_exact_digits_and_extra_is_an_object() {
        let item = item(vec![
            ("messageId", AttributeValue::S("m".into())),
            ("auditTime", AttributeValue::S("t".into())),
            (
                "extra",
                AttributeValue::M(HashMap::from([
                    (
                        "amount".to_owned(),
                        AttributeValue::N("12345678901234567890.123456789012345678".into()),
                    ),
                    (
                        "tags".to_owned(),
                        AttributeValue::L(vec![
                            AttributeValue::Bool(true),
                            AttributeValue::Null(true),
                            AttributeValue::N("1E+5".into()),
                        ]),
                    ),
                ])),
            ),
            ("receiveCount", AttributeValue::N("3".into())),
        ]);
        assert_eq!((item.time(), item.id()), ("t", "m"));
        assert_eq!(
            item.line(),
            // The digits are kept; serde_json writes an exponent's `E` as `e` (DynamoDB returns numbers
            // without exponents anyway).
            r#"{"auditTime":"t","extra":{"amount":12345678901234567890.123456789012345678,"tags":[true,null,1e+5]},"messageId":"m","receiveCount":3}"#
        );
        assert_eq!(item.text("receiveCount"), "3");
        assert_eq!(item.text("absent"), "");
        assert_eq!(
            item.text("extra"),
            r#"{"amount":12345678901234567890.123456789012345678,"tags":[true,null,1e+5]}"#
        );
    }

    #[test]
    fn has_is_an_exact_match_of_string_attributes() {
        let item = item(vec![
            ("actor", AttributeValue::S("alice".into())),
            ("receiveCount", AttributeValue::N("1".into())),
        ]);
        assert!(item.has(&[]));
        assert!(item.has(&[("actor", "alice".to_owned())]));
        for absent in [
            ("actor", "Alice".to_owned()),
            ("actor", "alice ".to_owned()),
            ("senderId", "alice".to_owned()),
            ("receiveCount", "1".to_owned()),
        ] {
            assert!(
                !item.has(&[("actor", "alice".to_owned()), absent.clone()]),
                "{absent:?}"
            );
        }
    }

    #[test]
    fn every_attribute_type_maps_to_dynamodb_json_and_the_line_is_the_models() {
        let item = item(vec![
            ("s", AttributeValue::S("text \"q\" é".into())),
            ("n", AttributeValue::N("-0.000100".into())),
            ("bool", AttributeValue::Bool(false)),
            ("null", AttributeValue::Null(true)),
            ("ss", AttributeValue::Ss(vec!["a".into(), "b".into()])),
            ("ns", AttributeValue::Ns(vec!["1".into(), "2.50".into()])),
            ("b", AttributeValue::B(Blob::new(b"hi\x00\xff".to_vec()))),
            (
                "bs",
                AttributeValue::Bs(vec![Blob::new(b"a".to_vec()), Blob::new(Vec::new())]),
            ),
            (
                "m",
                AttributeValue::M(HashMap::from([(
                    "l".to_owned(),
                    AttributeValue::L(vec![AttributeValue::S("x".into())]),
                )])),
            ),
        ]);
        let dynamo = item.dynamo_json();
        assert_eq!(
            Value::Object(dynamo.clone()),
            json!({
                "s": {"S": "text \"q\" é"}, "n": {"N": "-0.000100"}, "bool": {"BOOL": false},
                "null": {"NULL": true}, "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2.50"]},
                "b": {"B": "aGkA/w=="}, "bs": {"BS": ["YQ==", ""]},
                "m": {"M": {"l": {"L": [{"S": "x"}]}}}
            })
        );
        assert_eq!(item.line(), item_line(&dynamo));
        assert_eq!(
            item.line(),
            r#"{"b":"aGkA/w==","bool":false,"bs":["YQ==",""],"m":{"l":["x"]},"n":-0.000100,"ns":[1,2.50],"null":null,"s":"text \"q\" é","ss":["a","b"]}"#
        );
        assert_eq!(item.text("b"), r#""aGkA/w==""#);
        assert_eq!(item.text("n"), "-0.000100");
    }
}
