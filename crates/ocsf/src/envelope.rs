//! Owns what each envelope's own fields give the record (docs/ocsf.md "The mapping"): a native
//! body's fields, a CloudEvent's `source`, `id` and `type`, a CloudTrail event's `eventName`,
//! `userIdentity`, `sourceIPAddress`, `errorCode`. Must not know OCSF's layout of a record (that
//! is `record`'s); it reads the archived item's fields and `extra`.

use audit_model::message::envelope::CLOUDTRAIL_DETAIL_TYPES;
use serde_json::{Map, Value};

/// The envelope an archived event came in, told from what its `extra` kept
/// (`audit_model::envelope` moves the rest to the item's fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Native,
    /// `extra.specversion`.
    CloudEvent,
    /// An EventBridge event (`extra.detail` an object, `extra.source` and `extra.version`
    /// strings) whose detail type is CloudTrail's (`CLOUDTRAIL_DETAIL_TYPES`, in `action` or
    /// `extra.detail-type`) and whose detail has an `eventName`.
    CloudTrail,
    /// Any other EventBridge event.
    EventBridge,
}

impl Source {
    /// `unmapped.envelope`: which envelope the event came in.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::CloudEvent => "cloudevents",
            Self::CloudTrail => "cloudtrail",
            Self::EventBridge => "eventbridge",
        }
    }
}

/// The item's structured fields (docs/events.md "The item").
#[derive(Debug, Default)]
pub struct Fields {
    pub actor: Option<String>,
    pub action: Option<String>,
    pub resource: Option<String>,
    pub source_ip: Option<String>,
}

/// What the envelope says, in the record's terms.
#[derive(Debug, Default)]
pub struct Mapped {
    /// The text whose words give the activity.
    pub verb: Option<String>,
    pub operation: Option<String>,
    pub service: Option<String>,
    pub request_uid: Option<String>,
    pub api_version: Option<String>,
    /// `actor.user` (and Authentication's `user`).
    pub user: Map<String, Value>,
    pub invoked_by: Option<String>,
    pub source_ip: Option<String>,
    pub source_service: Option<String>,
    pub user_agent: Option<String>,
    pub region: Option<String>,
    pub account: Option<String>,
    pub status_code: Option<String>,
    pub status_detail: Option<String>,
    pub resource: Option<String>,
    /// What maps nowhere: `extra`, less what was mapped.
    pub unmapped: Map<String, Value>,
}

/// The envelope of an item and what it maps to. `queue` is the item's `eventSource` (the queue's
/// ARN): the region and account of an event that says none.
pub fn map(fields: Fields, mut extra: Map<String, Value>, queue: Option<&str>) -> (Source, Mapped) {
    let source = source_of(fields.action.as_deref(), &extra);
    let mut mapped = Mapped {
        verb: fields.action.clone(),
        operation: fields.action.clone(),
        resource: fields.resource,
        source_ip: fields.source_ip,
        ..Mapped::default()
    };
    if let Some(actor) = fields.actor {
        mapped.user.insert("name".into(), Value::String(actor));
    }
    match source {
        Source::Native => {}
        Source::CloudEvent => {
            mapped.service = take_text(&mut extra, "source");
            mapped.request_uid = take_text(&mut extra, "id");
        }
        Source::EventBridge => {
            mapped.region = take_text(&mut extra, "region");
            mapped.account = take_text(&mut extra, "account");
        }
        Source::CloudTrail => {
            let region = take_text(&mut extra, "region");
            let account = take_text(&mut extra, "account");
            if let Some(Value::Object(detail)) = extra.get_mut("detail") {
                cloudtrail(detail, &mut mapped);
            }
            mapped.region = mapped.region.take().or(region);
            mapped.account = mapped.account.take().or(account);
        }
    }
    if mapped.region.is_none() && mapped.account.is_none() {
        // `arn:aws:sqs:<region>:<account>:<name>`
        let mut parts = queue.unwrap_or_default().split(':').skip(3);
        let mut part = || parts.next().filter(|p| !p.is_empty()).map(str::to_owned);
        mapped.region = part();
        mapped.account = part();
    }
    mapped.unmapped = extra;
    (source, mapped)
}

fn source_of(action: Option<&str>, extra: &Map<String, Value>) -> Source {
    let text = |name: &str| extra.get(name).and_then(Value::as_str);
    if extra.contains_key("specversion") {
        return Source::CloudEvent;
    }
    let Some(detail) = extra.get("detail").filter(|d| d.is_object()) else {
        return Source::Native;
    };
    if text("source").is_none() || text("version").is_none() {
        return Source::Native;
    }
    let cloudtrail_type = [action, text("detail-type")]
        .into_iter()
        .flatten()
        .any(|t| CLOUDTRAIL_DETAIL_TYPES.contains(&t));
    let named = detail.get("eventName").is_some_and(Value::is_string);
    if cloudtrail_type || named && text("source").is_some_and(|s| s.starts_with("aws.")) {
        Source::CloudTrail
    } else {
        Source::EventBridge
    }
}

/// A CloudTrail event's `detail`: what maps is taken out of it, the rest stays under
/// `unmapped.detail`.
fn cloudtrail(detail: &mut Map<String, Value>, mapped: &mut Mapped) {
    let event_name = take_text(detail, "eventName");
    if event_name.is_some() {
        mapped.verb.clone_from(&event_name);
        mapped.operation = event_name;
    }
    mapped.service = take_text(detail, "eventSource");
    mapped.request_uid = take_text(detail, "requestID");
    mapped.api_version = take_text(detail, "apiVersion");
    mapped.user_agent = take_text(detail, "userAgent");
    mapped.region = take_text(detail, "awsRegion");
    mapped.account = take_text(detail, "recipientAccountId");
    mapped.status_code = take_text(detail, "errorCode");
    mapped.status_detail = take_text(detail, "errorMessage");
    if let Some(address) = take_text(detail, "sourceIPAddress") {
        if address.parse::<std::net::IpAddr>().is_ok() {
            mapped.source_ip = Some(address);
        } else {
            // A service called (`ec2.amazonaws.com`).
            mapped.source_ip = None;
            mapped.source_service = Some(address);
        }
    }
    if let Some(Value::Object(mut identity)) = detail.remove("userIdentity") {
        let mut user = Map::new();
        let arn = take_text(&mut identity, "arn");
        let principal = take_text(&mut identity, "principalId");
        // The ARN names the principal; `principalId` when there is none.
        if let Some(uid) = arn.clone().or_else(|| principal.clone()) {
            user.insert("uid".into(), Value::String(uid));
        }
        if let (Some(_), Some(principal)) = (&arn, principal) {
            user.insert("uid_alt".into(), Value::String(principal));
        }
        if let Some(name) = take_text(&mut identity, "userName") {
            user.insert("name".into(), Value::String(name));
        }
        if let Some(kind) = take_text(&mut identity, "type") {
            user.insert("type".into(), Value::String(kind));
        }
        if let Some(account) = take_text(&mut identity, "accountId") {
            user.insert("account".into(), serde_json::json!({"uid": account}));
        }
        if let Some(key) = take_text(&mut identity, "accessKeyId") {
            user.insert("credential_uid".into(), Value::String(key));
        }
        mapped.invoked_by = take_text(&mut identity, "invokedBy");
        if !user.is_empty() {
            // userIdentity says more than the item's `actor` (its ARN): it replaces it.
            mapped.user = user;
        }
        if !identity.is_empty() {
            detail.insert("userIdentity".into(), Value::Object(identity));
        }
    }
}

/// A string member, taken out; any other value stays.
fn take_text(map: &mut Map<String, Value>, name: &str) -> Option<String> {
    match map.remove(name) {
        Some(Value::String(text)) => Some(text),
        Some(other) => {
            map.insert(name.to_owned(), other);
            None
        }
        None => None,
    }
}
