//! Test harness of the archiver: DynamoDB stream records shaped as Lambda delivers them (INSERT,
//! MODIFY, a user's REMOVE, a TTL REMOVE), events, and the archive read back (objects
//! decompressed into lines), a batch archived in the in-memory bucket; the sealer's fixtures in
//! `seal`.
#![allow(dead_code)] // each test binary uses a different part of the harness

pub mod seal;

use std::io::Read;

use audit_archiver::batch::{Ports, Settings, archive_batch};
use audit_archiver::budget::Budget;
use audit_archiver::clock::ManualClock;
use audit_archiver::event::{StreamEvent, read_records};
use audit_archiver::report::BatchReport;
use audit_aws::error::{AwsError, ErrorKind};
use audit_aws::s3::memory::{Effect, Fault, MemoryBucket, Operation};
use aws_lambda_events::streams::DynamoDbEventResponse;
use chrono::{DateTime, Utc};
use flate2::read::GzDecoder;
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{Map, Value, json};

pub const STREAM_ARN: &str =
    "arn:aws:dynamodb:us-east-1:123456789012:table/AuditMessages/stream/2026-11-22T00:00:00.000";

/// A time of the tests, written in RFC 3339.
pub fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("RFC 3339")
        .with_timezone(&Utc)
}

/// The batch tests' clock: 10:15 on the day of the items.
pub const TEN: &str = "2026-11-22T10:15:00Z";

/// The stream's eventID of record `seq` (a stable stand-in for DynamoDB's hexadecimal ids).
pub fn event_id(seq: u64) -> String {
    format!("{:032x}", seq.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// The sequence number of record `seq`, as long as DynamoDB's.
pub fn sequence_number(seq: u64) -> String {
    format!(
        "{}",
        4_421_584_500_000_000_017_000_000_000u128 + u128::from(seq)
    )
}

/// The item the receiver writes for message `id`, in DynamoDB's JSON.
pub fn item(id: &str) -> Map<String, Value> {
    let value = json!({
        "messageId": {"S": id},
        "auditTime": {"S": "2026-11-22T10:00:00.000Z"},
        "auditBucket": {"S": "2026-11-22#07"},
        "auditText": {"S": format!("user alice read invoice 4711 ({id})")},
        "actor": {"S": "alice"},
        "action": {"S": "invoice.read"},
        "resource": {"S": "invoice/4711"},
        "outcome": {"S": "success"},
        "sourceIp": {"S": "2001:db8::1"},
        "receiveCount": {"N": "1"},
        "sqsMessageId": {"S": format!("sqs-{id}")},
        "extra": {"M": {"amount": {"N": "12.50"}, "big": {"N": "123456789012345678901234567890"}}}
    });
    value.as_object().cloned().unwrap_or_default()
}

fn keys(id: &str) -> Value {
    json!({"messageId": {"S": id}, "auditTime": {"S": "2026-11-22T10:00:00.000Z"}})
}

fn record(seq: u64, event_name: &str, dynamodb: Value) -> Value {
    let mut dynamodb = dynamodb;
    dynamodb["ApproximateCreationDateTime"] = json!(1_795_341_600);
    dynamodb["SequenceNumber"] = json!(sequence_number(seq));
    dynamodb["SizeBytes"] = json!(300);
    dynamodb["StreamViewType"] = json!("NEW_AND_OLD_IMAGES");
    json!({
        "eventID": event_id(seq),
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": dynamodb,
        "eventSourceARN": STREAM_ARN
    })
}

/// An INSERT of message `id` with the item `new_image`.
pub fn insert_of(seq: u64, id: &str, new_image: Map<String, Value>) -> Value {
    record(
        seq,
        "INSERT",
        json!({"Keys": keys(id), "NewImage": Value::Object(new_image)}),
    )
}

/// The receiver's INSERT of message `m-<seq>`.
pub fn insert(seq: u64) -> Value {
    let id = format!("m-{seq}");
    insert_of(seq, &id, item(&id))
}

/// Someone's UpdateItem of message `id`: auditText rewritten.
pub fn modify(seq: u64, id: &str) -> Value {
    let mut new_image = item(id);
    new_image.insert("auditText".into(), json!({"S": "nothing happened"}));
    record(
        seq,
        "MODIFY",
        json!({"Keys": keys(id), "OldImage": Value::Object(item(id)), "NewImage": Value::Object(new_image)}),
    )
}

/// Someone's DeleteItem of message `id` (no userIdentity).
pub fn user_remove(seq: u64, id: &str) -> Value {
    record(
        seq,
        "REMOVE",
        json!({"Keys": keys(id), "OldImage": Value::Object(item(id))}),
    )
}

/// DynamoDB's TTL deletion of message `id`.
pub fn ttl_remove(seq: u64, id: &str) -> Value {
    let mut value = user_remove(seq, id);
    value["userIdentity"] = json!({"type": "Service", "principalId": "dynamodb.amazonaws.com"});
    value
}

/// Inserts of records `seqs`.
pub fn inserts(seqs: std::ops::Range<u64>) -> Vec<Value> {
    seqs.map(insert).collect()
}

/// Archives `records` as one batch into `bucket` (default settings, no deadline), returning what
/// happened.
pub async fn archive(
    bucket: &MemoryBucket,
    clock: &ManualClock,
    records: Vec<Value>,
) -> BatchReport {
    archive_within(bucket, clock, records, Budget::unlimited()).await
}

/// The same within `budget` (the invocation's deadline and margin).
pub async fn archive_within(
    bucket: &MemoryBucket,
    clock: &ManualClock,
    records: Vec<Value>,
    budget: Budget,
) -> BatchReport {
    let reads = read_records(StreamEvent { records });
    archive_batch(
        Ports { bucket, clock },
        &Settings::default(),
        &reads,
        budget,
    )
    .await
}

/// S3 not answering within the archiver's bound.
pub fn timed_out() -> AwsError {
    AwsError::without_answer(ErrorKind::TimedOut, "the request timed out")
}

/// The next PUT under `prefix` times out, writing nothing.
pub fn time_out_next_put(bucket: &MemoryBucket, prefix: &str) {
    bucket.inject(Fault {
        operation: Operation::Put,
        prefix: prefix.into(),
        times: Some(1),
        effect: Effect::Fail(timed_out()),
    });
}

/// An event of `records` with a default context (no deadline).
pub fn event(records: Vec<Value>) -> LambdaEvent<StreamEvent> {
    LambdaEvent::new(StreamEvent { records }, Context::default())
}

/// The reported sequence numbers, in order.
pub fn failed(response: &DynamoDbEventResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .filter_map(|f| f.item_identifier.clone())
        .collect()
}

/// A gzip body's lines.
pub fn gunzip_lines(body: &[u8]) -> Vec<String> {
    let mut text = String::new();
    GzDecoder::new(body)
        .read_to_string(&mut text)
        .expect("a gzip body of UTF-8 text");
    assert!(text.is_empty() || text.ends_with('\n'), "every line ends");
    text.lines().map(str::to_owned).collect()
}

/// Every line of every object under `prefix`, objects in key order.
pub fn lines(bucket: &MemoryBucket, prefix: &str) -> Vec<String> {
    bucket
        .keys(prefix)
        .iter()
        .filter_map(|key| bucket.current(key))
        .flat_map(|version| gunzip_lines(&version.body))
        .collect()
}

/// The `messageId` of every trail line, sorted.
pub fn archived_ids(bucket: &MemoryBucket) -> Vec<String> {
    let mut ids: Vec<String> = lines(bucket, "trail/")
        .iter()
        .map(|line| {
            let value: Value = serde_json::from_str(line).expect("a JSON line");
            value["messageId"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    ids.sort();
    ids
}

/// `m-<seq>` for each seq, sorted as text.
pub fn ids(seqs: impl IntoIterator<Item = u64>) -> Vec<String> {
    let mut ids: Vec<String> = seqs.into_iter().map(|s| format!("m-{s}")).collect();
    ids.sort();
    ids
}
