//! audit-ocsf-writer: the audit table's DynamoDB stream (a second consumer beside the archiver)
//! -> each INSERT as an OCSF 1.3 record, written as zstd Parquet under Security Lake's layout
//! `ext/<source>/region=…/accountId=…/eventDay=…/` (docs/ocsf.md "The stream-fed writer").
//!
//! Each event once in effect: one object per class, region, account and event day of a batch,
//! named by the stream sequence number of its first record, created with `If-None-Match: *`. A
//! retried batch starts at the same record (a failure names the batch's first record), so it
//! gives the same names: a 412 on a name whose object has the same bytes is success; one whose
//! object has other bytes (the retry read more or fewer records) already holds the records up to
//! its `last-sequence-number`, and only those after it are written, under the next one's name.

use std::collections::BTreeMap;

use audit_aws::error::AwsError;
use audit_aws::s3::{Bucket, Created, NewObject};
use audit_model::archive::padded_sequence;
use audit_ocsf::{Record, object_key, streamed, write};
use aws_lambda_events::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use aws_lc_rs::digest::{SHA256, digest};
use bytes::Bytes;
use serde_json::Value;

/// The content type of a Parquet object.
pub const CONTENT_TYPE: &str = "application/vnd.apache.parquet";
/// The custom source's name (the key's second part) when `OCSF_SOURCE` is not set.
pub const DEFAULT_SOURCE: &str = "audit-receiver";

/// One stream record the writer maps: its sequence number (40 digits) and its record.
#[derive(Debug, Clone)]
struct Mapped {
    sequence: String,
    record: Record,
}

/// What one batch did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The stream records of the batch, in order (as given: Lambda's item identifiers).
    pub sequence_numbers: Vec<String>,
    /// Keys created by this invocation.
    pub written: Vec<String>,
    /// Keys that a former try of the batch had already written with the same bytes.
    pub found: Vec<String>,
    /// Records written (or found written).
    pub records: usize,
    /// Stream records that are not the writer's: MODIFY and REMOVE (the archiver's), and an
    /// INSERT whose line gives no record (not an item the receiver writes), each logged.
    pub skipped: usize,
    /// Why the batch failed (it is then retried from its first record).
    pub failure: Option<String>,
}

impl Outcome {
    /// `batchItemFailures`: every record of the batch when it failed (Lambda retries from the
    /// first, so that the retry names its objects as this try did), else none.
    pub fn response(&self) -> DynamoDbEventResponse {
        let mut response = DynamoDbEventResponse::default();
        if self.failure.is_some() {
            response.batch_item_failures = self
                .sequence_numbers
                .iter()
                .map(|sequence_number| {
                    let mut failure = DynamoDbBatchItemFailure::default();
                    failure.item_identifier = Some(sequence_number.clone());
                    failure
                })
                .collect();
        }
        response
    }
}

/// Writes one stream batch's INSERTs (Lambda's `Records`, raw) to `bucket` under `source`.
pub async fn write_batch<B: Bucket>(bucket: &B, source: &str, records: &[Value]) -> Outcome {
    let mut outcome = Outcome::default();
    // One object per class, region, account and event day, records in stream order.
    // (Keyed by the key its objects would have if named by their class alone.)
    let mut groups: BTreeMap<String, Vec<Mapped>> = BTreeMap::new();
    for (index, raw) in records.iter().enumerate() {
        let stream = raw.get("dynamodb");
        let Some(given) = stream
            .and_then(|s| s.get("SequenceNumber"))
            .and_then(Value::as_str)
        else {
            outcome.failure = Some(format!("record {index} has no dynamodb.SequenceNumber"));
            return outcome;
        };
        outcome.sequence_numbers.push(given.to_owned());
        let Some(sequence) = padded_sequence(given) else {
            outcome.failure = Some(format!(
                "record {index}: SequenceNumber {given:?} is not 1 to 40 digits"
            ));
            return outcome;
        };
        if raw.get("eventName").and_then(Value::as_str) != Some("INSERT") {
            outcome.skipped += 1;
            continue;
        }
        let Some(image) = stream
            .and_then(|s| s.get("NewImage"))
            .and_then(Value::as_object)
        else {
            outcome.failure = Some(format!(
                "record {index} is an INSERT without NewImage (the stream must show new images)"
            ));
            return outcome;
        };
        match streamed(&audit_model::line::item_line(image)) {
            Ok(record) => {
                let class = record.class.uid().to_string();
                let group =
                    object_key(source, &record.region, &record.account, record.time, &class);
                groups
                    .entry(group)
                    .or_default()
                    .push(Mapped { sequence, record });
            }
            Err(error) => {
                tracing::error!(%error, sequence_number = given, "an INSERT that gives no OCSF record: not written");
                outcome.skipped += 1;
            }
        }
    }
    for group in groups.into_values() {
        if let Err(failure) = write_group(bucket, source, &group, &mut outcome).await {
            outcome.failure = Some(failure);
            break;
        }
    }
    outcome
}

/// Writes one group's records: under the first's name, and when a former try wrote fewer of
/// them there, the rest under the name of the first it did not write.
async fn write_group<B: Bucket>(
    bucket: &B,
    source: &str,
    group: &[Mapped],
    outcome: &mut Outcome,
) -> Result<(), String> {
    let mut rest = group;
    while let (Some(first), Some(last)) = (rest.first(), rest.last()) {
        let r = &first.record;
        let name = format!("{}-{}", r.class.uid(), first.sequence);
        let key = object_key(source, &r.region, &r.account, r.time, &name);
        let body = encode(rest).map_err(|e| format!("{key}: {e}"))?;
        let object = new_object(key.clone(), body.clone(), first, last, rest.len());
        match bucket
            .put_if_absent(object)
            .await
            .map_err(|e| put_failed(&key, &e))?
        {
            Created::New { .. } => {
                outcome.written.push(key);
                outcome.records += rest.len();
                return Ok(());
            }
            Created::AlreadyExists => {
                let stored = bucket
                    .get(&key)
                    .await
                    .map_err(|e| put_failed(&key, &e))?
                    .ok_or_else(|| format!("{key}: refused as existing, then not found"))?;
                if stored.body == body {
                    outcome.found.push(key);
                    outcome.records += rest.len();
                    return Ok(());
                }
                // A former try's object: it holds this group's records up to its last.
                let held = stored
                    .metadata("last-sequence-number")
                    .and_then(padded_sequence)
                    .ok_or_else(|| format!("{key}: another object without last-sequence-number"))?;
                let after = rest.partition_point(|m| m.sequence <= held);
                if after == 0 {
                    return Err(format!(
                        "{key}: another object that holds none of these records"
                    ));
                }
                outcome.found.push(key);
                outcome.records += after;
                rest = &rest[after..];
            }
        }
    }
    Ok(())
}

fn put_failed(key: &str, error: &AwsError) -> String {
    format!("{key}: {error}")
}

/// The Parquet bytes of a group's records (one class, time order: `audit_ocsf::write`).
fn encode(group: &[Mapped]) -> Result<Vec<u8>, audit_ocsf::WriteError> {
    let mut records: Vec<Record> = group.iter().map(|m| m.record.clone()).collect();
    let mut body = Vec::new();
    write(&mut records, &mut body)?;
    Ok(body)
}

fn new_object(
    key: String,
    body: Vec<u8>,
    first: &Mapped,
    last: &Mapped,
    events: usize,
) -> NewObject {
    let mut sha256 = [0u8; 32];
    sha256.copy_from_slice(digest(&SHA256, &body).as_ref());
    NewObject {
        key,
        body: Bytes::from(body),
        content_type: CONTENT_TYPE,
        sha256,
        metadata: vec![
            ("events", events.to_string()),
            ("first-sequence-number", first.sequence.clone()),
            ("last-sequence-number", last.sequence.clone()),
        ],
    }
}

#[cfg(test)]
mod tests;
