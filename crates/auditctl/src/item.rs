//! Owns an audit item as read back from the table: its attributes, its merge key, and its plain
//! JSON form (numbers with their stored digits). Must not know how items are queried or printed.

use std::collections::HashMap;
use std::str::FromStr;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Map, Number, Value};

use super::merge::Keyed;
use audit_model::keys::{PARTITION_KEY, SORT_KEY};

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
    /// The item as one JSON object: every attribute as plain JSON (keys in name order).
    pub fn to_json(&self) -> Value {
        Value::Object(
            self.attributes
                .iter()
                .map(|(name, value)| (name.clone(), plain_json(value)))
                .collect(),
        )
    }

    /// An attribute as text for a cell: strings as they are, anything else as JSON; "" if absent.
    pub fn text(&self, name: &str) -> String {
        match self.attributes.get(name) {
            None => String::new(),
            Some(AttributeValue::S(text)) => text.clone(),
            Some(AttributeValue::N(number)) => number.clone(),
            Some(other) => plain_json(other).to_string(),
        }
    }
}

/// DynamoDB types -> plain JSON. Numbers keep the digits DynamoDB returns (serde_json's
/// arbitrary_precision holds them as text); sets become arrays; binary becomes a hex string
/// (the function never writes binary: it can only come from another writer).
pub fn plain_json(value: &AttributeValue) -> Value {
    let number = |text: &str| {
        Number::from_str(text)
            .map(Value::Number)
            .unwrap_or_else(|_| Value::String(text.to_owned()))
    };
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    match value {
        AttributeValue::S(text) => Value::String(text.clone()),
        AttributeValue::N(text) => number(text),
        AttributeValue::Bool(b) => Value::Bool(*b),
        AttributeValue::Null(_) => Value::Null,
        AttributeValue::M(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), plain_json(v)))
                .collect::<Map<_, _>>(),
        ),
        AttributeValue::L(values) => Value::Array(values.iter().map(plain_json).collect()),
        AttributeValue::Ss(set) => Value::Array(set.iter().cloned().map(Value::String).collect()),
        AttributeValue::Ns(set) => Value::Array(set.iter().map(|n| number(n)).collect()),
        AttributeValue::B(blob) => Value::String(hex(blob.as_ref())),
        AttributeValue::Bs(set) => {
            Value::Array(set.iter().map(|b| Value::String(hex(b.as_ref()))).collect())
        }
        _ => Value::Null,
    }
}

/// The columns of an item in `csv` (all) and `table` (those with a width).
impl super::output::Record for TrailItem {
    const COLUMNS: &'static [super::output::Column] = &[
        column("auditTime", Some(24)),
        column("messageId", Some(36)),
        column("auditText", Some(48)),
        column("sqsMessageId", None),
        column("sentAt", None),
        column("receivedAt", None),
        column("receiveCount", Some(7)),
        column("eventSource", None),
        column("extra", Some(40)),
    ];

    fn json(&self) -> Value {
        self.to_json()
    }

    fn cells(&self) -> Vec<String> {
        Self::COLUMNS.iter().map(|c| self.text(c.name)).collect()
    }
}

const fn column(name: &'static str, table_width: Option<usize>) -> super::output::Column {
    super::output::Column { name, table_width }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_their_exact_digits_and_extra_is_an_object() {
        let item = TrailItem::from(HashMap::from([
            ("messageId".to_owned(), AttributeValue::S("m".into())),
            ("auditTime".to_owned(), AttributeValue::S("t".into())),
            (
                "extra".to_owned(),
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
            ("receiveCount".to_owned(), AttributeValue::N("3".into())),
        ]));
        assert_eq!((item.time(), item.id()), ("t", "m"));
        assert_eq!(
            item.to_json().to_string(),
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
}
