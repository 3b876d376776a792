//! Owns `verify`'s check of the transparency log (docs/archive.md "The transparency log") over the
//! digests of the range that carry `tree`: each period's leaves (the lines of its listed objects,
//! hashed as `content` reads them) appended to the tree's edge give the digest's size and root, and
//! the tiles hold them (`leaf missing`); each digest's checkpoint is there, signed by the digest
//! key, and says the digest's size and root; each checkpoint extends the one before it, by a
//! consistency proof made from the tiles (`checkpoint inconsistent`); and with `--witness-key` each
//! checkpoint size carries that witness's cosignature (`cosignature missing`). Must not know how
//! objects are listed or read.
//!
//! The sealer writes a period's tiles and checkpoint after its digest, and a run that stops in
//! between has the next one write them; witnesses cosign on their own schedule. So for a digest
//! sealed less than the grace ago (`--grace`, as for a digest not sealed yet), a missing tile,
//! checkpoint or cosignature is counted as not written yet, not a problem.
//!
//! Memory: the tree's edge (at most 255 hashes a level) and the full tiles of one batch, never
//! the range's leaves.

use std::collections::BTreeSet;

use audit_model::digest::{Digest, ProblemKind, TreeHead};
use audit_model::note::{Checkpoint, SignedNote, WitnessKey, checkpoint_key, origin};
use audit_model::tlog::{
    Hash, HexHash, TILE_HEIGHT, TileRef, TlogError, TreeEdge, consistency_proof, consistency_tiles,
    log_names, parse_hex_hash, verify_consistency,
};

use super::report::{LogSummary, Problem};
use crate::Error;
use crate::archive::Archive;
use crate::tlog::{LogKey, LogReader, check_cosignature};

/// Full tiles compared at once (read concurrently by `LogReader::tiles`).
const TILE_BATCH: usize = 16;

/// What the digest before the next period said of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    /// Not known: no digest before it was checked (the range's start without one, a missing or
    /// unusable digest).
    Unknown,
    /// A digest without a tree: the log begins at the next digest that has one.
    NoTree,
    /// The tree after the previous period, and that digest's key.
    Tree(TreeHead, String),
}

/// The log's check across the range's periods.
#[derive(Debug)]
pub struct LogCheck {
    witnesses: Vec<WitnessKey>,
    origin: String,
    before: Before,
    /// The tree after the last period whose leaves held, when known.
    edge: Option<TreeEdge>,
    /// The size whose edge could not be read from the tiles, once reported.
    unreadable: Option<u64>,
    /// The last checkpoint that held in the range: its size and root, the next one's consistency
    /// proof starts from it.
    last_checkpoint: Option<(u64, Hash)>,
    /// The last size whose checkpoint was checked (consecutive digests of one size share it).
    checked_size: Option<u64>,
    /// Now, and the grace after a digest's sealing during which its log may be incomplete.
    now: i64,
    grace: i64,
    pub summary: LogSummary,
}

/// One period's leaves as they are appended: the edge from the tree before it, the full tiles
/// they fill (compared with the stored ones batch by batch), and what differed.
#[derive(Debug)]
pub struct PeriodLeaves {
    digest_key: String,
    tree: TreeHead,
    root: Hash,
    start: u64,
    edge: TreeEdge,
    pending: Vec<(TileRef, Vec<u8>)>,
    findings: Vec<Finding>,
    compared: u64,
    /// Sealed within the grace: a missing tile is not written yet.
    fresh: bool,
}

/// A stored tile that does not hold what the leaves give.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Finding {
    /// Entry `entry` differs (or is absent: the tile is shorter).
    Differs {
        tile: TileRef,
        entry: u64,
    },
    Missing(TileRef),
    /// The tile's own name (or an alternate before the one that holds the leaves' hashes)
    /// holds another object: planted (docs/archive.md "Planted log objects").
    Planted(TileRef, String),
}

impl Finding {
    /// The first leaf the finding concerns.
    fn leaf(&self) -> u64 {
        let (tile, entry) = match self {
            Finding::Differs { tile, entry } => (tile, *entry),
            Finding::Missing(tile) | Finding::Planted(tile, _) => (tile, 0),
        };
        first_leaf(tile, entry)
    }

    fn problem(&self) -> Problem {
        match self {
            Finding::Differs { tile, entry } => {
                let leaf = first_leaf(tile, *entry);
                let what = if tile.level == 0 {
                    format!("holds another hash at leaf {leaf}")
                } else {
                    format!(
                        "holds another hash for the {} leaves from leaf {leaf}",
                        1u64 << (tile.level * TILE_HEIGHT).min(63)
                    )
                };
                Problem::new(
                    ProblemKind::LeafMissing,
                    tile.key(),
                    format!(
                        "{what} (entry {entry}) than the listed objects' lines give, though they give the digest's root: a proof read from this tile would not hold"
                    ),
                )
            }
            Finding::Planted(tile, name) => Problem::new(
                ProblemKind::LogObjectPlanted,
                name,
                format!(
                    "not the tile of the tree's hashes from leaf {} the listed objects' lines give: someone wrote it at that name; the sealer wrote the tile under the next",
                    first_leaf(tile, 0)
                ),
            ),
            Finding::Missing(tile) => Problem::new(
                ProblemKind::LeafMissing,
                tile.key(),
                format!(
                    "missing: the tile of the tree's hashes from leaf {}",
                    first_leaf(tile, 0)
                ),
            ),
        }
    }
}

/// When one of `tile`'s alternates holds `want` (docs/archive.md "Planted log objects"): the
/// names before it (read in order up to the first that is not there).
async fn planted_before<A: Archive>(
    reader: &LogReader<'_, A>,
    tile: &TileRef,
    want: &[u8],
) -> Result<Option<Vec<String>>, Error> {
    let names = log_names(&tile.key());
    for (n, name) in names.iter().enumerate().skip(1) {
        match reader.get(name).await? {
            None => return Ok(None),
            Some(bytes) if bytes == want => return Ok(Some(names[..n].to_vec())),
            Some(_) => {}
        }
    }
    Ok(None)
}

/// The first leaf under entry `entry` of `tile`.
fn first_leaf(tile: &TileRef, entry: u64) -> u64 {
    (tile.index * 256 + entry) << (tile.level * TILE_HEIGHT).min(63)
}

fn hex(hash: &Hash) -> String {
    HexHash(hash).to_string()
}

impl PeriodLeaves {
    /// Appends one object's leaves (in the digest's order).
    pub fn push(&mut self, leaves: &[Hash]) {
        for leaf in leaves {
            self.edge.push(*leaf, &mut self.pending);
        }
    }

    /// Whether enough full tiles wait to be compared.
    pub fn due(&self) -> bool {
        self.pending.len() >= TILE_BATCH
    }

    /// Compares the full tiles filled so far with the stored ones.
    pub async fn compare<A: Archive>(&mut self, reader: &LogReader<'_, A>) -> Result<(), Error> {
        let tiles = std::mem::take(&mut self.pending);
        self.compare_tiles(reader, tiles).await
    }

    async fn compare_tiles<A: Archive>(
        &mut self,
        reader: &LogReader<'_, A>,
        tiles: Vec<(TileRef, Vec<u8>)>,
    ) -> Result<(), Error> {
        if tiles.is_empty() {
            return Ok(());
        }
        let refs: BTreeSet<TileRef> = tiles.iter().map(|(t, _)| *t).collect();
        let stored = reader.tiles(self.edge.size, refs).await?;
        for (tile, want) in tiles {
            self.compared += 1;
            let Some(have) = stored.tiles.get(&tile) else {
                self.findings.push(Finding::Missing(tile));
                continue;
            };
            let differs = want
                .chunks(32)
                .zip(have.chunks(32).map(Some).chain(std::iter::repeat(None)))
                .position(|(w, h)| h != Some(w));
            // A longer tile than the leaves make differs after their last entry.
            let entry = differs.or((have.len() != want.len()).then_some(want.len() / 32));
            if entry.is_some()
                && let Some(planted) = planted_before(reader, &tile, &want).await?
            {
                self.findings
                    .extend(planted.into_iter().map(|name| Finding::Planted(tile, name)));
            } else if let Some(entry) = entry {
                self.findings.push(Finding::Differs {
                    tile,
                    entry: entry as u64,
                });
            }
        }
        Ok(())
    }
}

/// When the digest was sealed: its `sealedAt`, or when its period could be sealed, whichever is
/// later (a schedule that stopped seals old periods late).
fn sealed_at(digest: &Digest) -> i64 {
    let sealable = digest.period().map(|p| p.sealable_at()).unwrap_or(0);
    chrono::DateTime::parse_from_rfc3339(&digest.sealed_at)
        .map(|t| t.timestamp())
        .unwrap_or(0)
        .max(sealable)
}

impl LogCheck {
    /// `now` and `grace` (seconds): a digest sealed less than `grace` before `now` may not have
    /// its whole log written yet.
    pub fn new(bucket: &str, witnesses: Vec<WitnessKey>, now: i64, grace: i64) -> Self {
        let summary = LogSummary {
            witnesses: witnesses.len() as u64,
            ..LogSummary::default()
        };
        Self {
            witnesses,
            origin: origin(bucket),
            before: Before::Unknown,
            edge: None,
            unreadable: None,
            last_checkpoint: None,
            checked_size: None,
            now,
            grace,
            summary,
        }
    }

    /// What the digest before the range's first period says of the tree.
    pub fn set_before(&mut self, before: Before) {
        self.before = before;
    }

    /// A period without a usable digest: the tree before the next one is not known.
    pub fn unknown(&mut self) {
        self.before = Before::Unknown;
        self.edge = None;
    }

    /// The start of a digest's period (validly signed): the tree before its leaves, read from
    /// the tiles when it is not the one the last period left; `None` when the digest has no tree
    /// or its leaves cannot be checked (with the problems why).
    pub async fn start<A: Archive>(
        &mut self,
        reader: &LogReader<'_, A>,
        digest: &Digest,
        digest_key: &str,
    ) -> Result<(Option<PeriodLeaves>, Vec<Problem>), Error> {
        let mut problems = Vec::new();
        let Some(tree) = digest.tree.clone() else {
            self.summary.untreed += 1;
            if let Before::Tree(_, previous) = &self.before {
                problems.push(Problem::new(
                    ProblemKind::LeafMissing,
                    digest_key,
                    format!(
                        "carries no tree, though the digest before it ({previous}) does: its period's {} events are not leaves of the transparency log",
                        digest.events
                    ),
                ));
                self.before = Before::Unknown;
            } else {
                self.before = Before::NoTree;
            }
            self.edge = None;
            return Ok((None, problems));
        };
        self.summary.digests += 1;
        self.summary.to = tree.size;
        let Some(root) = parse_hex_hash(&tree.root) else {
            problems.push(Problem::new(
                ProblemKind::CheckpointInconsistent,
                digest_key,
                format!("its tree's root {:?} is not a hex SHA-256", tree.root),
            ));
            self.before = Before::Unknown;
            self.edge = None;
            return Ok((None, problems));
        };
        // The tree before this period: its size, and the root it must have when known.
        let before = std::mem::replace(
            &mut self.before,
            Before::Tree(tree.clone(), digest_key.to_owned()),
        );
        let carried = self.edge.take();
        let (start, want): (Option<u64>, Option<(Hash, String)>) =
            match (&before, digest.previous.is_none()) {
                (_, true) | (Before::NoTree, _) => (Some(0), None),
                (Before::Tree(head, key), _) => (
                    Some(head.size),
                    parse_hex_hash(&head.root).map(|r| (r, key.clone())),
                ),
                (Before::Unknown, _) => (tree.size.checked_sub(digest.events), None),
            };
        let Some(start) = start else {
            problems.push(Problem::new(
                ProblemKind::LeafMissing,
                digest_key,
                format!(
                    "lists {} events, more than its tree of {} leaves holds",
                    digest.events, tree.size
                ),
            ));
            return Ok((None, problems));
        };
        self.summary.from.get_or_insert(start);
        if start == 0 && self.summary.begins.is_none() {
            self.summary.begins = Some(digest_key.to_owned());
        }
        let edge = match carried {
            Some(edge)
                if edge.size == start && want.as_ref().is_none_or(|(r, _)| edge.root() == *r) =>
            {
                edge
            }
            _ if start == 0 => TreeEdge::default(),
            _ => match self
                .load_edge(reader, start, want.as_ref().map(|(r, _)| *r))
                .await?
            {
                Ok(edge) => match &want {
                    Some((root, previous)) if edge.root() != *root => {
                        problems.push(Problem::new(
                            ProblemKind::LeafMissing,
                            digest_key,
                            format!(
                                "its leaves cannot be checked: the partial tiles of the tree of {start} leaves give the root {}, not {previous}'s {}",
                                hex(&edge.root()),
                                hex(root)
                            ),
                        ));
                        return Ok((None, problems));
                    }
                    _ => edge,
                },
                Err(path) => {
                    if self.unreadable != Some(start) {
                        self.unreadable = Some(start);
                        problems.push(Problem::new(
                            ProblemKind::LeafMissing,
                            digest_key,
                            format!(
                                "its leaves cannot be checked: the tree before them ({start} leaves) cannot be read from the tiles: {path} is missing or not its width"
                            ),
                        ));
                    }
                    return Ok((None, problems));
                }
            },
        };
        Ok((
            Some(PeriodLeaves {
                digest_key: digest_key.to_owned(),
                tree,
                root,
                start,
                edge,
                pending: Vec::new(),
                findings: Vec::new(),
                compared: 0,
                fresh: self.fresh(digest),
            }),
            problems,
        ))
    }

    /// Whether `digest` was sealed less than the grace ago.
    fn fresh(&self, digest: &Digest) -> bool {
        self.now < sealed_at(digest).saturating_add(self.grace)
    }

    /// The edge of the tree of `size` from its partial tiles (those that give `root`, when
    /// given and some have alternates), or the key of the one missing.
    async fn load_edge<A: Archive>(
        &self,
        reader: &LogReader<'_, A>,
        size: u64,
        root: Option<Hash>,
    ) -> Result<Result<TreeEdge, String>, Error> {
        let names: BTreeSet<TileRef> = TreeEdge::edge_tiles(size).into_iter().collect();
        // Among alternates (docs/archive.md "Planted log objects"), the tiles that give `root`.
        let (tiles, _) = reader
            .tiles_checked(size, names, |tiles| {
                TreeEdge::from_tiles(size, &tiles.tiles)
                    .is_ok_and(|edge| root.is_none_or(|root| edge.root() == root))
            })
            .await?;
        Ok(
            TreeEdge::from_tiles(size, &tiles.tiles).map_err(|e| match e {
                TlogError::TileMissing { path } => path,
                other => other.to_string(),
            }),
        )
    }

    /// The end of a period whose leaves were appended: the rest of its tiles compared, its root
    /// and size against the digest's tree (`leaf missing`).
    pub async fn finish<A: Archive>(
        &mut self,
        reader: &LogReader<'_, A>,
        mut leaves: PeriodLeaves,
    ) -> Result<Vec<Problem>, Error> {
        let mut tiles = std::mem::take(&mut leaves.pending);
        if leaves.edge.size > leaves.start {
            tiles.extend(leaves.edge.partial_tiles());
        }
        leaves.compare_tiles(reader, tiles).await?;
        let appended = leaves.edge.size - leaves.start;
        self.summary.leaves += appended;
        self.summary.tiles += leaves.compared;
        let root = leaves.edge.root();
        let mut problems = Vec::new();
        if leaves.edge.size == leaves.tree.size && root == leaves.root {
            let before = leaves.findings.len();
            let fresh = leaves.fresh;
            leaves
                .findings
                .retain(|f| !(fresh && matches!(f, Finding::Missing(_))));
            if leaves.findings.len() < before {
                self.summary.pending += 1;
            }
            problems.extend(leaves.findings.iter().map(Finding::problem));
            self.edge = Some(leaves.edge);
        } else {
            let first = leaves
                .findings
                .iter()
                .map(Finding::leaf)
                .min()
                .map(|leaf| {
                    format!("; the first leaf that differs from the stored tiles is {leaf}")
                })
                .unwrap_or_default();
            problems.push(Problem::new(
                ProblemKind::LeafMissing,
                &leaves.digest_key,
                format!(
                    "its listed objects' {appended} lines appended to the tree of {} leaves give a tree of {} leaves with root {}, not its tree of {} leaves with root {}{first}",
                    leaves.start,
                    leaves.edge.size,
                    hex(&root),
                    leaves.tree.size,
                    leaves.tree.root
                ),
            ));
            // The next period starts from this digest's tree as the tiles hold it.
            self.edge = None;
        }
        Ok(problems)
    }

    /// A digest's checkpoint (when its tree's size was not just checked): there, signed by the
    /// log's key, its size and root the digest's; consistent with the previous checkpoint of
    /// the range; cosigned by each witness asked for.
    pub async fn checkpoint<A: Archive>(
        &mut self,
        reader: &LogReader<'_, A>,
        log_key: &LogKey,
        digest: &Digest,
        digest_key: &str,
    ) -> Result<Vec<Problem>, Error> {
        let mut problems = Vec::new();
        let Some(tree) = &digest.tree else {
            return Ok(problems);
        };
        let Some(root) = parse_hex_hash(&tree.root) else {
            return Ok(problems); // reported at the period's start
        };
        if self.checked_size == Some(tree.size) {
            // A period without leaves names the checkpoint of the same size: checked already;
            // its root must be the same (the leaves' check says so when it is not).
            return Ok(problems);
        }
        self.checked_size = Some(tree.size);
        let key = checkpoint_key(tree.size);
        let inconsistent =
            |detail: String| Problem::new(ProblemKind::CheckpointInconsistent, &key, detail);
        if tree.checkpoint != key {
            problems.push(Problem::new(
                ProblemKind::CheckpointInconsistent,
                digest_key,
                format!(
                    "its tree names the checkpoint {}, not {key}, the one of its size",
                    tree.checkpoint
                ),
            ));
        }
        let fresh = self.fresh(digest);
        let (stored, planted) = reader.checkpoint_signed(tree.size, log_key).await?;
        problems.extend(planted.into_iter().map(|name| {
            Problem::new(
                ProblemKind::LogObjectPlanted,
                name,
                format!(
                    "not the checkpoint of {digest_key}'s tree signed by the log's key: someone wrote it at that name; the sealer wrote the checkpoint under the next (docs/archive.md \"Planted log objects\")"
                ),
            )
        }));
        if stored.is_none() && fresh {
            // Written after the digest, by this run or the next.
            self.summary.pending += 1;
            return Ok(problems);
        }
        let held = match stored {
            None => Err(format!(
                "missing: the checkpoint of {digest_key}'s tree of {} leaves",
                tree.size
            )),
            Some(Err(why)) => Err(format!("not a checkpoint: {why}")),
            Some(Ok(note)) => log_key.checkpoint(&note).map_err(|e| e.to_string()).and_then(|checkpoint| {
                if checkpoint.origin != self.origin {
                    Err(format!(
                        "its origin is {:?}, not this log's {:?}",
                        checkpoint.origin, self.origin
                    ))
                } else if checkpoint.size != tree.size || checkpoint.root != root {
                    Err(format!(
                        "says a tree of {} leaves with root {}, but {digest_key} says {} leaves with root {}",
                        checkpoint.size,
                        hex(&checkpoint.root),
                        tree.size,
                        tree.root
                    ))
                } else {
                    Ok(())
                }
            }),
        };
        match held {
            Err(why) => problems.push(inconsistent(why)),
            Ok(()) => {
                self.summary.checkpoints += 1;
                if let Some(problem) = self.consistent(reader, tree.size, root).await? {
                    problems.push(inconsistent(problem));
                }
                self.last_checkpoint = Some((tree.size, root));
            }
        }
        if !self.witnesses.is_empty() {
            let body = Checkpoint {
                origin: self.origin.clone(),
                size: tree.size,
                root,
            }
            .body();
            let note = SignedNote {
                body,
                signatures: reader
                    .witness_cosignatures(tree.size, &self.witnesses)
                    .await?,
            };
            for witness in &self.witnesses {
                match check_cosignature(&note, witness) {
                    Ok(_) => self.summary.cosignatures += 1,
                    // A witness cosigns on its own schedule, after the checkpoint is written.
                    Err(_) if fresh && note.by(&witness.name, witness.key_id()).next().is_none() => {
                        self.summary.uncosigned_yet += 1;
                    }
                    Err(why) => problems.push(Problem::new(
                        ProblemKind::CosignatureMissing,
                        &key,
                        format!(
                            "the checkpoint of size {} has no valid cosignature by the witness {}: {why}",
                            tree.size, witness.name
                        ),
                    )),
                }
            }
        }
        Ok(problems)
    }

    /// Why the checkpoint of `size` and `root` does not extend the previous one of the range, if
    /// it does not: an RFC 9162 consistency proof made from the stored tiles.
    async fn consistent<A: Archive>(
        &mut self,
        reader: &LogReader<'_, A>,
        size: u64,
        root: Hash,
    ) -> Result<Option<String>, Error> {
        let Some((old, old_root)) = self.last_checkpoint else {
            return Ok(None);
        };
        if old == size {
            return Ok((old_root != root).then(|| {
                format!(
                    "a second tree of {size} leaves: its root {} is not {} of the checkpoint before",
                    hex(&root),
                    hex(&old_root)
                )
            }));
        }
        if old > size {
            return Ok(Some(format!(
                "a tree of {size} leaves after one of {old}: the log went back"
            )));
        }
        self.summary.consistency += 1;
        let needed = consistency_tiles(old, size).unwrap_or_default();
        let (mut tiles, _) = reader
            .tiles_checked(size, needed, |tiles| {
                consistency_proof(old, size, tiles).is_ok_and(|proof| {
                    verify_consistency(old, size, &old_root, &root, &proof).is_ok()
                })
            })
            .await?;
        let proof = match consistency_proof(old, size, &mut tiles) {
            Ok(proof) => proof,
            Err(TlogError::TileMissing { path }) => {
                return Ok(Some(format!(
                    "its consistency with the checkpoint of size {old} cannot be proven: the tile {path} is missing"
                )));
            }
            Err(e) => return Ok(Some(e.to_string())),
        };
        Ok(verify_consistency(old, size, &old_root, &root, &proof)
            .err()
            .map(|e| {
                format!(
                    "does not extend the checkpoint of size {old} (root {}): the consistency proof made from the tiles fails: {e}",
                    hex(&old_root)
                )
            }))
    }
}
