//! Owns reading an item the SDK returned as DynamoDB's JSON (`{"name": {"S": "…"}, …}`), the form
//! the stream carries and the model makes its lines from. Must not know which program reads it.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_types::base64;
use serde_json::{Map, Value, json};

/// An SDK attribute value -> DynamoDB's JSON. Numbers stay the text DynamoDB returned; binary is
/// base64 (standard alphabet, as DynamoDB's JSON carries it) by the SDK's own codec. Written by
/// hand: these few lines are the whole mapping, where serde_dynamo maps to plain values instead,
/// not to the tagged form the model reads.
pub fn attribute_json(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::S(text) => json!({ "S": text }),
        AttributeValue::N(number) => json!({ "N": number }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        AttributeValue::Null(_) => json!({ "NULL": true }),
        AttributeValue::M(map) => json!({
            "M": map
                .iter()
                .map(|(k, v)| (k.clone(), attribute_json(v)))
                .collect::<Map<_, _>>()
        }),
        AttributeValue::L(values) => {
            json!({ "L": values.iter().map(attribute_json).collect::<Vec<_>>() })
        }
        AttributeValue::Ss(set) => json!({ "SS": set }),
        AttributeValue::Ns(set) => json!({ "NS": set }),
        AttributeValue::B(blob) => json!({ "B": base64::encode(blob.as_ref()) }),
        AttributeValue::Bs(set) => json!({
            "BS": set.iter().map(|b| base64::encode(b.as_ref())).collect::<Vec<_>>()
        }),
        // A type newer than this SDK: nothing to say about it but that it is there.
        _ => Value::Null,
    }
}

/// A whole item as DynamoDB's JSON.
pub fn item_json(item: &HashMap<String, AttributeValue>) -> Map<String, Value> {
    item.iter()
        .map(|(name, value)| (name.clone(), attribute_json(value)))
        .collect()
}
