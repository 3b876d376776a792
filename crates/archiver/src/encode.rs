//! Owns the bytes of an archive object: one JSON line per event (a trail event is exactly its
//! item's `item_line`, as `auditctl query --format jsonl` prints it; a tamper event carries both
//! images), gzip-compressed. Must not know keys, buckets or the stream's retries.

use std::io::Write;

use audit_model::line::{item_line, plain_map};
use chrono::SecondsFormat;
use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::{Map, Value};

use crate::event::{Change, Remover, StreamRecord};

/// The line of a trail event: the new image as `auditctl` prints the item.
pub fn trail_line(new_image: &Map<String, Value>) -> String {
    item_line(new_image)
}

/// The line of a tamper event: what changed, when, by whom when the stream says, with the item's
/// key and both images as plain JSON (`null` where the stream carries none). Fields in name order:
/// `approximateCreationDateTime`, `eventID`, `eventName`, `keys`, `newImage`, `oldImage`,
/// `sequenceNumber`, `userIdentity`.
pub fn tamper_line(record: &StreamRecord) -> String {
    let plain = |image: Option<&Map<String, Value>>| match image {
        Some(image) => Value::Object(plain_map(image)),
        None => Value::Null,
    };
    let (old_image, new_image, identity) = match &record.change {
        Change::Insert { new_image } => (None, Some(new_image), None),
        Change::Modify {
            old_image,
            new_image,
        } => (old_image.as_ref(), new_image.as_ref(), None),
        Change::Remove { old_image, by } => (
            old_image.as_ref(),
            None,
            match by {
                Remover::TimeToLive => None,
                Remover::Other(identity) => identity.as_ref(),
            },
        ),
    };
    let mut line = Map::new();
    line.insert(
        "approximateCreationDateTime".into(),
        Value::String(record.created.to_rfc3339_opts(SecondsFormat::Millis, true)),
    );
    line.insert("eventID".into(), Value::String(record.event_id.clone()));
    line.insert(
        "eventName".into(),
        Value::String(record.event_name().into()),
    );
    line.insert("keys".into(), Value::Object(plain_map(&record.keys)));
    line.insert("newImage".into(), plain(new_image));
    line.insert("oldImage".into(), plain(old_image));
    line.insert(
        "sequenceNumber".into(),
        Value::String(record.sequence_number.clone()),
    );
    line.insert(
        "userIdentity".into(),
        identity
            .and_then(|identity| serde_json::to_value(identity).ok())
            .unwrap_or(Value::Null),
    );
    Value::Object(line).to_string()
}

/// Lines joined with `\n` (each line ends with one) and gzip-compressed at flate2's default level.
/// The same lines always give the same bytes (no name, no time in the gzip header).
pub fn gzip_lines<'a>(lines: impl IntoIterator<Item = &'a str>) -> std::io::Result<Vec<u8>> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    for line in lines {
        encoder.write_all(line.as_bytes())?;
        encoder.write_all(b"\n")?;
    }
    encoder.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Identity;
    use chrono::DateTime;
    use flate2::read::GzDecoder;
    use serde_json::json;
    use std::io::Read;

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn gzip_lines_are_deterministic_and_read_back_line_by_line() {
        let a = gzip_lines(["{\"a\":1}", "{\"b\":2}"]).unwrap();
        let b = gzip_lines(["{\"a\":1}", "{\"b\":2}"]).unwrap();
        assert_eq!(a, b);
        let mut text = String::new();
        GzDecoder::new(&a[..]).read_to_string(&mut text).unwrap();
        assert_eq!(text, "{\"a\":1}\n{\"b\":2}\n");
    }

    #[test]
    fn a_tamper_line_has_both_images_the_key_and_the_identity() {
        let record = StreamRecord {
            sequence_number: "200".into(),
            event_id: "e-200".into(),
            created: DateTime::from_timestamp_millis(1_795_341_600_000).unwrap(),
            keys: map(json!({"messageId": {"S": "m-1"}, "auditTime": {"S": "t"}})),
            change: Change::Remove {
                old_image: Some(map(
                    json!({"messageId": {"S": "m-1"}, "auditTime": {"S": "t"}, "n": {"N": "1.0"}}),
                )),
                by: Remover::Other(Some(Identity {
                    kind: "Service".into(),
                    principal_id: "backup.amazonaws.com".into(),
                })),
            },
        };
        assert_eq!(
            tamper_line(&record),
            r#"{"approximateCreationDateTime":"2026-11-22T10:00:00.000Z","eventID":"e-200","eventName":"REMOVE","keys":{"auditTime":"t","messageId":"m-1"},"newImage":null,"oldImage":{"auditTime":"t","messageId":"m-1","n":1.0},"sequenceNumber":"200","userIdentity":{"principalId":"backup.amazonaws.com","type":"Service"}}"#
        );
    }
}
