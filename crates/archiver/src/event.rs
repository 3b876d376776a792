//! Owns the stream event: Lambda's DynamoDB stream payload -> one `StreamRecord` (or the reason it
//! cannot be archived) per record, in stream order. Must not know the bucket or the archive layout.
//!
//! Each record is read on its own (aws_lambda_events' `EventRecord`), so that one malformed record
//! fails that record and those after it, never the whole batch unread.

use aws_lambda_events::dynamodb::{EventRecord, UserIdentity};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The payload Lambda sends for a DynamoDB stream batch, records kept raw until each is read.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct StreamEvent {
    #[serde(rename = "Records", default)]
    pub records: Vec<Value>,
}

/// An image or the keys, in DynamoDB's JSON (`{"S": …}`, `{"N": "12.50"}`, binary as base64).
pub type Image = Map<String, Value>;

/// One stream record that can be archived.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamRecord {
    /// The stream's sequence number, as given (Lambda's item identifier for this record).
    pub sequence_number: String,
    /// The stream's globally unique id of this record.
    pub event_id: String,
    /// `ApproximateCreationDateTime`: when the change was made.
    pub created: DateTime<Utc>,
    /// The item's key attributes.
    pub keys: Image,
    pub change: Change,
}

/// What happened to the item.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The writer's only operation: a new item.
    Insert { new_image: Image },
    /// An item was changed in place: tampering.
    Modify {
        old_image: Option<Image>,
        new_image: Option<Image>,
    },
    /// An item was deleted: by DynamoDB's TTL (expected) or by someone (tampering).
    Remove {
        old_image: Option<Image>,
        by: Remover,
    },
}

/// Who removed an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remover {
    /// DynamoDB's time to live: `userIdentity` {type "Service", principalId "dynamodb.amazonaws.com"}.
    TimeToLive,
    /// Anyone else (a user's DeleteItem has no `userIdentity`).
    Other(Option<Identity>),
}

/// A record's `userIdentity`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Identity {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(rename = "principalId")]
    pub principal_id: String,
}

/// What the archiver does with a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Disposition {
    /// Its new image goes to `trail/`.
    Trail,
    /// It is archived with both images under `tamper/` and alarmed.
    Tamper,
    /// A TTL deletion: counted, nothing written.
    Expired,
}

impl StreamRecord {
    pub fn disposition(&self) -> Disposition {
        match &self.change {
            Change::Insert { .. } => Disposition::Trail,
            Change::Modify { .. }
            | Change::Remove {
                by: Remover::Other(_),
                ..
            } => Disposition::Tamper,
            Change::Remove {
                by: Remover::TimeToLive,
                ..
            } => Disposition::Expired,
        }
    }

    /// `INSERT`, `MODIFY` or `REMOVE`.
    pub fn event_name(&self) -> &'static str {
        match self.change {
            Change::Insert { .. } => "INSERT",
            Change::Modify { .. } => "MODIFY",
            Change::Remove { .. } => "REMOVE",
        }
    }
}

/// Why a record cannot be archived.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("the record has no dynamodb.SequenceNumber")]
    MissingSequenceNumber,
    #[error("the record is not a DynamoDB stream record: {0}")]
    Malformed(String),
    #[error("dynamodb.SequenceNumber {0:?} is not 1 to 40 decimal digits")]
    BadSequenceNumber(String),
    #[error("eventID {0:?} is empty or longer than 128 characters")]
    BadEventId(String),
    #[error("unknown eventName {0:?}")]
    UnknownEventName(String),
    #[error("an INSERT without NewImage (the stream must show new images)")]
    MissingNewImage,
}

impl RecordError {
    /// A short code for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingSequenceNumber => "missing_sequence_number",
            Self::Malformed(_) => "malformed_record",
            Self::BadSequenceNumber(_) => "bad_sequence_number",
            Self::BadEventId(_) => "bad_event_id",
            Self::UnknownEventName(_) => "unknown_event_name",
            Self::MissingNewImage => "missing_new_image",
        }
    }
}

/// A record as read: its sequence number when it has one (what Lambda knows it by), and the
/// record or why it cannot be archived.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub sequence_number: Option<String>,
    pub record: Result<StreamRecord, RecordError>,
}

/// Reads every record of the event, in order.
pub fn read_records(event: StreamEvent) -> Vec<Read> {
    event.records.into_iter().map(read_record).collect()
}

/// Reads one raw record. The keys and images are taken out of the raw record as they are
/// (DynamoDB's JSON, as Lambda sent it: numbers as text, binary as base64), so that they are not
/// copied through another representation; the rest is aws_lambda_events' `EventRecord`.
pub fn read_record(mut raw: Value) -> Read {
    let sequence_number = raw
        .pointer("/dynamodb/SequenceNumber")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let Some(sequence_number_text) = &sequence_number else {
        return Read {
            sequence_number,
            record: Err(RecordError::MissingSequenceNumber),
        };
    };
    let (keys, new_image, old_image) = match raw.get_mut("dynamodb").and_then(Value::as_object_mut)
    {
        Some(change) => (
            change.remove("Keys"),
            change.remove("NewImage"),
            change.remove("OldImage"),
        ),
        None => (None, None, None),
    };
    // A microsecond-precision time (aws_lambda_events keeps whole seconds).
    let created = raw
        .pointer("/dynamodb/ApproximateCreationDateTime")
        .and_then(Value::as_f64)
        .and_then(|seconds| DateTime::from_timestamp_micros((seconds * 1e6).round() as i64));
    let record = EventRecord::deserialize(&raw)
        .map_err(|e| RecordError::Malformed(e.to_string()))
        .and_then(|record| {
            let keys = image(keys)?.unwrap_or_default();
            stream_record(
                record,
                sequence_number_text,
                keys,
                image(new_image)?,
                image(old_image)?,
            )
        })
        .map(|mut record| {
            if let Some(created) = created {
                record.created = created;
            }
            record
        });
    Read {
        sequence_number,
        record,
    }
}

fn stream_record(
    record: EventRecord,
    sequence_number: &str,
    keys: Image,
    new_image: Option<Image>,
    old_image: Option<Image>,
) -> Result<StreamRecord, RecordError> {
    if audit_model::archive::padded_sequence(sequence_number).is_none() {
        return Err(RecordError::BadSequenceNumber(sequence_number.to_owned()));
    }
    if record.event_id.is_empty() || record.event_id.len() > 128 {
        return Err(RecordError::BadEventId(record.event_id));
    }
    let change = match record.event_name.as_str() {
        "INSERT" => Change::Insert {
            new_image: new_image.ok_or(RecordError::MissingNewImage)?,
        },
        "MODIFY" => Change::Modify {
            old_image,
            new_image,
        },
        "REMOVE" => Change::Remove {
            old_image,
            by: remover(record.user_identity.as_ref()),
        },
        other => return Err(RecordError::UnknownEventName(other.to_owned())),
    };
    Ok(StreamRecord {
        sequence_number: sequence_number.to_owned(),
        event_id: record.event_id,
        created: record.change.approximate_creation_date_time,
        keys,
        change,
    })
}

/// DynamoDB's type tags.
const TAGS: [&str; 10] = ["S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS"];

/// An image or the keys as DynamoDB's JSON: `None` when absent or empty; every attribute must be
/// one tagged value (`{"S": …}`, `{"N": "…"}` with the number as text, …).
fn image(value: Option<Value>) -> Result<Option<Image>, RecordError> {
    let map = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(map)) if map.is_empty() => return Ok(None),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(RecordError::Malformed("an image is not a map".into())),
    };
    for (name, attribute) in &map {
        let tagged = attribute
            .as_object()
            .filter(|a| a.len() == 1)
            .and_then(|a| a.iter().next())
            .filter(|(tag, inner)| {
                TAGS.contains(&tag.as_str()) && (tag.as_str() != "N" || inner.is_string())
            });
        if tagged.is_none() {
            return Err(RecordError::Malformed(format!(
                "attribute {name:?} is not DynamoDB's JSON"
            )));
        }
    }
    Ok(Some(map))
}

/// DynamoDB's TTL deletions carry this identity; any other REMOVE is someone's.
fn remover(identity: Option<&UserIdentity>) -> Remover {
    match identity {
        Some(id) if id.type_ == "Service" && id.principal_id == "dynamodb.amazonaws.com" => {
            Remover::TimeToLive
        }
        Some(id) => Remover::Other(Some(Identity {
            kind: id.type_.clone(),
            principal_id: id.principal_id.clone(),
        })),
        None => Remover::Other(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(event_name: &str, seq: &str) -> Value {
        json!({
            "eventID": "c81e728d9d4c2f636f067f89cc14862c",
            "eventName": event_name,
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1",
            "dynamodb": {
                "ApproximateCreationDateTime": 1795341600.5,
                "Keys": {"messageId": {"S": "m-1"}, "auditTime": {"S": "2026-11-22T10:00:00.000Z"}},
                "NewImage": {"messageId": {"S": "m-1"}, "auditTime": {"S": "2026-11-22T10:00:00.000Z"},
                             "amount": {"N": "12.50"}, "blob": {"B": "aGk="}},
                "OldImage": {"messageId": {"S": "m-1"}, "auditTime": {"S": "2026-11-22T10:00:00.000Z"}},
                "SequenceNumber": seq,
                "SizeBytes": 120,
                "StreamViewType": "NEW_AND_OLD_IMAGES"
            },
            "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/AuditMessages/stream/2026-11-22T00:00:00.000"
        })
    }

    #[test]
    fn an_insert_keeps_digits_and_base64_of_its_new_image() {
        let read = read_record(raw("INSERT", "100"));
        assert_eq!(read.sequence_number.as_deref(), Some("100"));
        let record = read.record.unwrap();
        assert_eq!(record.disposition(), Disposition::Trail);
        assert_eq!(record.created.timestamp_millis(), 1_795_341_600_500);
        let Change::Insert { new_image } = &record.change else {
            panic!("{record:?}")
        };
        assert_eq!(new_image["amount"], json!({"N": "12.50"}));
        assert_eq!(new_image["blob"], json!({"B": "aGk="}));
    }

    #[test]
    fn a_ttl_removal_is_expired_and_any_other_removal_is_tampering() {
        let mut ttl = raw("REMOVE", "101");
        ttl["userIdentity"] = json!({"type": "Service", "principalId": "dynamodb.amazonaws.com"});
        assert_eq!(
            read_record(ttl).record.unwrap().disposition(),
            Disposition::Expired
        );
        let user = raw("REMOVE", "102");
        assert_eq!(
            read_record(user).record.unwrap().disposition(),
            Disposition::Tamper
        );
        let mut other_service = raw("REMOVE", "103");
        other_service["userIdentity"] =
            json!({"type": "Service", "principalId": "backup.amazonaws.com"});
        assert_eq!(
            read_record(other_service).record.unwrap().disposition(),
            Disposition::Tamper
        );
        assert_eq!(
            read_record(raw("MODIFY", "104"))
                .record
                .unwrap()
                .disposition(),
            Disposition::Tamper
        );
    }

    #[test]
    fn a_record_that_cannot_be_archived_says_why_and_keeps_its_sequence_number() {
        let mut no_image = raw("INSERT", "105");
        no_image["dynamodb"]
            .as_object_mut()
            .unwrap()
            .remove("NewImage");
        assert_eq!(
            read_record(no_image).record,
            Err(RecordError::MissingNewImage)
        );
        let mut no_seq = raw("INSERT", "1");
        no_seq["dynamodb"]
            .as_object_mut()
            .unwrap()
            .remove("SequenceNumber");
        let read = read_record(no_seq);
        assert_eq!(read.sequence_number, None);
        assert_eq!(read.record, Err(RecordError::MissingSequenceNumber));
        let read = read_record(raw("UPSERT", "106"));
        assert_eq!(read.sequence_number.as_deref(), Some("106"));
        assert_eq!(
            read.record,
            Err(RecordError::UnknownEventName("UPSERT".into()))
        );
        assert!(matches!(
            read_record(raw("INSERT", "12x")).record,
            Err(RecordError::BadSequenceNumber(_))
        ));
        let mut broken = raw("INSERT", "107");
        broken["dynamodb"]["NewImage"]["amount"] = json!({"N": 12});
        assert!(matches!(
            read_record(broken).record,
            Err(RecordError::Malformed(_))
        ));
    }
}
