//! Owns reading one archive object's bytes as `verify` checks them, chunk by chunk as they arrive:
//! the SHA-256 and size of the bytes as stored, and the JSON lines after gunzip (counted, and kept
//! when the table is compared), the key of each line's record (to find a record archived
//! twice), and, for a digest that carries the transparency log's tree, each line's leaf hash
//! (`tlog::leaf_hash`, hashed as the line passes). Must not know digests or S3.

use std::borrow::Cow;
use std::io::Write;
use std::sync::Arc;

use audit_model::archive::ObjectKind;
use audit_model::tlog::{Hash, leaf_hash};
use serde::Deserialize;

use aws_lc_rs::digest::{Context, SHA256};
use flate2::write::MultiGzDecoder;
use futures::StreamExt;

use super::attest::{Attestations, Unattested};
use super::ports::Fetched;
use super::table::key_hash;
use crate::Error;

/// The record a line holds, for finding one archived twice: a trail line's event (`messageId`
/// and `auditTime`, [`key_hash`]) or a tamper line's stream record (its `eventID`), and the
/// `messageId` it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineKey {
    pub key: u128,
    pub message_id: Box<str>,
}

#[derive(Deserialize)]
struct TrailFields<'a> {
    #[serde(rename = "messageId", borrow)]
    message_id: Cow<'a, str>,
    #[serde(rename = "auditTime", borrow)]
    audit_time: Cow<'a, str>,
}

#[derive(Deserialize)]
struct TamperKeys<'a> {
    #[serde(rename = "messageId", borrow)]
    message_id: Cow<'a, str>,
}

#[derive(Deserialize)]
struct TamperFields<'a> {
    #[serde(rename = "eventID", borrow)]
    event_id: Cow<'a, str>,
    #[serde(borrow)]
    keys: TamperKeys<'a>,
}

/// The key of one line of an object of `kind`; `None` for a line that is not such a record.
pub fn line_key(kind: ObjectKind, line: &[u8]) -> Option<LineKey> {
    match kind {
        ObjectKind::Trail => {
            let fields: TrailFields = serde_json::from_slice(line).ok()?;
            Some(LineKey {
                key: key_hash(&fields.message_id, &fields.audit_time),
                message_id: fields.message_id.into(),
            })
        }
        ObjectKind::Tamper => {
            let fields: TamperFields = serde_json::from_slice(line).ok()?;
            // Apart from every trail key: a newline never starts an auditTime.
            Some(LineKey {
                key: key_hash(&fields.event_id, "\ntamper"),
                message_id: fields.keys.message_id.into(),
            })
        }
    }
}

/// The longest line kept: an item is at most 400 KB, and its JSON line not much more. A longer
/// "line" is not an archived event; the object is then unreadable (its bytes are still hashed).
pub const MAX_LINE_BYTES: usize = 2 * 1024 * 1024;

/// What one object holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    pub sha256: [u8; 32],
    pub size: u64,
    /// JSON lines after gunzip (a last line without its newline counts).
    pub lines: u64,
    /// The lines themselves, when asked for.
    pub kept: Vec<String>,
    /// Each line's record, when asked for (lines that are no record left out).
    pub keys: Vec<LineKey>,
    /// Each line's leaf hash in order, when asked for (`ContentReader::with_leaves`).
    pub leaves: Vec<Hash>,
    /// The lines whose attestation does not hold, when asked for
    /// (`ContentReader::with_attestations`).
    pub unattested: Vec<Unattested>,
    /// Why the bytes are not gzip-compressed lines, when they are not (`lines` then counts those
    /// read before).
    pub unreadable: Option<String>,
}

/// Reads an object chunk by chunk: memory is a chunk, the decoder's window and one line (plus the
/// lines kept).
pub struct ContentReader {
    hash: Context,
    size: u64,
    decoder: Option<MultiGzDecoder<Lines>>,
    /// The lines of a decoder that failed, and why.
    failed: Option<(Lines, String)>,
}

struct Lines {
    partial: Vec<u8>,
    count: u64,
    keep: bool,
    kept: Vec<String>,
    /// The kind of records whose keys are taken, when they are.
    keyed: Option<ObjectKind>,
    keys: Vec<LineKey>,
    /// Each line's leaf hash, when taken.
    leaves: Option<Vec<Hash>>,
    /// The key each line's attestation is checked with, when it is.
    attestations: Option<Arc<Attestations>>,
    unattested: Vec<Unattested>,
}

impl Lines {
    fn new(keep: bool, keyed: Option<ObjectKind>) -> Self {
        Self {
            partial: Vec::new(),
            count: 0,
            keep,
            kept: Vec::new(),
            keyed,
            keys: Vec::new(),
            leaves: None,
            attestations: None,
            unattested: Vec::new(),
        }
    }

    fn line(&mut self, line: &[u8]) {
        self.count += 1;
        if let Some(key) = self.keyed.and_then(|kind| line_key(kind, line)) {
            self.keys.push(key);
        }
        if self.keep {
            self.kept.push(String::from_utf8_lossy(line).into_owned());
        }
        if let Some(leaves) = self.leaves.as_mut() {
            leaves.push(leaf_hash(line));
        }
        if let Some(unattested) = self.attestations.as_ref().and_then(|a| a.check_line(line)) {
            self.unattested.push(unattested);
        }
    }

    fn end(mut self) -> Self {
        if !self.partial.is_empty() {
            let last = std::mem::take(&mut self.partial);
            self.line(&last);
        }
        self
    }
}

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut rest = buf;
        while let Some(at) = rest.iter().position(|b| *b == b'\n') {
            if self.partial.is_empty() {
                self.line(&rest[..at]);
            } else {
                self.partial.extend_from_slice(&rest[..at]);
                let line = std::mem::take(&mut self.partial);
                self.line(&line);
            }
            rest = &rest[at + 1..];
        }
        self.partial.extend_from_slice(rest);
        if self.partial.len() > MAX_LINE_BYTES {
            return Err(std::io::Error::other(format!(
                "a line longer than {MAX_LINE_BYTES} bytes"
            )));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl ContentReader {
    /// `keep`: keep the lines (for the table), not only count them; `keyed`: take each line's
    /// record key, reading the lines as records of that kind.
    pub fn new(keep: bool, keyed: Option<ObjectKind>) -> Self {
        Self {
            hash: Context::new(&SHA256),
            size: 0,
            decoder: Some(MultiGzDecoder::new(Lines::new(keep, keyed))),
            failed: None,
        }
    }

    /// Also hashes each line as a leaf of the transparency log (`Content::leaves`).
    pub fn with_leaves(mut self) -> Self {
        if let Some(decoder) = self.decoder.as_mut() {
            decoder.get_mut().leaves = Some(Vec::new());
        }
        self
    }

    /// Also checks each line's attestation, as an item's (`Content::unattested`).
    pub fn with_attestations(mut self, attestations: Option<Arc<Attestations>>) -> Self {
        if let Some(decoder) = self.decoder.as_mut() {
            decoder.get_mut().attestations = attestations;
        }
        self
    }

    pub fn update(&mut self, chunk: &[u8]) {
        self.hash.update(chunk);
        self.size += chunk.len() as u64;
        if let Some(decoder) = self.decoder.as_mut()
            && let Err(error) = decoder.write_all(chunk)
        {
            self.fail(error.to_string());
        }
    }

    fn fail(&mut self, why: String) {
        if let Some(mut decoder) = self.decoder.take() {
            // The lines counted so far stay with the object: taken from the failed decoder's
            // writer, which is not flushed again.
            let lines = std::mem::replace(decoder.get_mut(), Lines::new(false, None));
            self.failed = Some((lines, why));
        }
    }

    pub fn finish(mut self) -> Content {
        let (lines, unreadable) = match self.decoder.take() {
            Some(mut decoder) => match decoder.try_finish() {
                Ok(()) => (
                    std::mem::replace(decoder.get_mut(), Lines::new(false, None)).end(),
                    None,
                ),
                Err(error) => (
                    std::mem::replace(decoder.get_mut(), Lines::new(false, None)),
                    Some(error.to_string()),
                ),
            },
            None => match self.failed.take() {
                Some((lines, why)) => (lines, Some(why)),
                None => (Lines::new(false, None), Some("not read".to_owned())),
            },
        };
        let mut sha256 = [0u8; 32];
        sha256.copy_from_slice(self.hash.finish().as_ref());
        Content {
            sha256,
            size: self.size,
            lines: lines.count,
            kept: lines.kept,
            keys: lines.keys,
            leaves: lines.leaves.unwrap_or_default(),
            unattested: lines.unattested,
            unreadable: unreadable.map(|why| format!("not gzip-compressed JSON lines: {why}")),
        }
    }
}

/// Reads a fetched version to its end (`keep`, `keyed`: as [`ContentReader::new`]; `leaves`:
/// [`ContentReader::with_leaves`]; `attestations`: [`ContentReader::with_attestations`]).
pub async fn read(
    fetched: Fetched,
    keep: bool,
    keyed: Option<ObjectKind>,
    leaves: bool,
    attestations: Option<Arc<Attestations>>,
) -> Result<Content, Error> {
    let mut reader = ContentReader::new(keep, keyed).with_attestations(attestations);
    if leaves {
        reader = reader.with_leaves();
    }
    let mut body = fetched.body;
    while let Some(chunk) = body.next().await {
        reader.update(&chunk?);
    }
    Ok(reader.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use audit_model::digest::sha256;
    use flate2::Compression;
    use flate2::write::GzEncoder;

    fn gzip(text: &str) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(text.as_bytes()).unwrap();
        encoder.finish().unwrap()
    }

    fn read_in_chunks(bytes: &[u8], chunk: usize, keep: bool) -> Content {
        let mut reader = ContentReader::new(keep, None);
        for piece in bytes.chunks(chunk) {
            reader.update(piece);
        }
        reader.finish()
    }

    #[test]
    fn lines_hash_and_size_do_not_depend_on_how_the_bytes_arrive() {
        let bytes = gzip("{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n");
        let whole = read_in_chunks(&bytes, bytes.len(), true);
        assert_eq!(whole.lines, 3);
        assert_eq!(whole.kept, ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
        assert_eq!(whole.sha256, sha256(&bytes));
        assert_eq!(whole.size, bytes.len() as u64);
        assert_eq!(whole.unreadable, None);
        for chunk in [1, 2, 7] {
            assert_eq!(read_in_chunks(&bytes, chunk, true), whole, "{chunk}");
        }
        let counted = read_in_chunks(&bytes, 5, false);
        assert_eq!((counted.lines, counted.kept.len()), (3, 0));
    }

    #[test]
    fn a_last_line_without_newline_counts_and_members_are_read_one_after_another() {
        let mut bytes = gzip("{\"a\":1}\n");
        bytes.extend(gzip("{\"b\":2}"));
        let content = read_in_chunks(&bytes, 3, true);
        assert_eq!(content.lines, 2);
        assert_eq!(content.kept, ["{\"a\":1}", "{\"b\":2}"]);
    }

    #[test]
    fn each_line_gives_the_key_of_its_record_and_a_line_that_is_none_gives_none() {
        let trail = gzip(
            "{\"auditText\":\"x\",\"auditTime\":\"2026-11-22T10:00:00.000Z\",\"messageId\":\"m-1\"}\nnot json\n",
        );
        let mut reader = ContentReader::new(false, Some(ObjectKind::Trail));
        reader.update(&trail);
        let content = reader.finish();
        assert_eq!(content.lines, 2);
        assert_eq!(
            content.keys,
            [LineKey {
                key: key_hash("m-1", "2026-11-22T10:00:00.000Z"),
                message_id: "m-1".into()
            }]
        );
        let tamper =
            br#"{"eventID":"e-1","eventName":"MODIFY","keys":{"auditTime":"t","messageId":"m-1"}}"#;
        let key = line_key(ObjectKind::Tamper, tamper).unwrap();
        assert_eq!(&*key.message_id, "m-1");
        // A stream record is never taken for a trail event, nor one record for another.
        assert_ne!(key.key, key_hash("m-1", "t"));
        let other = br#"{"eventID":"e-2","keys":{"messageId":"m-1"}}"#;
        assert_ne!(line_key(ObjectKind::Tamper, other).unwrap().key, key.key);
        assert_eq!(line_key(ObjectKind::Tamper, br#"{"keys":{}}"#), None);
    }

    #[test]
    fn leaves_are_the_lines_hashed_as_the_log_hashes_them_empty_lines_included() {
        let bytes = gzip("{\"a\":1}\n\n{\"b\":2}");
        let mut reader = ContentReader::new(false, None).with_leaves();
        for piece in bytes.chunks(3) {
            reader.update(piece);
        }
        let content = reader.finish();
        assert_eq!(
            content.leaves,
            [
                leaf_hash(b"{\"a\":1}"),
                leaf_hash(b""),
                leaf_hash(b"{\"b\":2}")
            ]
        );
        assert!(read_in_chunks(&bytes, 3, false).leaves.is_empty());
    }

    #[test]
    fn bytes_that_are_not_gzip_are_hashed_and_said_unreadable() {
        let content = read_in_chunks(b"plain text\nnot gzip\n", 4, true);
        assert_eq!(content.sha256, sha256(b"plain text\nnot gzip\n"));
        assert!(content.unreadable.unwrap().contains("not gzip"));
        let mut truncated = gzip("{\"a\":1}\n{\"b\":2}\n");
        truncated.truncate(truncated.len() - 6);
        assert!(read_in_chunks(&truncated, 4, false).unreadable.is_some());
    }

    #[test]
    fn a_line_beyond_the_bound_makes_the_object_unreadable_not_memory_hungry() {
        let long = "x".repeat(MAX_LINE_BYTES + 10);
        let content = read_in_chunks(&gzip(&long), 64 * 1024, true);
        assert!(content.unreadable.unwrap().contains("longer than"));
        assert!(content.kept.is_empty());
    }
}
