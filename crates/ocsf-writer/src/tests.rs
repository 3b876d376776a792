//! The writer over the in-memory bucket (`audit_aws::s3::MemoryBucket`, which refuses a second
//! create of a key as S3's 412 does): objects per class, names from the batch, a retried batch
//! writes no record twice, a failure fails the whole batch.

use audit_aws::s3::MemoryBucket;
use audit_aws::s3::memory::{Effect, Fault, Operation};
use serde_json::{Value, json};

use super::*;

const QUEUE: &str = "arn:aws:sqs:us-east-1:123456789012:AuditQueue";

/// A stream INSERT of a receiver item with `action`, at second `second` of 2026-11-22T10:00.
fn insert(sequence: u64, action: &str, second: u32) -> Value {
    json!({
        "eventID": format!("e{sequence}"),
        "eventName": "INSERT",
        "dynamodb": {
            "SequenceNumber": sequence.to_string(),
            "NewImage": {
                "messageId": {"S": format!("m{sequence}")},
                "auditTime": {"S": format!("2026-11-22T10:00:{second:02}.000Z")},
                "action": {"S": action},
                "actor": {"S": "alice"},
                "eventSource": {"S": QUEUE},
            },
        },
    })
}

fn modify(sequence: u64) -> Value {
    json!({"eventID": "x", "eventName": "MODIFY", "dynamodb": {"SequenceNumber": sequence.to_string()}})
}

const DAY: &str = "ext/audit-receiver/region=us-east-1/accountId=123456789012/eventDay=20261122";

fn key(class: u32, sequence: u64) -> String {
    format!("{DAY}/{class}-{sequence:040}.zstd.parquet")
}

#[tokio::test]
async fn a_batch_gives_one_object_per_class_named_by_its_first_record() {
    let bucket = MemoryBucket::new();
    let batch = [
        insert(101, "invoice.create", 3),
        insert(102, "login", 1),
        modify(103),
        insert(104, "invoice.delete", 2),
    ];
    let outcome = write_batch(&bucket, DEFAULT_SOURCE, &batch).await;
    assert_eq!(outcome.failure, None);
    assert_eq!((outcome.records, outcome.skipped), (3, 1));
    assert_eq!(bucket.keys("ext/"), vec![key(3002, 102), key(6003, 101)]);
    let api = bucket.current(&key(6003, 101)).expect("written");
    assert!(api.body.starts_with(b"PAR1"));
    assert!(outcome.response().batch_item_failures.is_empty());
}

#[tokio::test]
async fn a_retried_batch_writes_the_same_keys_and_no_record_twice() {
    let bucket = MemoryBucket::new();
    let batch = [insert(7, "invoice.create", 1), insert(9, "login", 2)];
    let first = write_batch(&bucket, DEFAULT_SOURCE, &batch).await;
    let again = write_batch(&bucket, DEFAULT_SOURCE, &batch).await;
    assert_eq!(again.failure, None);
    assert_eq!(again.written, Vec::<String>::new());
    assert_eq!(again.found, first.written);
    for key in &first.written {
        assert_eq!(bucket.versions(key).len(), 1);
    }
}

#[tokio::test]
async fn a_retry_that_reads_further_writes_only_the_records_after_the_former_object() {
    let bucket = MemoryBucket::new();
    let short = [
        insert(7, "invoice.create", 1),
        insert(8, "invoice.update", 2),
    ];
    write_batch(&bucket, DEFAULT_SOURCE, &short).await;
    let long = [
        insert(7, "invoice.create", 1),
        insert(8, "invoice.update", 2),
        insert(12, "invoice.delete", 3),
    ];
    let outcome = write_batch(&bucket, DEFAULT_SOURCE, &long).await;
    assert_eq!(outcome.failure, None);
    assert_eq!(outcome.found, vec![key(6003, 7)]);
    assert_eq!(outcome.written, vec![key(6003, 12)]);
    assert_eq!(outcome.records, 3);
    let second = bucket.current(&key(6003, 12)).expect("the rest");
    assert_eq!(
        bucket.keys("ext/"),
        vec![key(6003, 7), key(6003, 12)],
        "{} bytes",
        second.body.len()
    );
    // A shorter retry (fewer records read) finds everything written.
    let shorter = write_batch(&bucket, DEFAULT_SOURCE, &short[..1]).await;
    assert_eq!((shorter.failure, shorter.records), (None, 1));
    assert_eq!(bucket.keys("ext/").len(), 2);
}

#[tokio::test]
async fn a_failed_put_fails_every_record_of_the_batch() {
    let bucket = MemoryBucket::new();
    bucket.inject(Fault {
        operation: Operation::Put,
        prefix: format!("{DAY}/6003-"),
        times: None,
        effect: Effect::Fail(AwsError::from_answer(500, "InternalError", "injected")),
    });
    let batch = [insert(7, "invoice.create", 1), insert(9, "login", 2)];
    let outcome = write_batch(&bucket, DEFAULT_SOURCE, &batch).await;
    assert!(outcome.failure.is_some());
    let failed: Vec<_> = outcome
        .response()
        .batch_item_failures
        .into_iter()
        .map(|f| f.item_identifier.unwrap_or_default())
        .collect();
    assert_eq!(failed, vec!["7", "9"]);
    // The retry (the fault healed) writes the class that failed, finds the other.
    bucket.heal();
    let retry = write_batch(&bucket, DEFAULT_SOURCE, &batch).await;
    assert_eq!(retry.failure, None);
    assert_eq!(retry.found, vec![key(3002, 9)]);
    assert_eq!(retry.written, vec![key(6003, 7)]);
}

#[tokio::test]
async fn a_record_without_a_sequence_number_fails_the_batch() {
    let bucket = MemoryBucket::new();
    let outcome = write_batch(&bucket, DEFAULT_SOURCE, &[json!({"eventName": "INSERT"})]).await;
    assert!(outcome.failure.expect("failed").contains("SequenceNumber"));
    assert!(bucket.keys("").is_empty());
}
