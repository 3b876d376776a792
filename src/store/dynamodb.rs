//! Owns the DynamoDB adapter: `AuditItem` <-> attributes, the conditional `PutItem` with
//! ALL_OLD, and the mapping of SDK errors to `StoreError`. Must not know SQS or batching.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::describe_table::DescribeTableError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use serde_json::Value;

use super::{AuditStore, PutOutcome, StoreError};
use crate::message::{AuditItem, Decimal};

/// The table's partition key.
pub const PARTITION_KEY: &str = "messageId";
/// The table's sort key.
pub const SORT_KEY: &str = "auditTime";
/// The hash key of the `byAuditTime` index (its range key is `auditTime`).
pub const AUDIT_BUCKET: &str = "auditBucket";
/// The global secondary index that reads the trail in time order.
pub const TIME_INDEX: &str = "byAuditTime";
/// DynamoDB's item size limit (400 KB).
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

const CONDITION: &str = "attribute_not_exists(#pk)";

/// Writes audit items to one table, never overwriting.
#[derive(Debug, Clone)]
pub struct DynamoDbStore {
    client: Client,
    table: String,
}

impl DynamoDbStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// The SDK configuration the function's clients share, loaded once: credentials, region and
    /// `AWS_ENDPOINT_URL` from the SDK's standard sources; no SDK retries, since the batch retries
    /// within the invocation's deadline (the dead-letter client sets its own); a short connect
    /// timeout so that a dead endpoint fails fast and is retried.
    pub async fn sdk_config_from_env() -> aws_config::SdkConfig {
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(1))
                    .build(),
            )
            .load()
            .await
    }

    pub fn client_from_conf(config: &aws_config::SdkConfig) -> Client {
        Client::new(config)
    }

    /// Runs during init, so that the first batch after a cold start does not pay TCP/TLS set-up:
    /// `connections` concurrent `DescribeTable` calls (a read-only metadata action) leave that many
    /// open connections in the client's pool. Also finds a missing table at start-up. Bounded by
    /// `within`. Returns how many calls succeeded, or the first error.
    pub async fn warm_up(&self, connections: usize, within: Duration) -> Result<usize, StoreError> {
        let calls = (0..connections.max(1))
            .map(|_| self.client.describe_table().table_name(&self.table).send());
        let results = tokio::time::timeout(within, futures::future::join_all(calls))
            .await
            .map_err(|_| {
                StoreError::Unavailable(format!("no answer within {} ms", within.as_millis()))
            })?;
        let opened = results.len();
        match results.into_iter().find_map(Result::err) {
            None => Ok(opened),
            Some(error) => Err(match error.into_service_error() {
                DescribeTableError::ResourceNotFoundException(e) => {
                    StoreError::TableNotFound(e.to_string())
                }
                other => StoreError::Rejected(other.to_string()),
            }),
        }
    }
}

impl AuditStore for DynamoDbStore {
    async fn put_if_absent(&self, item: &AuditItem) -> Result<PutOutcome, StoreError> {
        let DynamoItem(attributes) = DynamoItem::try_from(item)?;
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(attributes))
            .condition_expression(CONDITION)
            .expression_attribute_names("#pk", PARTITION_KEY)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => Ok(PutOutcome::Written),
            Err(error) => match classify(error) {
                Failure::Exists(Some(old)) => Ok(compare_payload(item, &old)),
                Failure::Exists(None) => Err(StoreError::Unverifiable),
                Failure::Error(error) => Err(error),
            },
        }
    }
}

/// An item as DynamoDB attributes, known to fit DynamoDB's item size limit.
#[derive(Debug, Clone, PartialEq)]
pub struct DynamoItem(pub HashMap<String, AttributeValue>);

impl TryFrom<&AuditItem> for DynamoItem {
    type Error = StoreError;

    fn try_from(item: &AuditItem) -> Result<Self, StoreError> {
        let mut attributes = HashMap::with_capacity(10);
        let mut put = |name: &str, value: AttributeValue| {
            attributes.insert(name.to_owned(), value);
        };
        put(PARTITION_KEY, AttributeValue::S(item.message_id.clone()));
        put(SORT_KEY, AttributeValue::S(item.audit_time.clone()));
        put(AUDIT_BUCKET, AttributeValue::S(item.audit_bucket.clone()));
        put("auditText", AttributeValue::S(item.audit_text.clone()));
        put(
            "sqsMessageId",
            AttributeValue::S(item.sqs_message_id.clone()),
        );
        put("receivedAt", AttributeValue::S(item.received_at.clone()));
        if let Some(sent_at) = &item.sent_at {
            put("sentAt", AttributeValue::S(sent_at.clone()));
        }
        if let Some(count) = item.receive_count {
            put("receiveCount", AttributeValue::N(count.to_string()));
        }
        if let Some(source) = &item.event_source {
            put("eventSource", AttributeValue::S(source.clone()));
        }
        if !item.extra.is_empty() {
            put("extra", extra_attribute(&item.extra));
        }
        if let Some(expires_at) = item.expires_at {
            put("expiresAt", AttributeValue::N(expires_at.to_string()));
        }

        let size = item_size(&attributes);
        if size > MAX_ITEM_BYTES {
            return Err(StoreError::ItemTooLarge(size));
        }
        Ok(Self(attributes))
    }
}

/// The body's other fields as one map attribute.
pub fn extra_attribute(extra: &serde_json::Map<String, Value>) -> AttributeValue {
    AttributeValue::M(
        extra
            .iter()
            .map(|(k, v)| (k.clone(), json_attribute(v)))
            .collect(),
    )
}

/// JSON -> DynamoDB types. Written by hand rather than with serde_dynamo because numbers must
/// keep the producer's exact digits (serde_json's arbitrary_precision text), where serde_dynamo
/// would round anything beyond i64/u64 through f64.
fn json_attribute(value: &Value) -> AttributeValue {
    match value {
        Value::Null => AttributeValue::Null(true),
        Value::Bool(b) => AttributeValue::Bool(*b),
        Value::Number(n) => AttributeValue::N(n.to_string()),
        Value::String(s) => AttributeValue::S(s.clone()),
        Value::Array(values) => AttributeValue::L(values.iter().map(json_attribute).collect()),
        Value::Object(map) => AttributeValue::M(
            map.iter()
                .map(|(k, v)| (k.clone(), json_attribute(v)))
                .collect(),
        ),
    }
}

/// Same payload (`auditText` and `extra`) means a duplicate delivery; anything else is a conflict.
fn compare_payload(item: &AuditItem, old: &HashMap<String, AttributeValue>) -> PutOutcome {
    let same_text =
        matches!(old.get("auditText"), Some(AttributeValue::S(text)) if *text == item.audit_text);
    let same_extra = match (old.get("extra"), item.extra.is_empty()) {
        (None, true) => true,
        (Some(stored), false) => same_value(stored, &extra_attribute(&item.extra)),
        _ => false,
    };
    if same_text && same_extra {
        PutOutcome::Duplicate
    } else {
        PutOutcome::Conflict
    }
}

/// Structural equality where numbers compare by value: DynamoDB returns `1` for a stored `1.0`.
fn same_value(a: &AttributeValue, b: &AttributeValue) -> bool {
    match (a, b) {
        (AttributeValue::N(x), AttributeValue::N(y)) => {
            x == y || matches!((Decimal::parse(x), Decimal::parse(y)), (Some(p), Some(q)) if p == q)
        }
        (AttributeValue::L(x), AttributeValue::L(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q))
        }
        (AttributeValue::M(x), AttributeValue::M(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, p)| y.get(k).is_some_and(|q| same_value(p, q)))
        }
        _ => a == b,
    }
}

/// DynamoDB's item size: attribute names plus values, by the rules AWS documents (strings by
/// UTF-8 length, numbers about one byte per two significant digits plus one, 3 bytes of overhead
/// and 1 per element for lists and maps). Hand-written: no crate computes it.
pub fn item_size(attributes: &HashMap<String, AttributeValue>) -> usize {
    attributes
        .iter()
        .map(|(name, value)| name.len() + value_size(value))
        .sum()
}

fn value_size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::L(values) => 3 + values.iter().map(|v| 1 + value_size(v)).sum::<usize>(),
        AttributeValue::M(map) => {
            3 + map
                .iter()
                .map(|(k, v)| 1 + k.len() + value_size(v))
                .sum::<usize>()
        }
        AttributeValue::Ss(set) => set.iter().map(String::len).sum(),
        AttributeValue::Ns(set) => set.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(set) => set.iter().map(|b| b.as_ref().len()).sum(),
        _ => 0,
    }
}

fn number_size(text: &str) -> usize {
    let digits = Decimal::parse(text).map_or(text.len(), |d| d.digits.len());
    digits.div_ceil(2) + 1
}

enum Failure {
    /// The condition failed: an item with this key exists (with its attributes, if returned).
    Exists(Option<HashMap<String, AttributeValue>>),
    Error(StoreError),
}

/// SDK error -> what the batch needs to know: exists, retryable, or final.
fn classify(error: SdkError<PutItemError>) -> Failure {
    let status = error.raw_response().map(|r| r.status().as_u16());
    let error = match error {
        SdkError::ServiceError(context) => context.into_err(),
        SdkError::TimeoutError(_) => {
            return Failure::Error(StoreError::Unavailable("the request timed out".into()));
        }
        SdkError::DispatchFailure(failure) => {
            let what = if failure.is_timeout() {
                "connect timed out"
            } else if failure.is_io() {
                "connection failed"
            } else {
                "the request could not be sent"
            };
            return Failure::Error(StoreError::Unavailable(what.into()));
        }
        SdkError::ResponseError(_) => {
            return Failure::Error(StoreError::Unavailable(
                "the response was lost or could not be read".into(),
            ));
        }
        other => return Failure::Error(StoreError::Rejected(other.to_string())),
    };
    let message = error.message().unwrap_or_default().to_owned();
    let code = error.code().unwrap_or_default().to_owned();
    Failure::Error(match error {
        PutItemError::ConditionalCheckFailedException(failed) => {
            return Failure::Exists(failed.item);
        }
        PutItemError::ProvisionedThroughputExceededException(_)
        | PutItemError::RequestLimitExceeded(_)
        | PutItemError::ThrottlingException(_) => StoreError::Throttled(code),
        PutItemError::InternalServerError(_) => StoreError::Unavailable(code),
        PutItemError::ResourceNotFoundException(_) => StoreError::TableNotFound(message),
        _ if code.contains("Throttl") || code == "LimitExceededException" => {
            StoreError::Throttled(code)
        }
        _ if status.is_some_and(|s| s >= 500) || code == "ServiceUnavailable" => {
            StoreError::Unavailable(format!("HTTP {} {code}", status.unwrap_or_default()))
        }
        _ if code == "ValidationException" && message.contains("Item size") => {
            StoreError::ItemTooLarge(MAX_ITEM_BYTES + 1)
        }
        _ => StoreError::Rejected(if message.is_empty() {
            code
        } else {
            format!("{code}: {message}")
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{AuditMessage, Delivery, parse_audit_time};

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

    #[test]
    fn item_maps_to_every_attribute_of_the_layout() {
        let DynamoItem(attrs) = DynamoItem::try_from(&item(
            r#"{"auditText":"login","auditTime":"2026-11-22T12:00:00+02:00","actor":{"id":7,"tags":["a",true,null]},"amount":12.50}"#,
        ))
        .unwrap();
        let s = |name: &str| attrs.get(name).and_then(|v| v.as_s().ok()).cloned();
        assert_eq!(s("messageId").as_deref(), Some("sqs-1"));
        assert_eq!(s("auditTime").as_deref(), Some("2026-11-22T10:00:00.000Z"));
        assert_eq!(s("auditText").as_deref(), Some("login"));
        assert_eq!(s("auditBucket").as_deref(), Some("2026-11-22#24"));
        assert_eq!(s("sqsMessageId").as_deref(), Some("sqs-1"));
        assert_eq!(s("sentAt").as_deref(), Some("2026-11-22T10:00:00.000Z"));
        assert_eq!(s("receivedAt").as_deref(), Some("2026-11-22T10:00:01.000Z"));
        assert_eq!(attrs["receiveCount"], AttributeValue::N("1".into()));
        assert_eq!(
            attrs["expiresAt"],
            AttributeValue::N((1_795_341_600i64 + 30 * 86_400).to_string())
        );
        let extra = attrs["extra"].as_m().unwrap();
        assert_eq!(extra["amount"], AttributeValue::N("12.50".into()));
        let actor = extra["actor"].as_m().unwrap();
        assert_eq!(actor["id"], AttributeValue::N("7".into()));
        assert_eq!(
            actor["tags"],
            AttributeValue::L(vec![
                AttributeValue::S("a".into()),
                AttributeValue::Bool(true),
                AttributeValue::Null(true)
            ])
        );
    }

    #[test]
    fn extra_is_absent_when_the_body_has_no_other_fields() {
        let DynamoItem(attrs) = DynamoItem::try_from(&item(
            r#"{"auditText":"x","auditTime":"2026-11-22T10:00:00Z"}"#,
        ))
        .unwrap();
        assert!(!attrs.contains_key("extra"));
    }

    #[test]
    fn an_item_over_400_kb_is_refused_before_any_call() {
        let body = format!(
            r#"{{"auditText":"{}","auditTime":"2026-11-22T10:00:00Z"}}"#,
            "x".repeat(MAX_ITEM_BYTES)
        );
        assert!(
            matches!(DynamoItem::try_from(&item(&body)), Err(StoreError::ItemTooLarge(n)) if n > MAX_ITEM_BYTES)
        );
        let body = format!(
            r#"{{"auditText":"{}","auditTime":"2026-11-22T10:00:00Z"}}"#,
            "x".repeat(MAX_ITEM_BYTES - 400)
        );
        assert!(DynamoItem::try_from(&item(&body)).is_ok());
    }

    #[test]
    fn numbers_compare_by_value() {
        for (a, b) in [
            ("1", "1.0"),
            ("100", "1e2"),
            ("0.5", "5E-1"),
            ("-0", "0"),
            ("12.50", "12.5"),
            ("007", "7"),
        ] {
            assert!(
                same_value(&AttributeValue::N(a.into()), &AttributeValue::N(b.into())),
                "{a} == {b}"
            );
        }
        for (a, b) in [("1", "2"), ("1", "-1"), ("10", "1"), ("0.1", "0.01")] {
            assert!(
                !same_value(&AttributeValue::N(a.into()), &AttributeValue::N(b.into())),
                "{a} != {b}"
            );
        }
    }

    #[test]
    fn same_payload_is_a_duplicate_and_other_payload_a_conflict() {
        let new = item(r#"{"auditText":"x","auditTime":"2026-11-22T10:00:00Z","n":1.0}"#);
        let DynamoItem(mut stored) = DynamoItem::try_from(&new).unwrap();
        // DynamoDB normalises numbers and the delivery metadata differs: still a duplicate.
        stored.insert(
            "extra".into(),
            AttributeValue::M([("n".to_owned(), AttributeValue::N("1".into()))].into()),
        );
        stored.insert(
            "sqsMessageId".into(),
            AttributeValue::S("another-delivery".into()),
        );
        assert_eq!(compare_payload(&new, &stored), PutOutcome::Duplicate);

        stored.insert("auditText".into(), AttributeValue::S("y".into()));
        assert_eq!(compare_payload(&new, &stored), PutOutcome::Conflict);

        let plain = item(r#"{"auditText":"x","auditTime":"2026-11-22T10:00:00Z"}"#);
        let DynamoItem(stored) = DynamoItem::try_from(&new).unwrap();
        assert_eq!(
            compare_payload(&plain, &stored),
            PutOutcome::Conflict,
            "extra only on one side"
        );
    }
}
