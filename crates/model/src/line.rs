//! Owns the item's JSON line: a stored item, in DynamoDB's JSON (`{"S": …}`, `{"N": …}`, …), as
//! one plain JSON object on one line. `auditctl query --format jsonl` prints it and the archive
//! stores it, so that both say the same thing byte for byte; and a stored value read back as the
//! producer's JSON it was written from. Must not know any client.

use std::str::FromStr;

use serde_json::{Map, Number, Value};

/// One attribute value in DynamoDB's JSON -> plain JSON. Numbers keep the digits DynamoDB holds
/// (serde_json's arbitrary_precision keeps them as text); sets become arrays; binary stays the
/// base64 text DynamoDB's JSON carries (the function never writes binary: it can only come from
/// another writer). A value that is not DynamoDB's JSON is kept as it is.
pub fn plain_json(attribute: &Value) -> Value {
    read(attribute, Read::Any).unwrap_or_else(|| attribute.clone())
}

/// Every attribute of an item as plain JSON, in name order.
pub fn plain_map(item: &Map<String, Value>) -> Map<String, Value> {
    // serde_json's Map is ordered by key (no preserve_order feature in this workspace): the
    // line's fields come out in name order whatever order the item came in.
    read_map(item, Read::Any).unwrap_or_default()
}

/// One attribute value in DynamoDB's JSON -> the JSON value the function wrote it from, if it is
/// one: only the types the function writes (`S`, `N` with a JSON number, `BOOL`, `NULL`, `M`,
/// `L`), all the way down. A set, binary or anything else is no such value (`None`): what only
/// another writer stores is never taken for a producer's JSON (the payload rule compares these).
pub fn written_json(attribute: &Value) -> Option<Value> {
    read(attribute, Read::Written)
}

/// How much of DynamoDB's JSON a reading takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// Everything, each value as faithfully as plain JSON can say it (never `None`).
    Any,
    /// Only what the function writes; anything else makes the whole reading `None`.
    Written,
}

/// The one reader of DynamoDB's JSON behind `plain_json` and `written_json`.
fn read(attribute: &Value, mode: Read) -> Option<Value> {
    let any = mode == Read::Any;
    let Some((tag, inner)) = attribute
        .as_object()
        .filter(|a| a.len() == 1)
        .and_then(|a| a.iter().next())
    else {
        return any.then(|| attribute.clone());
    };
    let number = |value: &Value| match value.as_str() {
        Some(text) => match Number::from_str(text) {
            Ok(number) => Some(Value::Number(number)),
            Err(_) => any.then(|| Value::String(text.to_owned())),
        },
        None => any.then(|| value.clone()),
    };
    match (tag.as_str(), inner) {
        ("S", Value::String(_)) | ("BOOL", Value::Bool(_)) => Some(inner.clone()),
        ("N", _) => number(inner),
        ("NULL", Value::Bool(true)) => Some(Value::Null),
        ("M", Value::Object(map)) => read_map(map, mode).map(Value::Object),
        ("L", Value::Array(values)) => values
            .iter()
            .map(|value| read(value, mode))
            .collect::<Option<_>>()
            .map(Value::Array),
        _ if !any => None,
        // Only another writer stores these.
        ("S" | "B" | "BOOL", _) => Some(inner.clone()),
        ("NULL", _) => Some(Value::Null),
        ("SS" | "BS", Value::Array(_)) => Some(inner.clone()),
        ("NS", Value::Array(values)) => values
            .iter()
            .map(number)
            .collect::<Option<_>>()
            .map(Value::Array),
        _ => Some(attribute.clone()),
    }
}

fn read_map(map: &Map<String, Value>, mode: Read) -> Option<Map<String, Value>> {
    map.iter()
        .map(|(name, value)| Some((name.clone(), read(value, mode)?)))
        .collect()
}

/// The field the archiver adds at the top level of the archived line of an item the receiver did
/// not attest, saying why (docs/archive.md "Items attested at birth"); the receiver never writes
/// an attribute of that name. Everything else of such a line is `item_line` of the item.
pub const NOT_ATTESTED: &str = "notAttested";

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

    #[test]
    fn a_written_value_reads_back_as_its_json_and_anything_else_as_none() {
        let attribute = |text: &str| serde_json::from_str::<Value>(text).unwrap();
        assert_eq!(
            written_json(&attribute(
                r#"{"M":{"n":{"N":"12.50"},"l":{"L":[{"S":"a"},{"BOOL":true},{"NULL":true}]}}}"#
            ))
            .map(|v| v.to_string()),
            Some(r#"{"l":["a",true,null],"n":12.50}"#.to_owned())
        );
        for other in [
            r#"{"SS":["a"]}"#,
            r#"{"B":"aGk="}"#,
            r#"{"N":"x"}"#,
            r#"{"NULL":false}"#,
            r#"{"S":"a","N":"1"}"#,
            r#""plain""#,
            r#"{"M":{"set":{"NS":["1"]}}}"#,
            r#"{"L":[{"S":"a"},{"BS":[]}]}"#,
        ] {
            assert_eq!(written_json(&attribute(other)), None, "{other}");
        }
    }
}
