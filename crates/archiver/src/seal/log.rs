//! Owns the sealer's part of the transparency log (docs/archive.md "The transparency log"): a
//! period's leaves (every line of its listed objects, objects by key, lines in order) appended to
//! the tree's edge, and after the digest (the commit point) the tiles, the period's index and the
//! signed checkpoint, the checkpoint last. Every write is `If-None-Match: *`; a name already taken
//! is fine only when it holds the same bytes (for a checkpoint: the same body, signed by the
//! digest key, its signature checked); one that holds anything else was planted, and the object
//! goes under the next of its alternate names (docs/archive.md "Planted log objects"). A run
//! starts from
//! the head digest's tree (its edge read back from the partial tiles of its checkpoint's size),
//! and re-derives the head's tiles, index and checkpoint when the run that wrote it stopped before
//! its checkpoint.

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};

use audit_model::archive::{Period, TRAIL_PREFIX};
use audit_model::digest::{Digest, ListedObject, TreeHead, hex, sha256};
use audit_model::note::{
    Checkpoint, IndexRow, NoteSignature, SignedNote, checkpoint_key, ecdsa_key_id, index_key,
    origin,
};
use audit_model::tlog::{
    Hash, HexHash, MAX_TILE_CHOICES, TileRef, TreeEdge, choices, leaf_hash, log_names,
    object_lines, parse_hex_hash,
};
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use super::{HEAD_CONCURRENCY, Run, SealError};
use crate::objects::CONTENT_TYPE;
use crate::signer::DigestSigner;
use audit_aws::s3::{Bucket, Created, NewObject};

const TILE_CONTENT_TYPE: &str = "application/octet-stream";
const CHECKPOINT_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// A period's leaves appended to the tree: the edge after them, the full tiles they filled, the
/// index rows of its `trail/` lines, and how many leaves.
#[derive(Debug, Clone, Default)]
pub(super) struct Appended {
    pub edge: TreeEdge,
    pub full: Vec<(TileRef, Vec<u8>)>,
    pub rows: Vec<IndexRow>,
    pub leaves: u64,
}

impl Appended {
    /// The digest's `tree` after these leaves.
    pub fn head(&self) -> TreeHead {
        TreeHead {
            size: self.edge.size,
            root: HexHash(&self.edge.root()).to_string(),
            checkpoint: checkpoint_key(self.edge.size),
        }
    }
}

/// What a period's log writes cost: PUTs that created an object, and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Written {
    pub puts: u64,
    pub bytes: u64,
}

/// One object's leaves, and for each line that names them its messageId and auditTime.
struct ObjectLeaves {
    key: String,
    leaves: Vec<Hash>,
    /// (line number, messageId, auditTime) of the trail lines that carry both.
    ids: Vec<(u64, String, String)>,
}

/// A trail line's messageId and auditTime (both strings), when it has both.
fn ids_of(line: &[u8]) -> Option<(String, String)> {
    let value: serde_json::Value = serde_json::from_slice(line).ok()?;
    let field = |name: &str| value.get(name)?.as_str().map(str::to_owned);
    Some((field("messageId")?, field("auditTime")?))
}

/// The gzip of the index rows' lines (deterministic: no name, no time in the header).
pub(super) fn index_body(rows: &[IndexRow]) -> std::io::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for row in rows {
        encoder.write_all(row.line().as_bytes())?;
    }
    encoder.finish()
}

/// Whether `stored` is the checkpoint note of `body` signed by the digest key (`public`, DER):
/// the same body, and a signature line by the body's origin with the key's id whose ECDSA P-256
/// signature over the body holds (every such line).
fn holds_checkpoint(stored: &[u8], body: &str, public: &[u8]) -> bool {
    let Some(note) = std::str::from_utf8(stored)
        .ok()
        .and_then(|text| SignedNote::parse(text).ok())
    else {
        return false;
    };
    let name = body.lines().next().unwrap_or_default();
    let key = UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, public);
    let mut lines = note.by(name, ecdsa_key_id(public)).peekable();
    note.body == body
        && lines.peek().is_some()
        && lines.all(|line| key.verify(body.as_bytes(), &line.signature).is_ok())
}

/// Leaves read appended to `edge`, with the index rows of their trail lines.
fn append_read(edge: &TreeEdge, read: Vec<ObjectLeaves>) -> Appended {
    let mut appended = Appended {
        edge: edge.clone(),
        ..Appended::default()
    };
    for object in read {
        let first = appended.edge.size;
        for leaf in &object.leaves {
            appended.edge.push(*leaf, &mut appended.full);
        }
        appended.leaves += object.leaves.len() as u64;
        appended.rows.extend(
            object
                .ids
                .into_iter()
                .map(|(number, message_id, audit_time)| IndexRow {
                    message_id,
                    audit_time,
                    leaf_index: first + number,
                    object: object.key.clone(),
                    line_number: number,
                }),
        );
    }
    appended
}

impl<B: Bucket, S: DigestSigner> Run<'_, '_, B, S> {
    /// Reads one listed object (its listed version, its SHA-256 checked) and hashes its lines.
    async fn object_leaves(&self, object: &ListedObject) -> Result<ObjectLeaves, SealError> {
        let unreadable = |reason: String| SealError::ObjectUnreadable {
            key: object.key.clone(),
            reason,
        };
        let stored = self
            .request(self.bucket().get_version(&object.key, &object.version_id))
            .await?
            .ok_or_else(|| unreadable(format!("its version {} is gone", object.version_id)))?;
        if hex(&sha256(&stored.body)) != object.sha256 {
            return Err(unreadable(format!(
                "its version {} does not have the listed SHA-256 {}",
                object.version_id, object.sha256
            )));
        }
        let mut text = Vec::new();
        flate2::read::MultiGzDecoder::new(stored.body.as_ref())
            .read_to_end(&mut text)
            .map_err(|e| unreadable(format!("it is not gzip: {e}")))?;
        let trail = object.key.starts_with(TRAIL_PREFIX);
        let mut leaves = Vec::new();
        let mut ids = Vec::new();
        for (number, line) in object_lines(&text).into_iter().enumerate() {
            leaves.push(leaf_hash(line));
            if trail && let Some((message_id, audit_time)) = ids_of(line) {
                ids.push((number as u64, message_id, audit_time));
            }
        }
        Ok(ObjectLeaves {
            key: object.key.clone(),
            leaves,
            ids,
        })
    }

    /// `objects`' leaves, read concurrently, in this order.
    async fn read_leaves(&self, objects: &[ListedObject]) -> Result<Vec<ObjectLeaves>, SealError> {
        futures::stream::iter(objects)
            .map(|object| self.object_leaves(object))
            .buffered(HEAD_CONCURRENCY)
            .try_collect()
            .await
    }

    /// `objects`' leaves (in this order) appended to `edge`.
    pub(super) async fn append(
        &self,
        edge: &TreeEdge,
        objects: &[ListedObject],
    ) -> Result<Appended, SealError> {
        Ok(append_read(edge, self.read_leaves(objects).await?))
    }

    /// Creates the log object `key` with `body` under the first of its names
    /// ([`log_names`]) that is free, unless one before holds it already (`holds`: for a tile or
    /// an index, the same bytes; for a checkpoint, its body signed by the digest key). A name
    /// that holds anything else was planted: it is reported and passed over (docs/archive.md
    /// "Planted log objects"). The bytes written, or `None` when it was there.
    async fn put_log(
        &self,
        key: String,
        body: Vec<u8>,
        content_type: &'static str,
        holds: impl Fn(&[u8]) -> bool,
    ) -> Result<Option<u64>, SealError> {
        let hash = sha256(&body);
        let length = body.len() as u64;
        let body = Bytes::from(body);
        for name in log_names(&key) {
            let object = NewObject {
                key: name.clone(),
                body: body.clone(),
                content_type,
                sha256: hash,
                metadata: Vec::new(),
            };
            match self.request(self.bucket().put_if_absent(object)).await? {
                Created::New { .. } => return Ok(Some(length)),
                Created::AlreadyExists => {
                    if self
                        .original(&name)
                        .await?
                        .is_some_and(|stored| holds(&stored.body))
                    {
                        return Ok(None);
                    }
                    tracing::error!(
                        key = %name,
                        log_planted = 1,
                        "a log object's name holds an object the sealer did not write: passed over for the next name"
                    );
                }
            }
        }
        Err(SealError::LogConflict { key })
    }

    /// The first of `key`'s names ([`log_names`]) whose original version `holds`, read in
    /// order up to the first name that is not there.
    async fn find_log(
        &self,
        key: &str,
        holds: impl Fn(&[u8]) -> bool,
    ) -> Result<Option<Vec<u8>>, SealError> {
        for name in log_names(key) {
            match self.original(&name).await? {
                None => return Ok(None),
                Some(stored) if holds(&stored.body) => return Ok(Some(stored.body.to_vec())),
                Some(_) => {}
            }
        }
        Ok(None)
    }

    /// The body of the checkpoint of `size` with `root`, and the digest key (DER).
    async fn checkpoint_body(&self, size: u64, root: Hash) -> Result<(String, Vec<u8>), SealError> {
        let body = Checkpoint {
            origin: origin(self.sealer.bucket_name),
            size,
            root,
        }
        .body();
        Ok((body, self.public_der().await?.to_vec()))
    }

    /// Whether the checkpoint of `size` with `root`, signed by the digest key, is stored under
    /// one of its names.
    async fn checkpoint_stored(&self, size: u64, root: Hash) -> Result<bool, SealError> {
        let (body, public) = self.checkpoint_body(size, root).await?;
        Ok(self
            .find_log(&checkpoint_key(size), |stored| {
                holds_checkpoint(stored, &body, &public)
            })
            .await?
            .is_some())
    }

    /// The signed checkpoint of the tree of `size` leaves with `root`, created unless it exists
    /// ([`Self::put_log`]; an existing one must have the same body signed by the digest key,
    /// its signature checked: ECDSA signatures differ from one signing to the next). The bytes
    /// written, or `None` when it was there.
    async fn put_checkpoint(&self, size: u64, root: Hash) -> Result<Option<u64>, SealError> {
        let (body, public) = self.checkpoint_body(size, root).await?;
        let signature = self
            .sealer
            .signer
            .sign(body.as_bytes())
            .await
            .map_err(SealError::Sign)?;
        let note = SignedNote {
            body: body.clone(),
            signatures: vec![NoteSignature {
                name: origin(self.sealer.bucket_name),
                key_id: ecdsa_key_id(&public),
                signature,
            }],
        }
        .text()
        .into_bytes();
        self.put_log(
            checkpoint_key(size),
            note,
            CHECKPOINT_CONTENT_TYPE,
            |stored| holds_checkpoint(stored, &body, &public),
        )
        .await
    }

    /// Creates `key` with `body` unless one of its names holds the same bytes.
    async fn put_same(
        &self,
        key: String,
        body: Vec<u8>,
        content_type: &'static str,
    ) -> Result<Option<u64>, SealError> {
        let hash = sha256(&body);
        self.put_log(key, body, content_type, |stored| sha256(stored) == hash)
            .await
    }

    /// After `period`'s digest: the tiles its leaves filled and the partial tiles of the new
    /// size, the period's index, then the checkpoint. A period without leaves writes only its
    /// checkpoint, and only when it is missing.
    pub(super) async fn write_log(
        &self,
        period: Period,
        appended: &Appended,
    ) -> Result<Written, SealError> {
        let mut written = Written::default();
        let mut count = |bytes: Option<u64>| {
            if let Some(bytes) = bytes {
                written.puts += 1;
                written.bytes += bytes;
            }
        };
        if appended.leaves == 0 {
            if !self
                .checkpoint_stored(appended.edge.size, appended.edge.root())
                .await?
            {
                count(
                    self.put_checkpoint(appended.edge.size, appended.edge.root())
                        .await?,
                );
            }
            return Ok(written);
        }
        let tiles: Vec<(TileRef, Vec<u8>)> = appended
            .full
            .iter()
            .cloned()
            .chain(appended.edge.partial_tiles())
            .collect();
        self.put_tiles(tiles)
            .await?
            .into_iter()
            .for_each(&mut count);
        if !appended.rows.is_empty() {
            // Compressing into memory fails only without memory.
            let body = index_body(&appended.rows)
                .map_err(|e| crate::words::unavailable(format!("the index: {e}")))?;
            count(self.put_same(index_key(period), body, CONTENT_TYPE).await?);
        }
        count(
            self.put_checkpoint(appended.edge.size, appended.edge.root())
                .await?,
        );
        Ok(written)
    }

    /// Creates `tiles` unless they exist with the same bytes, concurrently: the bytes of each
    /// written, `None` for each that was there.
    pub(super) async fn put_tiles(
        &self,
        tiles: Vec<(TileRef, Vec<u8>)>,
    ) -> Result<Vec<Option<u64>>, SealError> {
        futures::stream::iter(tiles)
            .map(|(tile, bytes)| self.put_same(tile.key(), bytes, TILE_CONTENT_TYPE))
            .buffer_unordered(HEAD_CONCURRENCY)
            .try_collect()
            .await
    }

    /// The tree's edge at `size` from its partial tiles (each name's original version; among a
    /// tile's alternates, the choice that gives `root` (hex) when given, else its own name's).
    async fn load_edge(&self, size: u64, root: Option<&str>) -> Result<TreeEdge, SealError> {
        let mut candidates = Vec::new();
        for tile in TreeEdge::edge_tiles(size) {
            let mut found = Vec::new();
            for name in log_names(&tile.key()) {
                match self.original(&name).await? {
                    Some(stored) => found.push(stored.body.to_vec()),
                    None => break,
                }
            }
            if found.is_empty() {
                return Err(SealError::LogTileMissing { key: tile.key() });
            }
            candidates.push((tile, found));
        }
        let counts: Vec<usize> = candidates.iter().map(|(_, found)| found.len()).collect();
        let conflict = || SealError::LogConflict {
            key: checkpoint_key(size),
        };
        let mut mismatched = false;
        for choice in choices(&counts, MAX_TILE_CHOICES) {
            let tiles: HashMap<TileRef, Vec<u8>> = candidates
                .iter()
                .zip(&choice)
                .map(|((tile, found), n)| (*tile, found[*n].clone()))
                .collect();
            let Ok(edge) = TreeEdge::from_tiles(size, &tiles) else {
                continue;
            };
            match root {
                Some(root) if HexHash(&edge.root()).to_string() != root => {
                    mismatched = true;
                }
                _ => return Ok(edge),
            }
        }
        if mismatched {
            tracing::error!(
                size,
                "the tiles of the tree's edge do not give the digest's root"
            );
        }
        Err(conflict())
    }

    /// The tree after `digest` (of `period`), its tiles, index and checkpoint made sure of: read
    /// back from the tiles when its checkpoint exists; else its leaves appended again to the tree
    /// before it (`before` when this run holds it, else read from the tiles of the previous size,
    /// checked against `previous`'s tree) and its log written. The empty tree when the digest has
    /// no tree (sealed before the log).
    pub(super) async fn ensure_logged(
        &self,
        period: Period,
        digest: &Digest,
        before: Option<&TreeEdge>,
        previous: Option<&Digest>,
    ) -> Result<TreeEdge, SealError> {
        let Some(tree) = &digest.tree else {
            return Ok(TreeEdge::default());
        };
        if let Some(root) = parse_hex_hash(&tree.root)
            && self.checkpoint_stored(tree.size, root).await?
        {
            return self.load_edge(tree.size, Some(&tree.root)).await;
        }
        let conflict = || SealError::LogConflict {
            key: tree.checkpoint.clone(),
        };
        // A period sealed in parts: its log from them, no object read again.
        if let Some(appended) = self.appended_from_parts(period, digest).await? {
            let written = self.write_log(period, &appended).await?;
            tracing::warn!(
                checkpoint = %tree.checkpoint,
                log_puts = written.puts,
                "a digest's log is written again from its parts"
            );
            return Ok(appended.edge);
        }
        let read = self.read_leaves(&digest.objects).await?;
        let leaves: u64 = read.iter().map(|o| o.leaves.len() as u64).sum();
        let start = tree.size.checked_sub(leaves).ok_or_else(conflict)?;
        let edge = match before {
            Some(edge) if edge.size == start => edge.clone(),
            Some(_) => return Err(conflict()),
            None if start == 0 => TreeEdge::default(),
            None => {
                let root = previous
                    .and_then(|p| p.tree.as_ref())
                    .map(|t| (t.size, t.root.as_str()));
                if root.is_some_and(|(size, _)| size != start) {
                    return Err(conflict());
                }
                self.load_edge(start, root.map(|(_, r)| r)).await?
            }
        };
        let appended = append_read(&edge, read);
        if appended.head() != *tree {
            tracing::error!(checkpoint = %tree.checkpoint, "a digest's listed objects do not give its tree");
            return Err(conflict());
        }
        let written = self.write_log(period, &appended).await?;
        tracing::warn!(
            checkpoint = %tree.checkpoint,
            leaves = appended.leaves,
            log_puts = written.puts,
            log_bytes = written.bytes,
            "a digest's log is written again"
        );
        Ok(appended.edge)
    }

    /// The tree at the start of a run: after the head (the last of `recent`), its log made sure
    /// of.
    pub(super) async fn resume_log(
        &self,
        recent: &VecDeque<(Period, Digest)>,
    ) -> Result<TreeEdge, SealError> {
        let Some((period, head)) = recent.back() else {
            return Ok(TreeEdge::default());
        };
        let previous = recent.len().checked_sub(2).and_then(|i| recent.get(i));
        self.ensure_logged(*period, head, None, previous.map(|(_, d)| d))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_the_bytes_between_newlines() {
        let lines = |text: &[u8]| {
            object_lines(text)
                .into_iter()
                .map(<[u8]>::to_vec)
                .collect::<Vec<_>>()
        };
        assert_eq!(lines(b""), Vec::<Vec<u8>>::new());
        assert_eq!(lines(b"a\nb\n"), [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(lines(b"a\nb"), [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(
            lines(b"a\n\nb\n"),
            [b"a".to_vec(), b"".to_vec(), b"b".to_vec()]
        );
        assert_eq!(lines(b"\n"), [b"".to_vec()]);
        assert_eq!(lines(b"a"), [b"a".to_vec()]);
    }
}
