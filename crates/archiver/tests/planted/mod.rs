//! Archive objects and markers put straight into the in-memory bucket: as the archiver writes them
//! (a version-2 marker naming the object with its SHA-256, then the object naming the marker in
//! its metadata `marker`), and as someone else could (no marker, a marker that lists other bytes,
//! a version-1 marker, a void marker). Sealing is tested on these, apart from the batch path.
#![allow(dead_code)] // each test binary uses a different part

use audit_archiver::encode::{gzip_lines, trail_line};
use audit_archiver::marker::{Confirmed, Marker, RunEntry, marker_key};
use audit_aws::s3::memory::MemoryBucket;
use audit_model::archive::{MARKER_METADATA, ObjectKey, ObjectKind, PeriodLength, void_key};
use audit_model::digest::{hex, sha256};
use bytes::Bytes;
use chrono::{DateTime, Utc};

use crate::support::{event_id, item, sequence_number};

/// How a planted object is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marking {
    /// As the archiver marks its own: attested.
    Attested,
    /// No `marker` metadata.
    NoMarker,
    /// Its metadata names a marker that lists the key with another SHA-256.
    OtherBytes,
    /// Its marker is of version 1 (no SHA-256).
    VersionOne,
}

/// An object put into the bucket.
#[derive(Debug, Clone)]
pub struct Planted {
    pub key: String,
    pub version_id: String,
    pub marker: String,
    pub body: Bytes,
    pub lines: Vec<String>,
}

/// The trail lines of records `first..first + count` and their gzip bytes, as the archiver
/// encodes them.
pub fn trail_body(first: u64, count: u64) -> (Vec<String>, Bytes) {
    let lines: Vec<String> = (first..first + count)
        .map(|seq| trail_line(&item(&format!("m-{seq}"))))
        .collect();
    let body = gzip_lines(lines.iter().map(String::as_str)).expect("gzip in memory");
    (lines, Bytes::from(body))
}

/// Records `first..first + count` archived at `at` (attempt 0), marked as `marking` says.
pub fn plant(
    bucket: &MemoryBucket,
    at: DateTime<Utc>,
    length: PeriodLength,
    first: u64,
    count: u64,
    marking: Marking,
) -> Planted {
    let key = ObjectKey::new(ObjectKind::Trail, at, length, &sequence_number(first), 0)
        .expect("a sequence number")
        .to_string();
    let (lines, body) = trail_body(first, count);
    let run: Vec<RunEntry> = (first..first + count)
        .map(|seq| RunEntry(sequence_number(seq), event_id(seq)))
        .collect();
    let marker_key = marker_key(&run[0], 0).expect("a marker key");
    let listed_hash = match marking {
        Marking::OtherBytes => hex(&sha256(b"other bytes")),
        _ => hex(&sha256(&body)),
    };
    let mut marker = Marker::new(
        run.clone(),
        &[Confirmed {
            key: key.clone(),
            event_ids: run.iter().map(|e| e.event_id().to_owned()).collect(),
            sha256: listed_hash,
        }],
        at.timestamp_millis() + 30_000,
    );
    if marking == Marking::VersionOne {
        marker.version = 1;
        for object in &mut marker.objects {
            object.sha256.clear();
        }
    }
    bucket.overwrite_with(&marker_key, Bytes::from(marker.to_json()), Vec::new());
    let mut metadata = vec![("events", count.to_string())];
    if marking != Marking::NoMarker {
        metadata.push((MARKER_METADATA, marker_key.clone()));
    }
    let version_id = bucket.overwrite_with(&key, body.clone(), metadata);
    Planted {
        key,
        version_id,
        marker: marker_key,
        body,
        lines,
    }
}

/// Records `first..first + count` archived at `at` as the archiver archives them; the key.
pub fn plant_attested(
    bucket: &MemoryBucket,
    at: DateTime<Utc>,
    length: PeriodLength,
    first: u64,
    count: u64,
) -> String {
    plant(bucket, at, length, first, count, Marking::Attested).key
}

/// A void marker for `key`, written by `by`.
pub fn void(bucket: &MemoryBucket, key: &str, by: &str) {
    let body = format!(r#"{{"version":1,"voidedAt":"2026-11-22T10:00:00.000Z","by":"{by}"}}"#);
    bucket.overwrite_with(&void_key(key), Bytes::from(body), Vec::new());
}
