//! Owns which envelope a body came in (native, CloudEvents 1.0 structured mode, EventBridge) and
//! how each one's attributes map to the audit fields. Must not know the field rules: a mapped
//! value is checked afterwards by `message`, as if the producer had sent it natively; only the
//! bounds decide which derived values of an AWS-generated event are left out.

use serde_json::{Map, Value};

use super::{
    EventOutcome, InvalidMessage, MAX_ACTION_CHARS, MAX_ACTOR_CHARS, MAX_MESSAGE_ID_CHARS,
    MAX_RESOURCE_CHARS, parse_ip,
};

/// The fields of an event before the rules apply, with the values as sent; `extra` holds
/// everything else, so that nothing a producer sent is dropped.
#[derive(Debug, Default)]
pub(crate) struct Draft {
    pub message_id: Option<Value>,
    pub audit_time: Option<Value>,
    pub audit_text: Option<Value>,
    pub actor: Option<Value>,
    /// How a refusal names `actor` when it was mapped from another attribute.
    pub actor_label: Option<&'static str>,
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
            Envelope::EventBridge => event_bridge(object),
        }
    }
}

fn native(mut object: Map<String, Value>) -> Draft {
    Draft {
        message_id: object.remove("messageId"),
        audit_time: object.remove("auditTime"),
        audit_text: object.remove("auditText"),
        actor: object.remove("actor"),
        actor_label: None,
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

/// The `messageId` of a CloudEvent: its `source` with every `%` written `%25` and every `#`
/// written `%23`, then `#`, then its `id` as sent (`https://billing.example.com/invoices` and
/// `A234` give `https://billing.example.com/invoices#A234`; `svc#a` and `1` give `svc%23a#1`,
/// `svc` and `a#1` give `svc#a#1`). The escaped source holds no `#`, so the first `#` of the key
/// ends it: two different (`source`, `id`) pairs never give the same key, and
/// `cloud_event_source_and_id` reads them back. A source without `%` or `#` (most of them) is
/// kept as it is. Hand-written: two characters are escaped, and the strict inverse must refuse
/// every other `%` sequence, which a general percent-decoder accepts.
pub fn cloud_event_message_id(source: &str, id: &str) -> String {
    let mut key = String::with_capacity(source.len() + id.len() + 1);
    for c in source.chars() {
        match c {
            '%' => key.push_str("%25"),
            '#' => key.push_str("%23"),
            c => key.push(c),
        }
    }
    key.push('#');
    key.push_str(id);
    key
}

/// The `source` and `id` that `cloud_event_message_id` built this key from; `None` for a key it
/// never builds. Only an item from a CloudEvent (`extra.specversion`) has such a key; its
/// `extra` also keeps `source` and `id` under their own names.
pub fn cloud_event_source_and_id(message_id: &str) -> Option<(String, String)> {
    let (escaped, id) = message_id.split_once('#')?;
    let mut source = String::with_capacity(escaped.len());
    let mut rest = escaped;
    while let Some(at) = rest.find('%') {
        source.push_str(&rest[..at]);
        let escape = &rest[at..];
        let (c, after) = if let Some(after) = escape.strip_prefix("%25") {
            ('%', after)
        } else {
            ('#', escape.strip_prefix("%23")?)
        };
        source.push(c);
        rest = after;
    }
    source.push_str(rest);
    Some((source, id.to_owned()))
}

/// A CloudEvents attribute that must be a non-empty string.
fn required<'a>(
    object: &'a Map<String, Value>,
    name: &str,
    problem: &'static str,
) -> Result<&'a str, InvalidMessage> {
    match object.get(name) {
        Some(Value::String(text)) if !text.is_empty() => Ok(text),
        _ => Err(invalid_cloud_event(problem)),
    }
}

/// `messageId` = `cloud_event_message_id(source, id)`, `auditTime` = `time`, `action` = `type`,
/// `resource` = `subject`, the extensions `actor`, `outcome`, `sourceip` to their fields, and the
/// auth-context extension's `authid` to `actor` when there is no `actor`. `source`, `id` and
/// `authid` are also kept in `extra` under their own names (they are what a reader looks up,
/// and `authid` belongs with `authtype` and `authclaims`); `data` (or `data_base64`),
/// `specversion` and every other attribute go to `extra` as well.
fn cloud_event(mut object: Map<String, Value>) -> Result<Draft, InvalidMessage> {
    if object.get("specversion").and_then(Value::as_str) != Some("1.0") {
        return Err(invalid_cloud_event("specversion must be \"1.0\""));
    }
    let id = required(&object, "id", "id is missing, empty or not a string")?;
    let source = required(
        &object,
        "source",
        "source is missing, empty or not a string",
    )?;
    required(&object, "type", "type is missing, empty or not a string")?;
    let message_id = cloud_event_message_id(source, id);
    if message_id.chars().count() > MAX_MESSAGE_ID_CHARS {
        // The source is the producer's fixed part: it is blamed only when no id would fit.
        let escaped_source = message_id.chars().count() - id.chars().count() - 1;
        return Err(invalid_cloud_event(
            if escaped_source + 2 > MAX_MESSAGE_ID_CHARS {
                "source is too long: the messageId built from source and id would exceed 256 characters"
            } else {
                "id is too long: the messageId built from source and id would exceed 256 characters"
            },
        ));
    }
    let (actor, actor_label) = match object.remove("actor") {
        None | Some(Value::Null) => match object.get("authid") {
            Some(authid) => (Some(authid.clone()), Some("actor (from authid)")),
            None => (None, None),
        },
        actor => (actor, None),
    };
    Ok(Draft {
        message_id: Some(Value::String(message_id)),
        // Absent: the key is the producer's, so the time must be too (the field rules say so).
        audit_time: object.remove("time"),
        audit_text: None,
        actor,
        actor_label,
        action: object.remove("type"),
        resource: object.remove("subject"),
        outcome: object.remove("outcome"),
        source_ip: object.remove("sourceip"),
        extra: object,
    })
}

fn invalid_event_bridge(problem: &'static str) -> InvalidMessage {
    InvalidMessage::InvalidEnvelope {
        envelope: "EventBridge",
        problem,
    }
}

/// The detail types CloudTrail gives the events it sends to EventBridge that say who called
/// what (`eventSource`, `eventName`, `userIdentity`, `errorCode`); not its Insights events.
pub const CLOUDTRAIL_DETAIL_TYPES: [&str; 4] = [
    "AWS API Call via CloudTrail",
    "AWS Console Action via CloudTrail",
    "AWS Console Sign In via CloudTrail",
    "AWS Service Event via CloudTrail",
];

/// `messageId` = `id`, `auditTime` = `time`, `action` = `detail-type`, `resource` = the first of
/// `resources`, `actor` = `detail.userIdentity.arn`, `sourceIp` = `detail.sourceIPAddress` when
/// it is an IP address (CloudTrail writes a service name, `ec2.amazonaws.com`, when a service
/// called). A CloudTrail event (`CLOUDTRAIL_DETAIL_TYPES`) says more: see `cloudtrail`.
///
/// AWS generated the event, so no limit of ours refuses it: a derived field out of its bounds or
/// of another type is left out (its value stays in `extra`, where it came from). Only the
/// envelope's own attributes can make it invalid: `id` (the key) and `detail-type` (the action
/// when nothing better is known) of 1 to 256 characters, and `time`, by the field rules. Every
/// other top-level field (`source`, `account`, `region`, `resources`, `detail`, `version`, …)
/// goes to `extra`.
fn event_bridge(mut object: Map<String, Value>) -> Result<Draft, InvalidMessage> {
    let fits = |name: &str, max: usize| {
        object
            .get(name)
            .and_then(Value::as_str)
            .is_some_and(|text| (1..=max).contains(&text.chars().count()))
    };
    if !fits("id", MAX_MESSAGE_ID_CHARS) {
        return Err(invalid_event_bridge("id must be 1 to 256 characters"));
    }
    if !fits("detail-type", MAX_ACTION_CHARS) {
        return Err(invalid_event_bridge(
            "detail-type must be 1 to 256 characters",
        ));
    }
    let detail = object.get("detail").unwrap_or(&Value::Null);
    let is_cloudtrail = object
        .get("detail-type")
        .and_then(Value::as_str)
        .is_some_and(|t| CLOUDTRAIL_DETAIL_TYPES.contains(&t));
    let first_resource = object
        .get("resources")
        .and_then(Value::as_array)
        .and_then(|resources| resources.first())
        .and_then(Value::as_str);
    let source_ip = detail
        .get("sourceIPAddress")
        .and_then(Value::as_str)
        .filter(|ip| parse_ip(ip).is_some())
        .map(str::to_owned);
    let mapped = if is_cloudtrail {
        cloudtrail(detail, first_resource)
    } else {
        CloudTrailFields {
            action: None,
            actor: detail.pointer("/userIdentity/arn").and_then(Value::as_str),
            outcome: None,
            resource: first_resource,
        }
    };
    let actor = within(mapped.actor.map(str::to_owned), MAX_ACTOR_CHARS);
    let resource = within(mapped.resource.map(str::to_owned), MAX_RESOURCE_CHARS);
    let outcome = mapped.outcome.map(|o| Value::String(o.as_str().to_owned()));
    let action = match within(mapped.action, MAX_ACTION_CHARS) {
        // `detail-type` is then not the action: it stays in `extra`.
        Some(action) => Some(Value::String(action)),
        None => object.remove("detail-type"),
    };
    Ok(Draft {
        message_id: object.remove("id"),
        audit_time: object.remove("time"),
        audit_text: None,
        actor: actor.map(Value::String),
        actor_label: None,
        action,
        resource: resource.map(Value::String),
        outcome,
        source_ip: source_ip.map(Value::String),
        extra: object,
    })
}

/// The fields an EventBridge event's `detail` gives, before their bounds are checked.
struct CloudTrailFields<'a> {
    action: Option<String>,
    actor: Option<&'a str>,
    outcome: Option<EventOutcome>,
    resource: Option<&'a str>,
}

/// A CloudTrail event says who did what, to what, with what result: `action` = the service's IAM
/// prefix (`iam_prefix`), `:`, `eventName` (`s3:DeleteBucket`, as IAM names actions); `actor` =
/// `userIdentity.arn`, else `principalId`, else `invokedBy` (a service); `outcome` = `failure`
/// when `errorCode` is present or a console sign-in says `Failure` (CloudTrail writes a failed
/// `ConsoleLogin` with an `errorMessage` and no `errorCode`), else `success`; `resource` = the
/// first `ARN` of `detail.resources`, else the first of the top-level `resources`.
fn cloudtrail<'a>(detail: &'a Value, first_resource: Option<&'a str>) -> CloudTrailFields<'a> {
    let text = |pointer: &str| {
        detail
            .pointer(pointer)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
    };
    let action = text("/eventSource")
        .zip(text("/eventName"))
        .map(|(source, name)| format!("{}:{name}", iam_prefix(source)));
    let actor = text("/userIdentity/arn")
        .or_else(|| text("/userIdentity/principalId"))
        .or_else(|| text("/userIdentity/invokedBy"));
    let failed = detail.get("errorCode").is_some_and(|code| !code.is_null())
        || text("/responseElements/ConsoleLogin") == Some("Failure");
    let arn = detail
        .get("resources")
        .and_then(Value::as_array)
        .and_then(|resources| {
            resources
                .iter()
                .find_map(|r| r.get("ARN").and_then(Value::as_str))
        });
    CloudTrailFields {
        action,
        actor,
        outcome: Some(if failed {
            EventOutcome::Failure
        } else {
            EventOutcome::Success
        }),
        resource: arn.or(first_resource),
    }
}

/// The IAM service prefix of a CloudTrail `eventSource`: its name before `.amazonaws.com`
/// (`s3.amazonaws.com` → `s3`), but `cloudwatch` for `monitoring.amazonaws.com`, the one common
/// service whose endpoint is not its prefix.
fn iam_prefix(event_source: &str) -> &str {
    match event_source
        .strip_suffix(".amazonaws.com")
        .unwrap_or(event_source)
    {
        "monitoring" => "cloudwatch",
        prefix => prefix,
    }
}

/// The value, when it is 1 to `max` characters.
fn within(value: Option<String>, max: usize) -> Option<String> {
    value.filter(|text| (1..=max).contains(&text.chars().count()))
}
