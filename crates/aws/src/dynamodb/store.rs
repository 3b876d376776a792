//! Owns the DynamoDB adapter: `AuditItem` -> DynamoDB's JSON attributes, the conditional
//! `PutItem` with ALL_OLD, and the mapping of DynamoDB's answers to `StoreError`. Must not know
//! SQS or batching. The wire (endpoint, signing, HTTP) is `wire`; see there why it is not the SDK.

pub mod sigv4;
pub mod wire;

use std::time::Duration;

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

use super::{AuditStore, PutOutcome, StoreError, same_number};
use audit_model::message::{AuditItem, Decimal};
pub use wire::{SetupError, Wire, WireError};

pub use audit_model::keys::{AUDIT_BUCKET, MAX_ITEM_BYTES, PARTITION_KEY, SORT_KEY, TIME_INDEX};

const CONDITION: &str = "attribute_not_exists(#pk)";

/// Writes audit items to one table, never overwriting.
#[derive(Debug, Clone)]
pub struct DynamoDbStore {
    wire: Wire,
    table: String,
}

impl DynamoDbStore {
    pub fn new(wire: Wire, table: impl Into<String>) -> Self {
        Self {
            wire,
            table: table.into(),
        }
    }

    /// Runs during init, so that the first batch after a cold start does not pay TCP/TLS set-up:
    /// one `DescribeTable` call (a read-only metadata action), which finds a missing table (or a
    /// refused access) at start-up, and beside it `connections - 1` unsigned `GET /` probes, all
    /// at once, which leave that many open connections in the pool. Bounded by `within`.
    /// Returns how many connections answered, or the `DescribeTable` call's error.
    pub async fn warm_up(&self, connections: usize, within: Duration) -> Result<usize, StoreError> {
        let body = serde_json::json!({ "TableName": self.table }).to_string();
        let describe = self.call("DescribeTable", body.into_bytes());
        let probes = futures::future::join_all((1..connections).map(|_| self.wire.probe()));
        let (described, probed) =
            tokio::time::timeout(within, futures::future::join(describe, probes))
                .await
                .map_err(|_| {
                    StoreError::Unavailable(format!("no answer within {} ms", within.as_millis()))
                })?;
        match described {
            Ok(_) => Ok(1 + probed.iter().filter(|p| p.is_ok()).count()),
            Err(Failure::Error(error)) => Err(error),
            Err(Failure::Exists(_)) => Err(StoreError::Rejected(
                "DescribeTable answered ConditionalCheckFailedException".into(),
            )),
        }
    }

    /// One call; a 2xx answer is `Ok` with its body, anything else a `Failure`. A request refused
    /// for its time is signed again at the service's time (from the answer's `Date`) and sent
    /// once more; refused credentials are fetched again for the next call.
    async fn call(&self, operation: &str, body: Vec<u8>) -> Result<bytes::Bytes, Failure> {
        let body = bytes::Bytes::from(body);
        let mut clock_corrected = false;
        loop {
            let reply = self
                .wire
                .call(operation, body.clone())
                .await
                .map_err(|error| Failure::Error(StoreError::Unavailable(error.to_string())))?;
            if (200..300).contains(&reply.status) {
                return Ok(reply.body);
            }
            let verdict = classify(reply.status, reply.error_type.as_deref(), &reply.body);
            if verdict.clock_suspect && !clock_corrected && self.wire.correct_clock(&reply) {
                clock_corrected = true;
                continue;
            }
            if verdict.credentials_refused {
                self.wire.forget_credentials();
            }
            return Err(verdict.failure);
        }
    }
}

impl AuditStore for DynamoDbStore {
    async fn put_if_absent(&self, item: &AuditItem) -> Result<PutOutcome, StoreError> {
        let body = put_item_body(&self.table, item)?;
        match self.call("PutItem", body).await {
            Ok(_) => Ok(PutOutcome::Written),
            Err(Failure::Exists(Some(old))) => Ok(compare_payload(item, &old)),
            Err(Failure::Exists(None)) => Err(StoreError::Unverifiable),
            Err(Failure::Error(error)) => Err(error),
        }
    }
}

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
        if !item.extra.is_empty() {
            map.serialize_entry("extra", &Tagged("M", &Attributes(&item.extra)))?;
        }
        if let Some(expires_at) = item.expires_at {
            map.serialize_entry("expiresAt", &Tagged("N", &expires_at.to_string()))?;
        }
        map.end()
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

/// Same payload (`auditText`, the structured fields and `extra`: `payload::same_payload`) means
/// a duplicate delivery; anything else is a conflict. `old` is the stored item in DynamoDB's
/// JSON, as ALL_OLD returns it.
fn compare_payload(item: &AuditItem, old: &Map<String, Value>) -> PutOutcome {
    let stored_string = |name: &str| {
        old.get(name)
            .and_then(|text| text.get("S"))
            .and_then(Value::as_str)
    };
    let fields: Vec<_> = item.field_attributes().collect();
    let same_text = stored_string("auditText") == item.audit_text.as_deref()
        && ["actor", "action", "resource", "outcome", "sourceIp"]
            .iter()
            .all(|name| {
                let new = fields
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.as_ref());
                stored_string(name) == new
            });
    let same_extra = match (old.get("extra").and_then(tagged), item.extra.is_empty()) {
        (None, true) => true,
        (Some(("M", stored)), false) => stored
            .as_object()
            .is_some_and(|map| same_fields(map, &item.extra)),
        _ => false,
    };
    if same_text && same_extra {
        PutOutcome::Duplicate
    } else {
        PutOutcome::Conflict
    }
}

/// A stored attribute (DynamoDB's JSON) against the producer's JSON value; numbers compare by
/// value: DynamoDB returns `1` for a stored `1.0`.
fn same_value(stored: &Value, new: &Value) -> bool {
    let Some((tag, inner)) = tagged(stored) else {
        return false;
    };
    match (tag, new) {
        ("NULL", Value::Null) => inner.as_bool() == Some(true),
        ("BOOL", Value::Bool(b)) => inner.as_bool() == Some(*b),
        ("S", Value::String(s)) => inner.as_str() == Some(s.as_str()),
        ("N", Value::Number(n)) => inner
            .as_str()
            .is_some_and(|x| same_number(x, &n.to_string())),
        ("L", Value::Array(values)) => inner.as_array().is_some_and(|stored| {
            stored.len() == values.len() && stored.iter().zip(values).all(|(p, q)| same_value(p, q))
        }),
        ("M", Value::Object(map)) => inner
            .as_object()
            .is_some_and(|stored| same_fields(stored, map)),
        _ => false,
    }
}

/// A stored map's entries against the producer's object, field by field.
fn same_fields(stored: &Map<String, Value>, new: &Map<String, Value>) -> bool {
    stored.len() == new.len()
        && stored
            .iter()
            .all(|(k, p)| new.get(k).is_some_and(|q| same_value(p, q)))
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

enum Failure {
    /// The condition failed: an item with this key exists (with its attributes, if returned).
    Exists(Option<Map<String, Value>>),
    Error(StoreError),
}

/// Answers that say the request's signature or credentials were refused: not a property of the
/// message, so retryable (another attempt, or SQS's next receive), with the credentials fetched
/// again first (expired or rotated ones). A clock too far off is corrected instead (below).
const CREDENTIALS_REFUSED: [&str; 5] = [
    "ExpiredTokenException",
    "InvalidSignatureException",
    "IncompleteSignatureException",
    "UnrecognizedClientException",
    "MissingAuthenticationTokenException",
];

/// Answers that a request signed at the wrong time gets (DynamoDB says
/// `InvalidSignatureException: Signature expired`): the SDK's clock-skew codes, and the Java
/// SDK's. Each makes the client compare the answer's `Date` with its own clock, and sign again at
/// the service's time when it was more than 4 minutes off; otherwise it stands as it is.
const CLOCK_SKEW: [&str; 7] = [
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
    "AuthFailure",
    "RequestTimeTooSkewed",
    "RequestExpired",
    "RequestInTheFuture",
    "AccessDeniedException",
];

/// Answers that say the caller may not do this: `access_denied`, not retried within the
/// invocation, transient across receives (a policy fixed later lets the queue drain by itself).
/// - `AccessDeniedException`: DynamoDB's answer to whatever policy refuses the call: the role's
///   IAM policy, a permissions boundary or session policy, a service or resource control policy,
///   the table's resource policy, a VPC endpoint policy, and a KMS key policy that does not let
///   the role use the table's customer managed key (`KMS key access denied error: …`).
/// - `AccessDenied`, `NotAuthorized`: the same refusal in AWS's common error codes.
/// - `KMSAccessDeniedException`, `KMSDisabledException`, `KMSInvalidStateException`,
///   `KMSNotFoundException`: how AWS services that encrypt with KMS name a refused, disabled,
///   pending-deletion or missing key; DynamoDB words these as `AccessDeniedException`, but a key
///   problem spelled this way is the deployment's too, never the message's.
/// - A bare HTTP 403 with no error code (a proxy or an endpoint policy in front of the service).
///
/// Not here: refused credentials or signatures (`UnrecognizedClientException`, …, above): they
/// are `store_unavailable`, retried, with the credentials fetched again.
const ACCESS_REFUSED: [&str; 7] = [
    "AccessDeniedException",
    "AccessDenied",
    "NotAuthorized",
    "KMSAccessDeniedException",
    "KMSDisabledException",
    "KMSInvalidStateException",
    "KMSNotFoundException",
];

/// What a non-2xx answer means.
struct Verdict {
    /// Exists, retryable, or final.
    failure: Failure,
    /// DynamoDB refused the credentials: they are fetched again.
    credentials_refused: bool,
    /// The refusal may be a clock too far off: worth checking the answer's `Date`.
    clock_suspect: bool,
}

/// A non-2xx answer -> what the batch needs to know: exists, retryable, or final; and whether
/// the credentials or the clock may be at fault.
fn classify(status: u16, error_type: Option<&str>, body: &[u8]) -> Verdict {
    // DynamoDB's error body (JSON 1.0 protocol): `__type` is `namespace#Code`; read field by
    // field so that a null or repeated message cannot hide the code or the old item.
    let body: Map<String, Value> = serde_json::from_slice(body).unwrap_or_default();
    let text = |names: &[&str]| {
        names
            .iter()
            .find_map(|name| body.get(*name).and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned()
    };
    let kind = match error_type.filter(|t| !t.is_empty()) {
        Some(header) => header.to_owned(),
        None => text(&["__type"]),
    };
    // `com.amazonaws.dynamodb.v20120810#Code`, or `Code:http://…` in the header form.
    let code = kind.rsplit('#').next().unwrap_or_default();
    let code = code.split(':').next().unwrap_or_default().to_owned();
    let message = text(&["message", "Message", "errorMessage"]);
    let credentials_refused = CREDENTIALS_REFUSED.contains(&code.as_str());
    let clock_suspect = CLOCK_SKEW.contains(&code.as_str());
    let with_message = |code: String| {
        if message.is_empty() {
            code
        } else {
            format!("{code}: {message}")
        }
    };
    let error = match code.as_str() {
        "ConditionalCheckFailedException" => {
            let old = body.get("Item").and_then(Value::as_object).cloned();
            return Verdict {
                failure: Failure::Exists(old),
                credentials_refused: false,
                clock_suspect: false,
            };
        }
        "ProvisionedThroughputExceededException"
        | "RequestLimitExceeded"
        | "ThrottlingException" => StoreError::Throttled(code),
        "InternalServerError"
        | "TransactionConflictException"
        | "ReplicatedWriteConflictException"
        | "RequestTimeout"
        | "RequestTimeoutException" => StoreError::Unavailable(code),
        "ResourceNotFoundException" => StoreError::TableNotFound(message),
        _ if credentials_refused => StoreError::Unavailable(format!("{code}: {message}")),
        _ if ACCESS_REFUSED.contains(&code.as_str()) => {
            StoreError::AccessDenied(with_message(code))
        }
        _ if code.contains("Throttl") || code == "LimitExceededException" => {
            StoreError::Throttled(code)
        }
        _ if status >= 500 || code == "ServiceUnavailable" => {
            StoreError::Unavailable(format!("HTTP {status} {code}").trim_end().to_owned())
        }
        "ValidationException" if message.contains("Item size") => {
            StoreError::ItemTooLarge(MAX_ITEM_BYTES + 1)
        }
        "" if status == 403 => StoreError::AccessDenied("HTTP 403".into()),
        "" => StoreError::Rejected(format!("HTTP {status}")),
        _ => StoreError::Rejected(with_message(code)),
    };
    Verdict {
        failure: Failure::Error(error),
        credentials_refused,
        clock_suspect,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use audit_model::message::{AuditMessage, Delivery, parse_audit_time};

    fn item(body: &str) -> AuditItem {
        let message = AuditMessage::parse(Some(body), None).unwrap();
        let delivery = Delivery {
            sqs_message_id: "sqs-1".into(),
            original_message_id: "sqs-1".into(),
            sent_at: Some(parse_audit_time("2026-11-22T10:00:00Z").unwrap()),
            receive_count: Some(1),
            event_source: Some("arn:aws:sqs:us-east-1:000000000000:AuditQueue".into()),
        };
        AuditItem::new(
            message,
            delivery,
            parse_audit_time("2026-11-22T10:00:01Z").unwrap(),
            Some(30),
        )
    }

    /// The request body `PutItem` sends, parsed back.
    fn request(body: &str) -> Value {
        serde_json::from_slice(&put_item_body("AuditMessages", &item(body)).unwrap()).unwrap()
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
        assert_eq!(attrs["receiveCount"], serde_json::json!({"N": "1"}));
        assert_eq!(
            attrs["expiresAt"],
            serde_json::json!({"N": (1_795_341_600i64 + 30 * 86_400).to_string()})
        );
        assert_eq!(attrs.as_object().unwrap().len(), 11);
        // The producer's digits are kept exactly: 12.50 stays 12.50.
        assert_eq!(
            attrs["extra"].to_string(),
            r#"{"M":{"amount":{"N":"12.50"},"user":{"M":{"id":{"N":"7"},"tags":{"L":[{"S":"a"},{"BOOL":true},{"NULL":true}]}}}}}"#
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
    fn answers_map_to_retryable_and_final_errors() {
        let error = |status: u16, code: &str, message: &str| {
            let body = format!(
                r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{code}","message":"{message}"}}"#
            );
            let verdict = classify(status, None, body.as_bytes());
            assert_eq!(
                verdict.credentials_refused,
                CREDENTIALS_REFUSED.contains(&code),
                "{code}"
            );
            match verdict.failure {
                Failure::Error(error) => error,
                Failure::Exists(_) => panic!("{code} is not a condition failure"),
            }
        };
        assert!(matches!(
            error(400, "ThrottlingException", "x"),
            StoreError::Throttled(_)
        ));
        for code in CREDENTIALS_REFUSED {
            assert!(
                matches!(error(400, code, "x"), e @ StoreError::Unavailable(_) if e.is_retryable()),
                "{code}"
            );
        }
        for code in ["TransactionConflictException", "RequestTimeout"] {
            assert!(error(400, code, "x").is_retryable(), "{code}");
        }
        // A null message, or both spellings of it, still leave the code and the old item readable.
        let both = br#"{"__type":"x#ConditionalCheckFailedException","message":null,"Message":"m","Item":{"auditText":{"S":"a"}}}"#;
        assert!(
            matches!(classify(400, None, both).failure, Failure::Exists(Some(item)) if item.contains_key("auditText"))
        );
        assert_eq!(
            error(
                400,
                "ValidationException",
                "Item size has exceeded the maximum allowed size"
            ),
            StoreError::ItemTooLarge(MAX_ITEM_BYTES + 1)
        );
        // The error type may come in the x-amzn-ErrorType header, with no JSON body.
        assert!(matches!(
            classify(400, Some("ThrottlingException:http://internal.amazon.com/"), b"").failure,
            Failure::Error(StoreError::Throttled(code)) if code == "ThrottlingException"
        ));
        assert!(matches!(
            classify(400, None, b"<html>Bad Request</html>").failure,
            Failure::Error(StoreError::Rejected(why)) if why == "HTTP 400"
        ));
    }

    #[test]
    fn access_refused_by_a_policy_is_access_denied_and_not_retried_now() {
        let classify_code = |status: u16, code: &str, message: &str| {
            let body = format!(
                r#"{{"__type":"com.amazonaws.dynamodb.v20120810#{code}","message":"{message}"}}"#
            );
            classify(status, None, body.as_bytes())
        };
        let kms = "KMS key access denied error: com.amazonaws.services.kms.model.AWSKMSException: \
                   The ciphertext refers to a customer master key that does not exist, does not \
                   exist in this region, or you are not allowed to access.";
        let cases = [
            (
                400,
                "AccessDeniedException",
                "User: arn:aws:sts::1:assumed-role/r/f is not authorized to perform: dynamodb:PutItem on resource: arn:aws:dynamodb:us-east-1:1:table/AuditMessages because no identity-based policy allows the dynamodb:PutItem action",
            ),
            (
                400,
                "AccessDeniedException",
                "... with an explicit deny in a service control policy",
            ),
            (
                400,
                "AccessDeniedException",
                "... because no VPC endpoint policy allows the dynamodb:PutItem action",
            ),
            (400, "AccessDeniedException", kms),
            (400, "AccessDenied", "Access Denied"),
            (403, "NotAuthorized", "not authorized"),
            (400, "KMSAccessDeniedException", "x"),
            (400, "KMSDisabledException", "x"),
            (400, "KMSInvalidStateException", "x"),
            (400, "KMSNotFoundException", "x"),
        ];
        for (status, code, message) in cases {
            let verdict = classify_code(status, code, message);
            let Failure::Error(error) = verdict.failure else {
                panic!("{code} is not a condition failure");
            };
            assert!(
                matches!(error, StoreError::AccessDenied(_)),
                "{code}: {error:?}"
            );
            assert_eq!(error.reason(), audit_model::Reason::AccessDenied);
            assert!(!error.is_retryable(), "{code} is not hammered");
            assert!(error.reason().is_transient(), "{code} drains once fixed");
            assert!(!verdict.credentials_refused, "{code} keeps the credentials");
        }
        // A bare 403 (no error code) says the same.
        assert!(matches!(
            classify(403, None, b"<html>Forbidden</html>").failure,
            Failure::Error(StoreError::AccessDenied(why)) if why == "HTTP 403"
        ));
        // Refused credentials stay what they were: retryable, fetched again.
        for code in CREDENTIALS_REFUSED {
            let verdict = classify_code(400, code, "x");
            assert!(verdict.credentials_refused, "{code}");
            assert!(
                matches!(verdict.failure, Failure::Error(e @ StoreError::Unavailable(_)) if e.is_retryable()),
                "{code}"
            );
        }
    }

    #[test]
    fn only_refusals_that_a_skewed_clock_causes_make_the_clock_suspect() {
        let suspect = |code: &str| {
            let body = format!(r#"{{"__type":"x#{code}","message":"m"}}"#);
            classify(400, None, body.as_bytes()).clock_suspect
        };
        for code in [
            "InvalidSignatureException",
            "RequestTimeTooSkewed",
            "AccessDeniedException",
        ] {
            assert!(suspect(code), "{code}");
        }
        for code in [
            "ExpiredTokenException",
            "UnrecognizedClientException",
            "ValidationException",
            "ThrottlingException",
            "ConditionalCheckFailedException",
        ] {
            assert!(!suspect(code), "{code}");
        }
    }
}
