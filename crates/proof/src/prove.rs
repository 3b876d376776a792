//! Owns making the transparency log's proofs from the archive bucket: `auditctl prove` (where an
//! event's leaf is, found through the period indexes without reading a period's objects, and its
//! inclusion proof in a signed checkpoint) and `auditctl consistency` (the RFC 9162 consistency
//! proof between two tree sizes), each checked before it is given out, and the count of what was
//! read to make it. Finding the leaf through the indexes is `index.rs`'s, counting the reads
//! `counted.rs`'s. Reads through `tlog::LogReader`; the formats are `audit_model::note`'s and
//! `audit_model::tlog`'s. Must not know the table, KMS or the command line (the commands pass the
//! event's times and the log's key).

use std::io::Read;

use audit_model::archive::Period;
use audit_model::note::{
    Checkpoint, IndexRow, PROOF_FORMAT, Proof, SignedNote, WitnessKey, checkpoint_key,
};
use audit_model::tlog::{
    Hash, HexHash, TlogError, consistency_proof, consistency_tiles, inclusion_proof,
    inclusion_tiles, leaf_hash, tree_root, verify_consistency, verify_inclusion,
};
use chrono::{DateTime, SecondsFormat};
use serde::Serialize;

use crate::Error;
use crate::archive::Archive;
use crate::tlog::{LogKey, LogReader, check_proof};

pub mod archived;
mod counted;
mod index;

pub use counted::{Counted, ReadCount};
pub(crate) use index::Unindexed;
use index::same_time;
pub use index::{Found, Wanted};

/// Why a proof could not be made: what was found, typed; what to do about it is the caller's to
/// say (auditctl's words, docs/architecture.md "The crates").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProveError {
    /// No item of the table has the messageId (expired by TTL, or never received).
    #[error("messageId {message_id} is not in the table {table}")]
    NotInTable { message_id: String, table: String },
    /// More than one item has the messageId: which one is to be proven is not said.
    #[error("messageId {message_id} has {count} items in the table (auditTime {times})")]
    Ambiguous {
        message_id: String,
        count: usize,
        times: String,
    },
    /// The messageId's items have other auditTimes than the one wanted.
    #[error(
        "messageId {message_id} has no item with auditTime {wanted} in the table (its items: {times})"
    )]
    NoSuchTime {
        message_id: String,
        wanted: String,
        times: String,
    },
    /// The event's period is not sealed, and need not be yet: the one period it belongs to (that
    /// of its `receivedAt`, or a later one the search reached: `Wanted::own`) and the time by
    /// which the archiver's next scheduled run seals it (`verify::sealed_by`: its end, the seal
    /// delay, the schedule or one period, whichever is shorter).
    #[error(
        "the period {period} of messageId {message_id} is not sealed yet; the archiver seals it by {sealed_by}"
    )]
    NotSealed {
        message_id: String,
        period: String,
        sealed_by: String,
    },
    /// The period should have been sealed by `due` and is not.
    #[error(
        "the period {period} (where messageId {message_id} may be archived) should have been sealed by {due} and is not"
    )]
    Overdue {
        message_id: String,
        period: String,
        due: String,
    },
    /// The period's digest is there, its checkpoint not yet (the sealer writes it after).
    #[error(
        "the period {period} is sealed (digest {digest}) but its checkpoint {checkpoint} is not written yet"
    )]
    LogPending {
        period: String,
        digest: String,
        checkpoint: String,
    },
    /// No period's index from `first` to `last` names the event.
    #[error(
        "messageId {message_id} (auditTime {audit_time}) is not in the index of the periods {first} to {last}"
    )]
    NotFound {
        message_id: String,
        audit_time: String,
        first: String,
        last: String,
        /// How many of those periods were sealed before the log began (their events are not
        /// leaves).
        before_log: u32,
        /// How many of those periods have no digest although a later period has one.
        no_digest: u32,
    },
    /// No checkpoint at all in the bucket.
    #[error("no checkpoint yet in the archive bucket")]
    NoCheckpoint,
    /// No checkpoint of the tree size asked for.
    #[error("no checkpoint of tree size {size} ({key})")]
    NoCheckpointOf { size: u64, key: String },
    /// The tree size asked for does not hold the leaf.
    #[error("the tree of size {size} does not hold leaf {leaf}")]
    TooSmall { size: u64, leaf: u64 },
    /// A consistency proof asked for from a larger tree to a smaller one.
    #[error("--old-size {old} is larger than --new-size {new}")]
    SizesOutOfOrder { old: u64, new: u64 },
    /// The archive does not say what the log says: a problem for `verify`, found in `period`
    /// when one is known.
    #[error("{what}")]
    Broken {
        what: String,
        period: Option<String>,
    },
    /// Two checkpoints the log signed disagree.
    #[error("checkpoint inconsistent: {0}")]
    Inconsistent(String),
}

pub(crate) fn time(seconds: i64) -> String {
    DateTime::from_timestamp(seconds, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn period_text(period: Period) -> String {
    format!("{} to {}", time(period.start), time(period.end()))
}

pub use audit_model::tlog::object_lines;

pub(crate) fn gunzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes).read_to_end(&mut text)?;
    Ok(text)
}

impl<A: Archive> LogReader<'_, A> {
    /// The checkpoint of `size`, the stored cosignatures added (`witnesses`' own first; never a
    /// line bearing the log's name or key), its log signature checked with `key` and its origin
    /// the bucket's.
    pub async fn signed_checkpoint(
        &self,
        size: u64,
        key: &LogKey,
        origin: &str,
        witnesses: &[WitnessKey],
    ) -> Result<(SignedNote, Checkpoint), Error> {
        let (stored, _) = self.checkpoint_signed(size, key).await?;
        let note = match stored {
            None => {
                return Err(ProveError::NoCheckpointOf {
                    size,
                    key: checkpoint_key(size),
                }
                .into());
            }
            Some(Err(why)) => {
                return Err(Error::NotANote {
                    key: checkpoint_key(size),
                    why,
                });
            }
            Some(Ok(note)) => self.with_cosignatures(note, size, witnesses).await?,
        };
        let checkpoint = key.checkpoint(&note).map_err(|e| ProveError::Broken {
            what: format!("the checkpoint {}: {e}", checkpoint_key(size)),
            period: None,
        })?;
        if checkpoint.origin != origin || checkpoint.size != size {
            return Err(ProveError::Broken {
                what: format!(
                    "the checkpoint {} is of the log {:?}, size {}, not of {origin:?}, size {size}",
                    checkpoint_key(size),
                    checkpoint.origin,
                    checkpoint.size
                ),
                period: None,
            }
            .into());
        }
        Ok((note, checkpoint))
    }

    /// The tree size to prove leaf `leaf` in: `given`, else the largest with a valid
    /// cosignature by one of `witnesses` (`LogReader::newest_cosigned`), else the newest
    /// checkpoint.
    pub async fn proof_size(
        &self,
        leaf: u64,
        given: Option<u64>,
        witnesses: &[WitnessKey],
    ) -> Result<u64, Error> {
        if let Some(size) = given {
            if size <= leaf {
                return Err(ProveError::TooSmall { size, leaf }.into());
            }
            return Ok(size);
        }
        let checkpoints = self.checkpoint_sizes(Some(leaf)).await?;
        if let Some(size) = self
            .newest_cosigned(Some(leaf), &checkpoints, witnesses)
            .await?
        {
            return Ok(size);
        }
        match checkpoints.last().copied() {
            Some(size) => Ok(size),
            None if self.newest_size(None).await?.is_some() => Err(ProveError::Broken {
                what: format!("no checkpoint holds leaf {leaf}, which the index names"),
                period: None,
            }
            .into()),
            None => Err(ProveError::NoCheckpoint.into()),
        }
    }

    /// The proof of the event the index row names: its line read from its archive object, the
    /// tree size chosen, the checkpoint's signature checked, the path made from the tiles, and
    /// the whole checked as `check-proof` checks it.
    /// When the row gives no proof that holds (a planted index at the period's name can hold a
    /// wrong row for the event), the rows for the event that the index's later names give are
    /// tried in turn, and the first proof that holds is the answer; else the first row's failure.
    pub async fn prove(
        &self,
        found: &Found,
        key: &LogKey,
        origin: &str,
        witnesses: &[WitnessKey],
        tree_size: Option<u64>,
    ) -> Result<Proof, Error> {
        let first = match self
            .prove_row(&found.row, found.period, key, origin, witnesses, tree_size)
            .await
        {
            Err(Error::Prove(ProveError::Broken { what, period })) => {
                ProveError::Broken { what, period }
            }
            other => return other,
        };
        let same = |r: &IndexRow| {
            r.message_id == found.row.message_id && same_time(&r.audit_time, &found.row.audit_time)
        };
        let mut next = found.name + 1;
        while let Some(Some((row, name))) = self.index_row(found.period, next, same).await? {
            if let Ok(proof) = self
                .prove_row(&row, found.period, key, origin, witnesses, tree_size)
                .await
            {
                return Ok(proof);
            }
            next = name + 1;
        }
        Err(first.into())
    }

    /// The proof of the event `row` names in `period`'s index.
    async fn prove_row(
        &self,
        row: &IndexRow,
        period: Period,
        key: &LogKey,
        origin: &str,
        witnesses: &[WitnessKey],
        tree_size: Option<u64>,
    ) -> Result<Proof, Error> {
        let broken = |what: String| ProveError::Broken {
            what,
            period: Some(period_text(period)),
        };
        let Some(bytes) = self.get(&row.object).await? else {
            return Err(broken(format!(
                "the archive object {} that the index names is not there",
                row.object
            ))
            .into());
        };
        let text = gunzip(&bytes).map_err(|e| {
            broken(format!(
                "the archive object {} is not gzip ({e})",
                row.object
            ))
        })?;
        let lines = object_lines(&text);
        let line = usize::try_from(row.line_number)
            .ok()
            .and_then(|n| lines.get(n))
            .ok_or_else(|| {
                broken(format!(
                    "the archive object {} has no line {} (it has {})",
                    row.object,
                    row.line_number,
                    lines.len()
                ))
            })?;
        let line = std::str::from_utf8(line).map_err(|_| {
            broken(format!(
                "line {} of the archive object {} is not UTF-8",
                row.line_number, row.object
            ))
        })?;
        let size = self
            .proof_size(row.leaf_index, tree_size, witnesses)
            .await?;
        let (note, signed) = self.signed_checkpoint(size, key, origin, witnesses).await?;
        let leaf = leaf_hash(line.as_bytes());
        let (mut tiles, _) = self
            .tiles_checked(
                size,
                inclusion_tiles(row.leaf_index, size).map_err(tlog_broken)?,
                |tiles| {
                    inclusion_proof(row.leaf_index, size, tiles).is_ok_and(|path| {
                        verify_inclusion(row.leaf_index, size, &leaf, &path, &signed.root).is_ok()
                    })
                },
            )
            .await?;
        let path = inclusion_proof(row.leaf_index, size, &mut tiles).map_err(tlog_broken)?;
        let proof = Proof {
            format: PROOF_FORMAT.to_owned(),
            message_id: row.message_id.clone(),
            audit_time: row.audit_time.clone(),
            line: line.to_owned(),
            object: row.object.clone(),
            line_number: row.line_number,
            leaf_index: row.leaf_index,
            tree_size: size,
            inclusion_path: path.iter().map(|h| HexHash(h).to_string()).collect(),
            checkpoint: note.text(),
        };
        check_proof(&proof, key, &[]).map_err(|e| {
            broken(format!(
                "the proof made from the archive does not hold ({e}); leaf hash of the line {}",
                HexHash(&leaf_hash(line.as_bytes()))
            ))
        })?;
        Ok(proof)
    }

    /// The consistency proof of the tree of `old` leaves with the tree of `new` (the newest
    /// checkpoint's when `None`), made from the tiles and checked against the checkpoint of
    /// `new` and, when there is one, the checkpoint of `old`.
    pub async fn consistency(
        &self,
        old: u64,
        new: Option<u64>,
        key: &LogKey,
        origin: &str,
    ) -> Result<Consistency, Error> {
        let new = match new {
            Some(new) => new,
            None => self
                .newest_size(None)
                .await?
                .ok_or(ProveError::NoCheckpoint)?,
        };
        if old > new {
            return Err(ProveError::SizesOutOfOrder { old, new }.into());
        }
        let (note, checkpoint) = self.signed_checkpoint(new, key, origin, &[]).await?;
        let (mut tiles, _) = self
            .tiles_checked(
                new,
                consistency_tiles(old, new).map_err(tlog_broken)?,
                |tiles| tree_root(new, tiles).is_ok_and(|root| root == checkpoint.root),
            )
            .await?;
        let proof = consistency_proof(old, new, &mut tiles).map_err(tlog_broken)?;
        let old_root = tree_root(old, &mut tiles).map_err(tlog_broken)?;
        let tiles_root = tree_root(new, &mut tiles).map_err(tlog_broken)?;
        if tiles_root != checkpoint.root {
            return Err(ProveError::Inconsistent(format!(
                "the tiles give the tree of size {new} the root {}, its checkpoint says {}",
                HexHash(&tiles_root),
                HexHash(&checkpoint.root)
            ))
            .into());
        }
        verify_consistency(old, new, &old_root, &checkpoint.root, &proof).map_err(|e| {
            ProveError::Inconsistent(format!("the proof from {old} to {new} does not hold: {e}"))
        })?;
        let old_checkpoint = if old == new || old == 0 {
            None
        } else {
            match self.checkpoint_signed(old, key).await?.0 {
                None => None,
                Some(Err(why)) => {
                    return Err(Error::NotANote {
                        key: checkpoint_key(old),
                        why,
                    });
                }
                Some(Ok(old_note)) => {
                    let signed = key.checkpoint(&old_note).map_err(|e| ProveError::Broken {
                        what: format!("the checkpoint {}: {e}", checkpoint_key(old)),
                        period: None,
                    })?;
                    if signed.root != old_root {
                        return Err(ProveError::Inconsistent(format!(
                            "the checkpoint of size {old} says the root {}, the tree of size {new} gives {}",
                            HexHash(&signed.root),
                            HexHash(&old_root)
                        ))
                        .into());
                    }
                    Some(old_note.text())
                }
            }
        };
        Ok(Consistency {
            old_size: old,
            new_size: new,
            old_root: HexHash(&old_root).to_string(),
            new_root: HexHash(&checkpoint.root).to_string(),
            proof: proof.iter().map(|h| HexHash(h).to_string()).collect(),
            checkpoint: note.text(),
            old_checkpoint,
        })
    }
}

/// A proof that could not be made from the tiles: the log is damaged.
pub(crate) fn tlog_broken(error: TlogError) -> ProveError {
    ProveError::Broken {
        what: format!("the log's tiles cannot make the proof: {error}"),
        period: None,
    }
}

/// What `auditctl consistency` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Consistency {
    pub old_size: u64,
    pub new_size: u64,
    /// Hex.
    pub old_root: String,
    pub new_root: String,
    /// Hex, RFC 9162 order.
    pub proof: Vec<String>,
    /// The checkpoint of `newSize` (the log's signature and the stored cosignatures).
    pub checkpoint: String,
    /// The checkpoint of `oldSize`, when there is one (its root is `oldRoot`).
    pub old_checkpoint: Option<String>,
}

/// The hash of a hex string in a proof (for the tests and the checkers).
pub fn unhex_hash(text: &str) -> Option<Hash> {
    audit_model::tlog::parse_hex_hash(text)
}

#[cfg(test)]
mod tests;
