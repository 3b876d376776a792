//! Owns the item's JSON line: a stored item, in DynamoDB's JSON (`{"S": …}`, `{"N": …}`, …), as
//! one plain JSON object on one line. `auditctl query --format jsonl` prints it and the archive
//! stores it, so that both say the same thing byte for byte. Must not know any client.

use std::str::FromStr;

use serde_json::{Map, Number, Value};

/// One attribute value in DynamoDB's JSON -> plain JSON. Numbers keep the digits DynamoDB holds
/// (serde_json's arbitrary_precision keeps them as text); sets become arrays; binary stays the
/// base64 text DynamoDB's JSON carries (the function never writes binary: it can only come from
/// another writer). A value that is not DynamoDB's JSON is kept as it is.
pub fn plain_json(attribute: &Value) -> Value {
    let Some((tag, inner)) = attribute
        .as_object()
        .filter(|a| a.len() == 1)
        .and_then(|a| a.iter().next())
    else {
        return attribute.clone();
    };
    let number = |value: &Value| match value.as_str() {
        Some(text) => Number::from_str(text)
            .map(Value::Number)
            .unwrap_or_else(|_| Value::String(text.to_owned())),
        None => value.clone(),
    };
    match (tag.as_str(), inner) {
        ("S" | "B", _) => inner.clone(),
        ("N", _) => number(inner),
        ("BOOL", _) => inner.clone(),
        ("NULL", _) => Value::Null,
        ("M", Value::Object(map)) => Value::Object(plain_map(map)),
        ("L", Value::Array(values)) => Value::Array(values.iter().map(plain_json).collect()),
        ("SS" | "BS", Value::Array(_)) => inner.clone(),
        ("NS", Value::Array(values)) => Value::Array(values.iter().map(number).collect()),
        _ => attribute.clone(),
    }
}

/// Every attribute of an item as plain JSON, in name order.
pub fn plain_map(item: &Map<String, Value>) -> Map<String, Value> {
    // serde_json's Map is ordered by key (no preserve_order feature in this workspace): the
    // line's fields come out in name order whatever order the item came in.
    item.iter()
        .map(|(name, value)| (name.clone(), plain_json(value)))
        .collect()
}

/// The item's JSON line, without the newline.
pub fn item_line(item: &Map<String, Value>) -> String {
    Value::Object(plain_map(item)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_item_is_one_plain_object_in_name_order_with_exact_numbers() {
        let item: Map<String, Value> = serde_json::from_str(
            r#"{"messageId":{"S":"m-1"},"auditTime":{"S":"2026-11-22T10:00:00.000Z"},
                "receiveCount":{"N":"1"},
                "extra":{"M":{"amount":{"N":"12.50"},"ok":{"BOOL":true},"none":{"NULL":true},
                              "tags":{"L":[{"S":"a"},{"N":"123456789012345678901234567890"}]},
                              "set":{"SS":["x","y"]},"nums":{"NS":["1","2.0"]},"bin":{"B":"aGk="}}}}"#,
        )
        .unwrap();
        assert_eq!(
            item_line(&item),
            r#"{"auditTime":"2026-11-22T10:00:00.000Z","extra":{"amount":12.50,"bin":"aGk=","none":null,"nums":[1,2.0],"ok":true,"set":["x","y"],"tags":["a",123456789012345678901234567890]},"messageId":"m-1","receiveCount":1}"#
        );
    }
}
