//! Owns the marker: what one attempt at a run of stream records wrote (or set out to write), kept
//! under `state/` in the bucket, and its key. Must not know the bucket's API or the Lambda event.
//!
//! A *run* is the records Lambda delivers from a given record on, in stream order: a batch, or
//! what is left of it after a bisection or a partial failure. A marker is keyed by the run's first
//! record (its sequence number and its globally unique `eventID`) and an attempt number:
//! `state/<sequence, 40 digits>-<eventID>/a<attempt>.json`. Markers are created once
//! (`If-None-Match: *`) and never changed; a later attempt at the same run writes the next attempt
//! number. An event counts as archived when an object that a marker lists it in holds it with the
//! SHA-256 the marker names (and the other checks of `batch`); the marker's `writeBy` is the
//! moment after which an object it lists that does not exist is made void, never to count
//! (docs/archive.md has the whole argument).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use audit_model::archive::{STATE_PREFIX, padded_sequence};

/// The marker's format version: 2 lists each object's SHA-256 (a version-1 marker attests
/// nothing: the sealer lists what only it names as unattested).
pub const MARKER_VERSION: u32 = 2;

/// One record of a run: its sequence number and its eventID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEntry(pub String, pub String);

impl RunEntry {
    pub fn sequence_number(&self) -> &str {
        &self.0
    }

    pub fn event_id(&self) -> &str {
        &self.1
    }
}

/// An object the marker's attempt wrote or set out to write, and the events (positions in the
/// run) it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkedObject {
    pub key: String,
    pub events: Vec<u32>,
    /// Hex SHA-256 of the object's bytes as written (gzip); empty in a version-1 marker.
    #[serde(default)]
    pub sha256: String,
}

/// What an attempt at a run wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Marker {
    pub version: u32,
    /// The run's records in stream order, `[sequenceNumber, eventID]`; the first is the one the
    /// marker is keyed by.
    pub run: Vec<RunEntry>,
    pub objects: Vec<MarkedObject>,
    /// Unix milliseconds after which a listed object that does not exist can no longer appear.
    pub write_by: i64,
    /// Written by `auditctl archive repair` through the archiver: the run is items read from the
    /// table, not stream records (absent, and so false, in every other marker).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repair: bool,
}

/// An object known to exist, with the eventIDs it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirmed {
    pub key: String,
    pub event_ids: Vec<String>,
    /// Hex SHA-256 of its bytes.
    pub sha256: String,
}

impl Marker {
    /// The marker for `run` listing `objects` (each with the eventIDs it holds; an eventID not in
    /// the run is left out).
    pub fn new(run: Vec<RunEntry>, objects: &[Confirmed], write_by: i64) -> Self {
        let position: HashMap<&str, u32> = run
            .iter()
            .enumerate()
            .map(|(i, entry)| (entry.event_id(), i as u32))
            .collect();
        let objects = objects
            .iter()
            .map(|object| MarkedObject {
                key: object.key.clone(),
                events: object
                    .event_ids
                    .iter()
                    .filter_map(|id| position.get(id.as_str()).copied())
                    .collect(),
                sha256: object.sha256.clone(),
            })
            .filter(|object| !object.events.is_empty())
            .collect();
        Self {
            version: MARKER_VERSION,
            run,
            objects,
            write_by,
            repair: false,
        }
    }

    /// Whether this marker attests `key` with the bytes whose SHA-256 is `sha256` (hex): it is
    /// of version 2 or later and lists that key with that hash.
    pub fn attests(&self, key: &str, sha256: &str) -> bool {
        self.version >= 2
            && !sha256.is_empty()
            && self
                .objects
                .iter()
                .any(|object| object.key == key && object.sha256.eq_ignore_ascii_case(sha256))
    }

    /// The eventIDs an object of this marker holds.
    pub fn event_ids(&self, object: &MarkedObject) -> Vec<String> {
        object
            .events
            .iter()
            .filter_map(|&i| self.run.get(i as usize))
            .map(|entry| entry.event_id().to_owned())
            .collect()
    }

    pub fn to_json(&self) -> Vec<u8> {
        // A struct of strings and numbers always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn from_json(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

/// The key of attempt `attempt` at the run starting with `first`. `None` when the sequence number
/// is not DynamoDB's (1 to 40 digits).
pub fn marker_key(first: &RunEntry, attempt: u32) -> Option<String> {
    Some(format!(
        "{STATE_PREFIX}{}-{}/a{attempt}.json",
        padded_sequence(first.sequence_number())?,
        key_safe(first.event_id())
    ))
}

/// An eventID as a key segment: letters, digits, '.', '_' and '-' as they are, any other byte as
/// `~XX` (DynamoDB's eventIDs are hexadecimal, so this only guards against the unexpected).
fn key_safe(event_id: &str) -> String {
    let mut out = String::with_capacity(event_id.len());
    for byte in event_id.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("~{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: &str, id: &str) -> RunEntry {
        RunEntry(seq.into(), id.into())
    }

    #[test]
    fn a_marker_lists_objects_by_position_in_its_run_and_reads_back() {
        let run = vec![entry("1", "a"), entry("2", "b"), entry("3", "c")];
        let objects = [
            Confirmed {
                key: "trail/x".into(),
                event_ids: vec!["a".into(), "c".into()],
                sha256: "ab".into(),
            },
            Confirmed {
                key: "tamper/y".into(),
                event_ids: vec!["z".into()],
                sha256: "cd".into(),
            },
        ];
        let marker = Marker::new(run, &objects, 42);
        assert_eq!(
            marker.objects.len(),
            1,
            "an object with no event of the run"
        );
        assert_eq!(marker.objects[0].events, vec![0, 2]);
        assert_eq!(marker.event_ids(&marker.objects[0]), vec!["a", "c"]);
        let json = marker.to_json();
        assert_eq!(
            String::from_utf8(json.clone()).unwrap(),
            r#"{"version":2,"run":[["1","a"],["2","b"],["3","c"]],"objects":[{"key":"trail/x","events":[0,2],"sha256":"ab"}],"writeBy":42}"#
        );
        assert_eq!(Marker::from_json(&json).unwrap(), marker);
        assert!(marker.attests("trail/x", "AB"));
        assert!(!marker.attests("trail/x", "cd"), "another SHA-256");
        assert!(!marker.attests("tamper/y", "cd"), "not listed");
        let old: Marker = Marker::from_json(
            br#"{"version":1,"run":[["1","a"]],"objects":[{"key":"trail/x","events":[0]}],"writeBy":1}"#,
        )
        .unwrap();
        assert!(
            !old.attests("trail/x", ""),
            "a version-1 marker attests nothing"
        );
    }

    #[test]
    fn marker_keys_name_the_runs_first_record_and_the_attempt() {
        assert_eq!(
            marker_key(&entry("123", "c81e728d"), 2).unwrap(),
            "state/0000000000000000000000000000000000000123-c81e728d/a2.json"
        );
        assert_eq!(
            marker_key(&entry("1", "a/b c"), 0).unwrap(),
            "state/0000000000000000000000000000000000000001-a~2Fb~20c/a0.json"
        );
        assert_eq!(marker_key(&entry("x", "a"), 0), None);
    }
}
