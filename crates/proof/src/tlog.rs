//! Owns reading the transparency log (for prove, the witness, verify and the viewer): its objects
//! read from the archive bucket through the read port (tiles, checkpoints, cosignatures).
//! Checking them is `offline`'s, re-exported here. Must not know the table or KMS; the formats
//! are `audit_model::tlog` and `audit_model::note`'s (docs/archive.md "The transparency log").

use std::collections::BTreeSet;

use audit_model::note::{
    CHECKPOINTS_PREFIX, COSIGNATURES_PREFIX, NoteSignature, SignedNote, checkpoint_key,
    cosignatures_of, parse_checkpoint_key,
};
use audit_model::tlog::{TileRef, Tiles};
use futures::{StreamExt, TryStreamExt};

pub use crate::offline::{
    CheckError, LogKey, Verdict, check_cosignature, check_proof, witness_key_arg,
};

use crate::Error;
use crate::archive::Archive;

/// Tiles read at once.
const TILE_CONCURRENCY: usize = 16;
/// Keys per listing page.
const LIST_PAGE: usize = 1000;

/// The log's objects in the archive bucket, read (`archive`: the read port, `S3Archive` over S3
/// or its twin).
pub struct LogReader<'a, A> {
    pub archive: &'a A,
}

impl<A: Archive> LogReader<'_, A> {
    pub(crate) async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        self.archive.current(key).await
    }

    async fn keys(&self, prefix: &str, after: Option<String>) -> Result<Vec<String>, Error> {
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

    /// Every cosignature line stored for the checkpoint of `size` (by any witness; a line that
    /// does not parse is passed over: a verifier checks only the witnesses it knows).
    pub async fn cosignatures(&self, size: u64) -> Result<Vec<NoteSignature>, Error> {
        let mut lines = Vec::new();
        for key in self.keys(&cosignatures_of(size), None).await? {
            let Some(bytes) = self.get(&key).await? else {
                continue;
            };
            let Ok(text) = String::from_utf8(bytes) else {
                continue;
            };
            // A cosignature object holds one signature line: parse it as a note's.
            if let Ok(note) = SignedNote::parse(&format!("x\n\n{text}")) {
                lines.extend(note.signatures);
            }
        }
        Ok(lines)
    }

    /// The checkpoint of `size` with every stored cosignature added.
    pub async fn cosigned_checkpoint(&self, size: u64) -> Result<Option<SignedNote>, Error> {
        let Some(mut note) = self.checkpoint(size).await? else {
            return Ok(None);
        };
        for line in self.cosignatures(size).await? {
            note.add(line);
        }
        Ok(Some(note))
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
