//! Owns the in-memory twins of `verify`'s ports, for its tests and (feature `test-support`) the
//! tests of its callers: the archive over `audit_aws::s3`'s
//! versioned twin, the key over `audit_aws::kms`'s (a P-256 key that signs as KMS does: DER, over
//! SHA-256 of a RAW message), a table, and the archiver's writes and seals (with the
//! transparency log, as docs/archive.md "The transparency log" has the sealer write it). Must not
//! know what is checked.

use std::io::{Read, Write};

use audit_aws::kms::MemoryKey;
use audit_aws::s3::MemoryBucket;
use audit_model::archive::{ObjectKey, ObjectKind, Period, PeriodLength, object_prefixes};
use audit_model::digest::{
    Digest, ListedObject, SIGNATURE_METADATA, SealedDigest, TreeHead, digest_key, hex, sha256,
    signing_string_of,
};
use audit_model::note::{
    Checkpoint, NoteSignature, SignedNote, checkpoint_key, ecdsa_key_id, origin,
};
use audit_model::tlog::{Hash, HexHash, TileRef, TreeEdge, leaf_hash};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use flate2::Compression;
use flate2::write::GzEncoder;

use crate::archive::S3Archive;

/// The archive in memory: `audit_aws::s3`'s versioned twin, read through the same port
/// implementation as S3 (every put a new version, deletes as delete markers, versions removable for
/// good as only a bucket without Object Lock allows).
pub type MemoryArchive = S3Archive<MemoryBucket>;

impl Default for MemoryArchive {
    fn default() -> Self {
        S3Archive::over(MemoryBucket::new(), "archive", "memory")
    }
}

/// A P-256 key that signs as KMS's ECDSA_SHA_256 with MessageType RAW does: `audit_aws::kms`'s
/// twin.
pub type TestKey = MemoryKey;

pub use super::ports::MemoryTable;

/// Lines gzip-compressed as the archiver writes them.
pub fn gzip_lines(lines: &[String]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    for line in lines {
        encoder.write_all(line.as_bytes()).unwrap();
        encoder.write_all(b"\n").unwrap();
    }
    encoder.finish().unwrap()
}

/// Writes an archive object of `kind` at `at` as the archiver does; its key.
pub fn write_object(
    archive: &MemoryArchive,
    kind: ObjectKind,
    at: DateTime<Utc>,
    length: PeriodLength,
    sequence: u64,
    lines: &[String],
) -> String {
    let key = ObjectKey::new(kind, at, length, &sequence.to_string(), 0)
        .unwrap()
        .to_string();
    archive.overwrite_with(
        &key,
        Bytes::from(gzip_lines(lines)),
        vec![("events", lines.len().to_string())],
    );
    key
}

/// The digest of `period` as the archiver seals it: every current object in the period's place
/// listed with its version, SHA-256, events and size, linked to `previous`, signed by `key`.
pub fn seal(
    archive: &MemoryArchive,
    bucket: &str,
    period: Period,
    previous: Option<&SealedDigest>,
    key: &TestKey,
) -> SealedDigest {
    let digest = digest_of(archive, bucket, period, previous, key);
    put_digest(archive, period, &digest, key)
}

/// The digest the archiver would seal for `period` (not stored): every current object in its
/// place listed, linked to `previous`, naming `key`.
pub fn digest_of(
    archive: &MemoryArchive,
    bucket: &str,
    period: Period,
    previous: Option<&SealedDigest>,
    key: &TestKey,
) -> Digest {
    let mut objects = Vec::new();
    for prefix in object_prefixes(period) {
        for object in archive.keys(&prefix) {
            let Some(current) = archive.current(&object) else {
                continue;
            };
            let events = current
                .metadata
                .iter()
                .find(|(name, _)| *name == "events")
                .and_then(|(_, e)| e.parse().ok())
                .unwrap_or(0);
            objects.push(ListedObject {
                key: object,
                version_id: current.version_id,
                sha256: hex(&sha256(&current.body)),
                events,
                size: current.body.len() as u64,
                marker: String::new(),
            });
        }
    }
    Digest::new(
        bucket,
        period,
        DateTime::from_timestamp(period.sealable_at(), 0).unwrap(),
        objects,
        previous.map(SealedDigest::as_previous),
        key.arn(),
    )
}

/// Stores `digest` as the digest of `period`, signed by `key`.
pub fn put_digest(
    archive: &MemoryArchive,
    period: Period,
    digest: &Digest,
    key: &TestKey,
) -> SealedDigest {
    put_digest_at(archive, &digest_key(period), digest, key)
}

/// Stores `digest` at `digest_key` (a name or an alternate name of its period), signed by `key`.
pub fn put_digest_at(
    archive: &MemoryArchive,
    digest_key: &str,
    digest: &Digest,
    key: &TestKey,
) -> SealedDigest {
    let digest_key = digest_key.to_owned();
    let bytes = digest.to_bytes();
    let body_sha256 = sha256(&bytes);
    let signature = key
        .sign(signing_string_of(digest, &digest_key, &body_sha256).as_bytes())
        .unwrap();
    archive.overwrite_with(
        &digest_key,
        Bytes::from(bytes),
        vec![(SIGNATURE_METADATA, hex(&signature))],
    );
    SealedDigest {
        key: digest_key,
        sha256: body_sha256,
        signature,
    }
}

/// The leaf hashes of a listed object's lines, as the sealer reads them: the gunzipped bytes
/// between newlines (the empty piece after a final newline is not a line).
pub fn object_leaves(archive: &MemoryArchive, object: &ListedObject) -> Vec<Hash> {
    let version = archive
        .versions(&object.key)
        .into_iter()
        .find(|v| v.version_id == object.version_id)
        .expect("the listed version");
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(version.body.as_ref())
        .read_to_end(&mut text)
        .unwrap();
    if text.is_empty() {
        return Vec::new();
    }
    let text = text.strip_suffix(b"\n").unwrap_or(&text);
    text.split(|b| *b == b'\n').map(leaf_hash).collect()
}

/// The tiles a period's leaves wrote, and the tree after them.
pub struct Logged {
    pub tiles: Vec<(TileRef, Vec<u8>)>,
}

/// Appends `digest`'s leaves (its objects in order) to `edge`, sets `digest.tree`; the tiles the
/// sealer would write for them (the full ones filled and, when there were leaves, the partial
/// ones of the new size).
pub fn append_leaves(archive: &MemoryArchive, digest: &mut Digest, edge: &mut TreeEdge) -> Logged {
    let start = edge.size;
    let mut tiles = Vec::new();
    for object in &digest.objects {
        for leaf in object_leaves(archive, object) {
            edge.push(leaf, &mut tiles);
        }
    }
    if edge.size > start {
        tiles.extend(edge.partial_tiles());
    }
    digest.tree = Some(TreeHead {
        size: edge.size,
        root: HexHash(&edge.root()).to_string(),
        checkpoint: checkpoint_key(edge.size),
    });
    Logged { tiles }
}

/// The signed checkpoint of the tree of `size` with `root`, signed by `key` as the log.
pub fn checkpoint_note(bucket: &str, size: u64, root: Hash, key: &TestKey) -> SignedNote {
    let name = origin(bucket);
    let body = Checkpoint {
        origin: name.clone(),
        size,
        root,
    }
    .body();
    let signature = key.sign(body.as_bytes()).unwrap();
    SignedNote {
        signatures: vec![NoteSignature {
            name,
            key_id: ecdsa_key_id(&key.public_key().der),
            signature,
        }],
        body,
    }
}

/// Stores the checkpoint of `size` (a new version when one is there).
pub fn put_checkpoint(archive: &MemoryArchive, note: &SignedNote, size: u64) {
    archive.overwrite(&checkpoint_key(size), Bytes::from(note.text()));
}

/// Seals `period` as the sealer does with the log: the digest of its objects with the tree after
/// their leaves (appended to `edge`), signed and stored; then its tiles, then the checkpoint.
pub fn seal_logged(
    archive: &MemoryArchive,
    bucket: &str,
    period: Period,
    previous: Option<&SealedDigest>,
    key: &TestKey,
    edge: &mut TreeEdge,
) -> SealedDigest {
    let mut digest = digest_of(archive, bucket, period, previous, key);
    let logged = append_leaves(archive, &mut digest, edge);
    let sealed = put_digest(archive, period, &digest, key);
    for (tile, bytes) in logged.tiles {
        archive.overwrite(&tile.key(), Bytes::from(bytes));
    }
    put_checkpoint(
        archive,
        &checkpoint_note(bucket, edge.size, edge.root(), key),
        edge.size,
    );
    sealed
}
