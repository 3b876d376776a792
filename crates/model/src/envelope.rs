//! Owns which envelope a body came in (native, CloudEvents 1.0 structured mode, EventBridge) and
//! how each one's attributes map to the audit fields. Must not know the field rules: every mapped
//! value is checked afterwards by `message`, as if the producer had sent it natively.

use serde_json::{Map, Value};

use crate::message::{InvalidMessage, MAX_ACTOR_CHARS, parse_ip};

/// The fields of an event before the rules apply, with the values as sent; `extra` holds
/// everything else, so that nothing a producer sent is dropped.
#[derive(Debug, Default)]
pub(crate) struct Draft {
    pub message_id: Option<Value>,
    pub audit_time: Option<Value>,
    pub audit_text: Option<Value>,
    pub actor: Option<Value>,
    pub action: Option<Value>,
    pub resource: Option<Value>,
    pub outcome: Option<Value>,
    pub source_ip: Option<Value>,
    pub extra: Map<String, Value>,
}

/// The envelopes a body can come in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Envelope {
    /// The native body: the fields under their own names.
    Native,
    /// CloudEvents 1.0, structured mode (an object with `specversion`).
    CloudEvent,
    /// An EventBridge event (string `version`, `id`, `detail-type`, `source`, `time`, object
    /// `detail`), as a rule's target delivers it to the queue.
    EventBridge,
}

impl Envelope {
    pub fn of(object: &Map<String, Value>) -> Self {
        let is_string = |key: &str| object.get(key).is_some_and(Value::is_string);
        if object.contains_key("specversion") {
            Self::CloudEvent
        } else if ["version", "id", "detail-type", "source", "time"]
            .iter()
            .all(|k| is_string(k))
            && object.get("detail").is_some_and(Value::is_object)
        {
            Self::EventBridge
        } else {
            Self::Native
        }
    }
}

impl Draft {
    pub(crate) fn of(object: Map<String, Value>) -> Result<Self, InvalidMessage> {
        match Envelope::of(&object) {
            Envelope::Native => Ok(native(object)),
            Envelope::CloudEvent => cloud_event(object),
            Envelope::EventBridge => Ok(event_bridge(object)),
        }
    }
}

fn native(mut object: Map<String, Value>) -> Draft {
    Draft {
        message_id: object.remove("messageId"),
        audit_time: object.remove("auditTime"),
        audit_text: object.remove("auditText"),
        actor: object.remove("actor"),
        action: object.remove("action"),
        resource: object.remove("resource"),
        outcome: object.remove("outcome"),
        source_ip: object.remove("sourceIp"),
        extra: object,
    }
}

fn invalid_cloud_event(problem: &'static str) -> InvalidMessage {
    InvalidMessage::InvalidEnvelope {
        envelope: "CloudEvents 1.0",
        problem,
    }
}

/// `messageId` = `source#id`, `auditTime` = `time`, `action` = `type`, `resource` = `subject`,
/// the extensions `actor`, `outcome`, `sourceip` to their fields; `data` (or `data_base64`),
/// `specversion` and every other attribute to `extra` under their own names.
fn cloud_event(mut object: Map<String, Value>) -> Result<Draft, InvalidMessage> {
    if object.get("specversion").and_then(Value::as_str) != Some("1.0") {
        return Err(invalid_cloud_event("specversion must be \"1.0\""));
    }
    let mut required = |name: &str, problem: &'static str| match object.remove(name) {
        Some(Value::String(text)) => Ok(text),
        _ => Err(invalid_cloud_event(problem)),
    };
    let id = required("id", "id is missing or not a string")?;
    let source = required("source", "source is missing or not a string")?;
    let action = required("type", "type is missing or not a string")?;
    Ok(Draft {
        message_id: Some(Value::String(format!("{source}#{id}"))),
        // Absent: the key is the producer's, so the time must be too (the field rules say so).
        audit_time: object.remove("time"),
        audit_text: None,
        actor: object.remove("actor"),
        action: Some(Value::String(action)),
        resource: object.remove("subject"),
        outcome: object.remove("outcome"),
        source_ip: object.remove("sourceip"),
        extra: object,
    })
}

/// `messageId` = `id`, `auditTime` = `time`, `action` = `detail-type`, `resource` = the first of
/// `resources`; `actor` = `detail.userIdentity.arn` and `sourceIp` = `detail.sourceIPAddress`
/// when present and valid (CloudTrail's shape of an AWS API call: its `sourceIPAddress` is a
/// service name such as `ec2.amazonaws.com` when a service called). Every other top-level field
/// (`source`, `account`, `region`, `resources`, `detail`, `version`, …) goes to `extra`.
fn event_bridge(mut object: Map<String, Value>) -> Draft {
    let detail = object.get("detail");
    let actor = detail
        .and_then(|d| d.pointer("/userIdentity/arn"))
        .and_then(Value::as_str)
        .filter(|arn| (1..=MAX_ACTOR_CHARS).contains(&arn.chars().count()))
        .map(|arn| Value::String(arn.to_owned()));
    let source_ip = detail
        .and_then(|d| d.get("sourceIPAddress"))
        .and_then(Value::as_str)
        .filter(|ip| parse_ip(ip).is_some())
        .map(|ip| Value::String(ip.to_owned()));
    let resource = object
        .get("resources")
        .and_then(Value::as_array)
        .and_then(|resources| resources.first())
        .cloned();
    Draft {
        message_id: object.remove("id"),
        audit_time: object.remove("time"),
        audit_text: None,
        actor,
        action: object.remove("detail-type"),
        resource,
        outcome: None,
        source_ip,
        extra: object,
    }
}
