//! Owns the mapping of one archived trail line to one OCSF 1.3 record (docs/ocsf.md "The
//! mapping"): the fields every envelope shares, the trail's identity, `unmapped`. Must not know
//! Parquet, object keys or any storage; what a CloudTrail or CloudEvents envelope says is
//! `envelope`'s, which words make which activity is `verb`'s.

use chrono::DateTime;
use serde_json::{Map, Value, json};

use crate::envelope::Mapped;
use crate::verb::{Activity, Class};

/// OCSF's version the records follow.
pub const OCSF_VERSION: &str = "1.3.0";
/// `metadata.product.name` and `vendor_name`: the product that reports the records.
pub const PRODUCT_NAME: &str = "audit-receiver";
/// The partition value of a region or an account that the event does not say.
pub const UNKNOWN: &str = "unknown";

/// Where an archived line is: its archive object's key and its number there (from 0), as
/// `auditctl prove` prints them (`object`, `lineNumber`: docs/auditctl.md "prove").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place<'a> {
    pub object: &'a str,
    pub line_number: u64,
}

/// One OCSF record, with what its object's key and order need.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub class: Class,
    /// `time`: the event's `auditTime`, epoch milliseconds.
    pub time: i64,
    /// `cloud.region` and `cloud.account.uid`, or `UNKNOWN`.
    pub region: String,
    pub account: String,
    /// The record itself: a JSON object with OCSF's attribute names.
    pub fields: Map<String, Value>,
}

/// Why a line gives no record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    #[error("the line is not a JSON object")]
    NotAnObject,
    /// A tamper line (docs/archive.md "The lines") or anything else without the item's key.
    #[error("the line is not an item: it has no string messageId and auditTime")]
    NotAnItem,
    #[error("auditTime is not an RFC 3339 time")]
    BadAuditTime,
}

/// Attributes of the item that are derived from others (the indexes' keys) or prove the line
/// itself (`attestation`): left out of the record, the archived line keeps them.
const LEFT_OUT: [&str; 5] = [
    "auditBucket",
    "actorKey",
    "actionKey",
    "resourceKey",
    "attestation",
];

/// The item's delivery attributes (docs/events.md "The item"): `unmapped.delivery`.
const DELIVERY: [&str; 7] = [
    "sqsMessageId",
    "sentAt",
    "receiveCount",
    "eventSource",
    "senderId",
    "originalSenderId",
    "expiresAt",
];

/// The OCSF record of an archived trail line (`audit_model::line::item_line`, with
/// `notAttested` when the archiver marked it).
pub fn record(line: &str, place: Place<'_>) -> Result<Record, MapError> {
    map(line, Some(place))
}

/// The OCSF record of a trail line taken from the table's stream, before the archiver has
/// written it: its archive object and line are not known yet (the archiver names the object when
/// it writes it, docs/archive.md "Key layout"), so `unmapped.trail` holds `messageId` and
/// `auditTime` only: what `auditctl prove` takes (docs/ocsf.md "The stream-fed writer").
pub fn streamed(line: &str) -> Result<Record, MapError> {
    map(line, None)
}

fn map(line: &str, place: Option<Place<'_>>) -> Result<Record, MapError> {
    let Ok(Value::Object(mut item)) = serde_json::from_str::<Value>(line) else {
        return Err(MapError::NotAnObject);
    };
    let text = |item: &mut Map<String, Value>, name: &str| match item.remove(name) {
        Some(Value::String(text)) => Some(text),
        _ => None,
    };
    let (Some(message_id), Some(audit_time)) =
        (text(&mut item, "messageId"), text(&mut item, "auditTime"))
    else {
        return Err(MapError::NotAnItem);
    };
    let time = millis(&audit_time).ok_or(MapError::BadAuditTime)?;
    let received_at = item
        .get("receivedAt")
        .and_then(Value::as_str)
        .and_then(millis);
    item.remove("receivedAt");
    for name in LEFT_OUT {
        item.remove(name);
    }
    let not_attested = item.remove(audit_model::line::NOT_ATTESTED);
    let audit_text = text(&mut item, "auditText");
    let outcome = text(&mut item, "outcome");
    let delivery: Map<String, Value> = DELIVERY
        .iter()
        .filter_map(|name| Some((name.to_string(), item.remove(*name)?)))
        .collect();
    let sender = delivery.get("senderId").and_then(Value::as_str);
    let queue = delivery.get("eventSource").and_then(Value::as_str);
    let extra = match item.remove("extra") {
        Some(Value::Object(extra)) => extra,
        _ => Map::new(),
    };
    let fields = crate::envelope::Fields {
        actor: text(&mut item, "actor"),
        action: text(&mut item, "action"),
        resource: text(&mut item, "resource"),
        source_ip: text(&mut item, "sourceIp"),
    };
    let action = fields.action.clone();
    let (source, mapped) = crate::envelope::map(fields, extra, queue);
    let activity = Activity::of(mapped.verb.as_deref());
    let class = activity.class();

    let (status_id, status) = match outcome.as_deref() {
        Some("success") => (1, "Success"),
        Some("failure") => (2, "Failure"),
        _ => (0, "Unknown"),
    };
    let (severity_id, severity) = if not_attested.is_some() {
        (4, "High")
    } else if status_id == 2 {
        (2, "Low")
    } else {
        (1, "Informational")
    };
    let region = mapped.region.clone().unwrap_or_else(|| UNKNOWN.to_owned());
    let account = mapped.account.clone().unwrap_or_else(|| UNKNOWN.to_owned());

    let mut out = Map::new();
    let mut put = |name: &str, value: Value| {
        out.insert(name.to_owned(), value);
    };
    put("class_uid", json!(class.uid()));
    put("class_name", json!(class.name()));
    put("category_uid", json!(class.category_uid()));
    put("category_name", json!(class.category_name()));
    put("activity_id", json!(activity.id()));
    put("activity_name", json!(activity.name()));
    put("type_uid", json!(class.uid() * 100 + activity.id()));
    put(
        "type_name",
        json!(format!("{}: {}", class.name(), activity.name())),
    );
    put("severity_id", json!(severity_id));
    put("severity", json!(severity));
    put("time", json!(time));
    put("status_id", json!(status_id));
    put("status", json!(status));
    if let Some(code) = &mapped.status_code {
        put("status_code", json!(code));
    }
    if let Some(detail) = &mapped.status_detail {
        put("status_detail", json!(detail));
    }
    if let Some(text) = audit_text {
        put("message", json!(text));
    }
    let mut metadata = json!({
        "version": OCSF_VERSION,
        "product": {
            "name": PRODUCT_NAME,
            "vendor_name": PRODUCT_NAME,
            "version": env!("CARGO_PKG_VERSION"),
        },
        "profiles": ["cloud"],
        "uid": message_id,
        "original_time": audit_time,
    });
    if let Some(logged) = received_at {
        metadata["logged_time"] = json!(logged);
    }
    if let Some(action) = &action {
        metadata["event_code"] = json!(action);
    }
    put("metadata", metadata);
    let mut cloud = json!({"provider": "AWS"});
    if let Some(region) = &mapped.region {
        cloud["region"] = json!(region);
    }
    if let Some(account) = &mapped.account {
        cloud["account"] = json!({"uid": account});
    }
    put("cloud", cloud);
    let user = (!mapped.user.is_empty()).then(|| Value::Object(mapped.user.clone()));
    let mut actor = Map::new();
    if let Some(user) = &user {
        actor.insert("user".into(), user.clone());
    }
    if let Some(invoked_by) = &mapped.invoked_by {
        actor.insert("invoked_by".into(), json!(invoked_by));
    }
    if let Some(sender) = sender {
        actor.insert("app_uid".into(), json!(sender));
    }
    if actor.is_empty() {
        actor.insert("app_name".into(), json!(UNKNOWN));
    }
    put("actor", Value::Object(actor));
    if class == Class::Authentication {
        // Authentication's subject: who signed in or out.
        let subject = user
            .or_else(|| sender.map(|s| json!({"uid": s})))
            .unwrap_or_else(|| json!({"name": UNKNOWN}));
        put("user", subject);
        // What was signed into (OCSF requires `service` or `dst_endpoint`): the API's service.
        let service = mapped.service.as_deref().unwrap_or(UNKNOWN);
        put("service", json!({"name": service}));
    }
    let mut api = json!({"operation": mapped.operation.as_deref().unwrap_or(UNKNOWN)});
    if let Some(service) = &mapped.service {
        api["service"] = json!({"name": service});
    }
    if let Some(request) = &mapped.request_uid {
        api["request"] = json!({"uid": request});
    }
    if let Some(version) = &mapped.api_version {
        api["version"] = json!(version);
    }
    put("api", api);
    put("src_endpoint", src_endpoint(&mapped));
    if let Some(agent) = &mapped.user_agent {
        put("http_request", json!({"user_agent": agent}));
    }
    let mut unmapped = Map::new();
    if !mapped.unmapped.is_empty() {
        unmapped.insert("extra".into(), Value::Object(mapped.unmapped));
    }
    if let Some(resource) = mapped.resource {
        if class == Class::ApiActivity {
            let key = if resource.starts_with("arn:") {
                "uid"
            } else {
                "name"
            };
            put("resources", json!([{ key: resource }]));
        } else {
            // Authentication has no `resources`.
            unmapped.insert("resource".into(), json!(resource));
        }
    }
    let mut trail = json!({
        "messageId": message_id,
        "auditTime": audit_time,
    });
    if let Some(place) = place {
        trail["object"] = json!(place.object);
        trail["lineNumber"] = json!(place.line_number);
    }
    if let Some(reason) = not_attested {
        trail[audit_model::line::NOT_ATTESTED] = reason;
    }
    unmapped.insert("trail".into(), trail);
    unmapped.insert("envelope".into(), json!(source.name()));
    if !delivery.is_empty() {
        unmapped.insert("delivery".into(), Value::Object(delivery));
    }
    // Attributes of the line this version does not know, under their own names.
    for (name, value) in item {
        unmapped.entry(name).or_insert(value);
    }
    put("unmapped", Value::Object(unmapped));
    Ok(Record {
        class,
        time,
        region,
        account,
        fields: out,
    })
}

/// `src_endpoint`: the address, else the calling service's name (CloudTrail's
/// `sourceIPAddress` when a service called), else `unknown` (API Activity requires one).
fn src_endpoint(mapped: &Mapped) -> Value {
    match (&mapped.source_ip, &mapped.source_service) {
        (Some(ip), _) => json!({"ip": ip}),
        (None, Some(service)) => json!({"svc_name": service}),
        (None, None) => json!({"name": UNKNOWN}),
    }
}

/// An RFC 3339 time as epoch milliseconds.
fn millis(text: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_millis())
}
