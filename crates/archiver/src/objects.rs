//! Owns turning the records still to archive into objects: one trail object for the INSERTs and
//! one tamper object for the MODIFY and user REMOVE records, each in stream order, compressed and
//! hashed, with the key of the hour and period they are written in. Must not know the bucket.

use audit_model::archive::{MARKER_METADATA, ObjectKey, ObjectKind, PeriodLength};
use aws_lc_rs::digest::{SHA256, digest};
use bytes::Bytes;
use chrono::{DateTime, Utc};

use crate::encode::{gzip_lines, tamper_line, trail_line};
use crate::event::{Change, Disposition, StreamRecord};
use audit_aws::s3::NewObject;

/// The content type of an archive object (gzip-compressed JSON lines; no Content-Encoding, so
/// that readers get the `.jsonl.gz` bytes that the digests hash).
pub const CONTENT_TYPE: &str = "application/gzip";

/// An object's body, ready to be named and written.
#[derive(Debug, Clone)]
pub struct Encoded {
    pub kind: ObjectKind,
    /// Its events' sequence numbers (first and last) and eventIDs, in stream order.
    pub first_sequence: String,
    pub last_sequence: String,
    pub event_ids: Vec<String>,
    pub body: Bytes,
    pub sha256: [u8; 32],
}

impl Encoded {
    /// The key this object gets when written at `at` by attempt `attempt`.
    pub fn key(&self, at: DateTime<Utc>, period: PeriodLength, attempt: u32) -> Option<String> {
        ObjectKey::new(self.kind, at, period, &self.first_sequence, attempt)
            .map(|key| key.to_string())
    }

    /// The request that creates it under `key`, naming `marker`, the run marker written just
    /// before it that lists it with its SHA-256.
    pub fn request(&self, key: String, marker: &str) -> NewObject {
        NewObject {
            key,
            body: self.body.clone(),
            content_type: CONTENT_TYPE,
            sha256: self.sha256,
            metadata: vec![
                ("events", self.event_ids.len().to_string()),
                ("first-sequence-number", self.first_sequence.clone()),
                ("last-sequence-number", self.last_sequence.clone()),
                (MARKER_METADATA, marker.to_owned()),
            ],
        }
    }
}

/// The line `record` has in its object, or `None` for a TTL deletion (never archived).
pub fn line(record: &StreamRecord) -> Option<String> {
    match (record.disposition(), &record.change) {
        (Disposition::Expired, _) => None,
        (Disposition::Trail, Change::Insert { new_image }) => Some(trail_line(new_image)),
        _ => Some(tamper_line(record)),
    }
}

/// The objects for `records` (those already archived and TTL deletions left out by the caller):
/// a trail object when there are INSERTs, a tamper object when there are tamper events.
pub fn encode(records: &[&StreamRecord]) -> std::io::Result<Vec<Encoded>> {
    let mut out = Vec::with_capacity(2);
    for kind in [ObjectKind::Trail, ObjectKind::Tamper] {
        let of_kind: Vec<&StreamRecord> = records
            .iter()
            .copied()
            .filter(|r| match r.disposition() {
                Disposition::Trail => kind == ObjectKind::Trail,
                Disposition::Tamper => kind == ObjectKind::Tamper,
                Disposition::Expired => false,
            })
            .collect();
        let (Some(first), Some(last)) = (of_kind.first(), of_kind.last()) else {
            continue;
        };
        let lines: Vec<String> = of_kind.iter().filter_map(|record| line(record)).collect();
        let body = gzip_lines(lines.iter().map(String::as_str))?;
        let mut sha256 = [0u8; 32];
        sha256.copy_from_slice(digest(&SHA256, &body).as_ref());
        out.push(Encoded {
            kind,
            first_sequence: first.sequence_number.clone(),
            last_sequence: last.sequence_number.clone(),
            event_ids: of_kind.iter().map(|r| r.event_id.clone()).collect(),
            body: Bytes::from(body),
            sha256,
        });
    }
    Ok(out)
}
