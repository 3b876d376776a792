//! Owns reading the transparency log (for prove, the witness, verify and the viewer): its objects
//! read from the archive bucket through the read port (tiles, checkpoints, cosignatures).
//! Checking them is `offline`'s, re-exported here. Must not know the table or KMS; the formats
//! are `audit_model::tlog` and `audit_model::note`'s (docs/archive.md "The transparency log").

use std::collections::BTreeSet;

use audit_model::digest::hex;
use audit_model::note::{
    CHECKPOINTS_PREFIX, COSIGNATURES_PREFIX, NoteSignature, SignedNote, WitnessKey, checkpoint_key,
    cosignature_key, cosignatures_of, parse_checkpoint_key,
};
use audit_model::tlog::{MAX_TILE_CHOICES, TileRef, Tiles, choices, log_names};
use futures::{StreamExt, TryStreamExt};

pub use crate::offline::{
    CheckError, LogKey, Verdict, check_cosignature, check_proof, witness_key_arg, witness_key_args,
};

use crate::Error;
use crate::archive::Archive;

/// Tiles read at once.
const TILE_CONCURRENCY: usize = 16;
/// Keys per listing page.
const LIST_PAGE: usize = 1000;
/// Cosignature objects read for one checkpoint beyond the configured witnesses' own, at most
/// (anyone allowed to write under `log/cosignatures/` could add more).
pub const MAX_COSIGNATURES: usize = 16;
/// A cosignature object's size, at most: one signature line (a witness's name and 76 bytes in
/// base64); a larger object is passed over unread.
pub const MAX_COSIGNATURE_BYTES: u64 = 1024;
/// Cosigned sizes tried, largest first, before [`LogReader::newest_cosigned`] gives up.
pub const MAX_COSIGNED_TRIED: usize = 8;

/// The log's objects in the archive bucket, read (`archive`: the read port, `S3Archive` over S3
/// or its twin).
pub struct LogReader<'a, A> {
    pub archive: &'a A,
}

impl<A: Archive> LogReader<'_, A> {
    pub(crate) async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        self.archive.current(key).await
    }

    pub(crate) async fn keys(
        &self,
        prefix: &str,
        after: Option<String>,
    ) -> Result<Vec<String>, Error> {
        let mut all = Vec::new();
        let mut after = after;
        loop {
            let page = self
                .archive
                .keys(prefix, after.as_deref(), LIST_PAGE)
                .await?;
            let full = page.len() == LIST_PAGE;
            after = page.last().cloned();
            all.extend(page);
            if !full {
                return Ok(all);
            }
        }
    }

    /// The tiles of the tree of `size` named, read at once; a tile that is not there is left
    /// out (the proof made from them then names it).
    pub async fn tiles(&self, size: u64, tiles: BTreeSet<TileRef>) -> Result<Tiles, Error> {
        let read: Vec<(TileRef, Option<Vec<u8>>)> = futures::stream::iter(tiles)
            .map(|tile| async move { Ok::<_, Error>((tile, self.get(&tile.key()).await?)) })
            .buffered(TILE_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(Tiles {
            size,
            tiles: read
                .into_iter()
                .filter_map(|(tile, data)| Some((tile, data?)))
                .collect(),
        })
    }

    /// The tiles of the tree of `size` named, read at once, and the names passed over: each
    /// tile's own name first; when `holds` says they are not the log's (a proof made from them
    /// does not hold) and some tile has alternates (docs/archive.md "Planted log objects"),
    /// the first choice among them, at most [`MAX_TILE_CHOICES`], that `holds`.
    pub async fn tiles_checked(
        &self,
        size: u64,
        names: BTreeSet<TileRef>,
        mut holds: impl FnMut(&mut Tiles) -> bool,
    ) -> Result<(Tiles, Vec<String>), Error> {
        let mut own = self.tiles(size, names.clone()).await?;
        if holds(&mut own) {
            return Ok((own, Vec::new()));
        }
        let mut candidates = Vec::new();
        for tile in names {
            let mut found = Vec::new();
            for name in log_names(&tile.key()) {
                match self.get(&name).await? {
                    Some(bytes) => found.push((name, bytes)),
                    None => break,
                }
            }
            candidates.push((tile, found));
        }
        if candidates.iter().all(|(_, found)| found.len() < 2) {
            return Ok((own, Vec::new()));
        }
        let counts: Vec<usize> = candidates.iter().map(|(_, f)| f.len()).collect();
        for choice in choices(&counts, MAX_TILE_CHOICES) {
            let mut tiles = Tiles {
                size,
                tiles: Default::default(),
            };
            let mut passed = Vec::new();
            for ((tile, found), n) in candidates.iter().zip(&choice) {
                for (i, (name, bytes)) in found.iter().enumerate() {
                    if i == *n {
                        tiles.tiles.insert(*tile, bytes.clone());
                    } else if i < *n {
                        passed.push(name.clone());
                    }
                }
            }
            if holds(&mut tiles) {
                return Ok((tiles, passed));
            }
        }
        Ok((own, Vec::new()))
    }

    /// The checkpoint of the tree of `size` signed by the log's `key`: the first of its names
    /// ([`log_names`], read in order up to the first that is not there) that parses and whose
    /// log signature holds for this size, with the names passed over (planted: docs/archive.md
    /// "Planted log objects"); when none holds, its own name's as stored.
    pub async fn checkpoint_signed(
        &self,
        size: u64,
        key: &LogKey,
    ) -> Result<(Option<Result<SignedNote, String>>, Vec<String>), Error> {
        let mut passed = Vec::new();
        for name in log_names(&checkpoint_key(size)) {
            let Some(bytes) = self.get(&name).await? else {
                break;
            };
            let note = String::from_utf8(bytes)
                .ok()
                .and_then(|text| SignedNote::parse(&text).ok());
            if let Some(note) = note
                && key.checkpoint(&note).is_ok_and(|c| c.size == size)
            {
                return Ok((Some(Ok(note)), passed));
            }
            passed.push(name);
        }
        Ok((self.stored_checkpoint(size).await?, Vec::new()))
    }

    /// The checkpoint of the tree of `size`, as stored (the log's signature only).
    pub async fn checkpoint(&self, size: u64) -> Result<Option<SignedNote>, Error> {
        match self.stored_checkpoint(size).await? {
            None => Ok(None),
            Some(Ok(note)) => Ok(Some(note)),
            Some(Err(why)) => Err(Error::NotANote {
                key: checkpoint_key(size),
                why,
            }),
        }
    }

    /// The checkpoint of the tree of `size` as stored, or why its bytes are not a signed note
    /// (for `verify`, which reports that as a problem rather than stopping).
    pub async fn stored_checkpoint(
        &self,
        size: u64,
    ) -> Result<Option<Result<SignedNote, String>>, Error> {
        let Some(bytes) = self.get(&checkpoint_key(size)).await? else {
            return Ok(None);
        };
        let Ok(text) = String::from_utf8(bytes) else {
            return Ok(Some(Err("it is not text".to_owned())));
        };
        Ok(Some(SignedNote::parse(&text).map_err(|e| e.to_string())))
    }

    /// The sizes of every checkpoint larger than `after` (all of them for `None`), smallest
    /// first.
    pub async fn checkpoint_sizes(&self, after: Option<u64>) -> Result<Vec<u64>, Error> {
        let keys = self
            .keys(CHECKPOINTS_PREFIX, after.map(checkpoint_key))
            .await?;
        Ok(keys
            .iter()
            .filter_map(|k| parse_checkpoint_key(k))
            .collect())
    }

    /// The newest checkpoint's size (after `after`, when given).
    pub async fn newest_size(&self, after: Option<u64>) -> Result<Option<u64>, Error> {
        Ok(self.checkpoint_sizes(after).await?.last().copied())
    }

    /// One cosignature object, read as a witness writes it: at most [`MAX_COSIGNATURE_BYTES`],
    /// one signature line whose key id is the one its key names (`None` otherwise: passed over).
    async fn cosignature_at(&self, key: &str) -> Result<Option<NoteSignature>, Error> {
        let Some(Ok(bytes)) = self
            .archive
            .current_small(key, MAX_COSIGNATURE_BYTES)
            .await?
        else {
            return Ok(None);
        };
        let Ok(text) = String::from_utf8(bytes) else {
            return Ok(None);
        };
        let named = key.rsplit('/').next().unwrap_or_default();
        // A cosignature object holds one signature line: parse it as a note's.
        Ok(match SignedNote::parse(&format!("x\n\n{text}")) {
            Ok(note) => match <[NoteSignature; 1]>::try_from(note.signatures) {
                Ok([line]) if hex(&line.key_id) == named => Some(line),
                _ => None,
            },
            Err(_) => None,
        })
    }

    /// The cosignatures stored for the checkpoint of `size`: each of `witnesses`' own (the
    /// object at its key id), then at most [`MAX_COSIGNATURES`] others as listed (a verifier
    /// checks only the witnesses it knows). Each object is one line of at most
    /// [`MAX_COSIGNATURE_BYTES`] under its own key id; any other is passed over.
    pub async fn cosignatures(
        &self,
        size: u64,
        witnesses: &[WitnessKey],
    ) -> Result<Vec<NoteSignature>, Error> {
        let mut lines = self.witness_cosignatures(size, witnesses).await?;
        let mine: Vec<String> = witnesses
            .iter()
            .map(|w| cosignature_key(size, w.key_id()))
            .collect();
        let listed = self
            .archive
            .keys(&cosignatures_of(size), None, MAX_COSIGNATURES)
            .await?;
        for key in listed.iter().filter(|k| !mine.contains(k)) {
            if let Some(line) = self.cosignature_at(key).await?
                && !lines.contains(&line)
            {
                lines.push(line);
            }
        }
        Ok(lines)
    }

    /// What each of `witnesses` stored for the checkpoint of `size` (its own object only).
    pub async fn witness_cosignatures(
        &self,
        size: u64,
        witnesses: &[WitnessKey],
    ) -> Result<Vec<NoteSignature>, Error> {
        let mut lines = Vec::new();
        for witness in witnesses {
            if let Some(line) = self
                .cosignature_at(&cosignature_key(size, witness.key_id()))
                .await?
                && !lines.contains(&line)
            {
                lines.push(line);
            }
        }
        Ok(lines)
    }

    /// The checkpoint of `size` with the stored cosignatures added ([`Self::cosignatures`]),
    /// never a line that bears the log's own name (the checkpoint's origin) or a key id of the
    /// log's signatures on it.
    pub async fn cosigned_checkpoint(
        &self,
        size: u64,
        witnesses: &[WitnessKey],
    ) -> Result<Option<SignedNote>, Error> {
        let Some(note) = self.checkpoint(size).await? else {
            return Ok(None);
        };
        Ok(Some(self.with_cosignatures(note, size, witnesses).await?))
    }

    /// `note`, the checkpoint of `size`, with the stored cosignatures added
    /// ([`Self::cosignatures`]), never a line that bears the log's own name (the checkpoint's
    /// origin) or a key id of the log's signatures on it.
    pub async fn with_cosignatures(
        &self,
        mut note: SignedNote,
        size: u64,
        witnesses: &[WitnessKey],
    ) -> Result<SignedNote, Error> {
        let log_name = note.body.lines().next().unwrap_or_default().to_owned();
        let log_ids: Vec<[u8; 4]> = note.signatures.iter().map(|s| s.key_id).collect();
        for line in self.cosignatures(size, witnesses).await? {
            if line.name != log_name && !log_ids.contains(&line.key_id) {
                note.add(line);
            }
        }
        Ok(note)
    }

    /// The largest of `checkpoints` (sizes with a checkpoint, after `after`, smallest first) whose
    /// checkpoint one of `witnesses` cosigned (its own object, verified over the checkpoint's
    /// body as stored): sizes named by cosignature keys and by checkpoint keys both, largest
    /// first, at most [`MAX_COSIGNED_TRIED`] of them tried. `None` when there is none (or no
    /// witness).
    pub async fn newest_cosigned(
        &self,
        after: Option<u64>,
        checkpoints: &[u64],
        witnesses: &[WitnessKey],
    ) -> Result<Option<u64>, Error> {
        if witnesses.is_empty() || checkpoints.is_empty() {
            return Ok(None);
        }
        let candidates = self
            .cosigned_sizes(after)
            .await?
            .into_iter()
            .rev()
            .filter(|size| checkpoints.binary_search(size).is_ok())
            .take(MAX_COSIGNED_TRIED);
        for size in candidates {
            let Ok(Some(note)) = self.checkpoint(size).await else {
                continue;
            };
            let lines = self.witness_cosignatures(size, witnesses).await?;
            let cosigned = SignedNote {
                body: note.body,
                signatures: lines,
            };
            if witnesses
                .iter()
                .any(|w| check_cosignature(&cosigned, w).is_ok())
            {
                return Ok(Some(size));
            }
        }
        Ok(None)
    }

    /// The sizes that have at least one cosignature, after `after`, smallest first.
    pub async fn cosigned_sizes(&self, after: Option<u64>) -> Result<Vec<u64>, Error> {
        let keys = self
            .keys(
                COSIGNATURES_PREFIX,
                after.map(|a| format!("{COSIGNATURES_PREFIX}{a:020}/~")),
            )
            .await?;
        let mut sizes: Vec<u64> = keys
            .iter()
            .filter_map(|k| audit_model::note::parse_cosignature_key(k))
            .collect();
        sizes.dedup();
        Ok(sizes)
    }
}
