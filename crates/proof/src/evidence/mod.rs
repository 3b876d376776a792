//! Owns making an evidence bundle's contents from the archive bucket (docs/archive.md "Evidence
//! for auditors"): each period's index read, its events' lines read once per archive object,
//! one checkpoint with its cosignatures, each tile read once for every proof, the range proof
//! when the bundle holds every event of its periods, and the events of periods not sealed yet
//! listed as unproven. Each proof is checked as `check-proof` checks it; `bundle` makes and
//! writes its files. Must not know the command line or the table.

pub mod bundle;

use std::collections::{BTreeSet, HashMap};

use audit_model::archive::{Period, object_prefixes};
use audit_model::evidence::{Completeness, PeriodEntry, Unproven, checkpoint_file};
use audit_model::note::{IndexRow, PROOF_FORMAT, Proof, WitnessKey};
use audit_model::tlog::range::{range_proof, range_tiles};
use audit_model::tlog::{HexHash, Remembered, inclusion_proof, inclusion_tiles, object_lines};

use crate::Error;
use crate::archive::Archive;
use crate::offline::check_inclusion;
use crate::prove::{ProveError, Unindexed, gunzip, time, tlog_broken};
use crate::tlog::{LogKey, LogReader};

/// What to export: the periods, which events to keep, and how to prove them.
pub struct Ask<'a> {
    pub first: Period,
    pub last: Period,
    /// Whether an event (its archived line, parsed) is kept; `filtered` says whether any filter
    /// was given (then only inclusion is proven).
    pub keep: &'a (dyn Fn(&serde_json::Value) -> bool + Sync),
    pub filtered: bool,
    pub key: &'a LogKey,
    pub origin: &'a str,
    pub witnesses: &'a [WitnessKey],
    pub tree_size: Option<u64>,
    pub now: i64,
}

/// A bundle's contents, but for who made it and the key: the caller writes them.
#[derive(Debug, Clone)]
pub struct Evidence {
    pub events: Vec<String>,
    pub proofs: Vec<Proof>,
    pub tree_size: u64,
    /// The checkpoint of `tree_size`, with every cosignature found.
    pub checkpoint: String,
    /// Further checkpoints the completeness claim names: (file, text).
    pub checkpoints: Vec<(String, String)>,
    pub periods: Vec<PeriodEntry>,
    pub completeness: Option<Completeness>,
    pub proven: Vec<String>,
    pub not_proven: Vec<String>,
    pub unproven: Vec<Unproven>,
    /// The unproven events' archived lines.
    pub unproven_lines: Vec<String>,
}

/// An archive object's lines, read once.
struct Objects(HashMap<String, Vec<String>>);

impl Objects {
    async fn line<A: Archive>(
        &mut self,
        log: &LogReader<'_, A>,
        object: &str,
        number: u64,
    ) -> Result<String, Error> {
        if !self.0.contains_key(object) {
            let broken = |what: String| ProveError::Broken { what, period: None };
            let bytes = log.get(object).await?.ok_or_else(|| {
                broken(format!(
                    "the archive object {object} that the index names is not there"
                ))
            })?;
            let text = gunzip(&bytes)
                .map_err(|e| broken(format!("the archive object {object} is not gzip ({e})")))?;
            let lines = object_lines(&text)
                .into_iter()
                .map(|l| String::from_utf8_lossy(l).into_owned())
                .collect();
            self.0.insert(object.to_owned(), lines);
        }
        let lines = &self.0[object];
        usize::try_from(number)
            .ok()
            .and_then(|n| lines.get(n))
            .cloned()
            .ok_or_else(|| {
                ProveError::Broken {
                    what: format!("the archive object {object} has no line {number}"),
                    period: None,
                }
                .into()
            })
    }
}

fn kept(keep: &dyn Fn(&serde_json::Value) -> bool, line: &str) -> bool {
    serde_json::from_str(line).is_ok_and(|v| keep(&v))
}

impl<A: Archive> LogReader<'_, A> {
    /// The bundle's contents for `ask` (docs/archive.md "Evidence for auditors").
    pub async fn evidence(&self, ask: &Ask<'_>) -> Result<Evidence, Error> {
        let mut objects = Objects(HashMap::new());
        let mut rows: Vec<(IndexRow, String)> = Vec::new();
        let mut periods = Vec::new();
        let mut unproven = Vec::new();
        let mut unproven_lines = Vec::new();
        let mut not_proven = Vec::new();
        let mut all_sealed = true;
        let mut period = ask.first;
        while period.start <= ask.last.start {
            let mut entry = PeriodEntry {
                start: time(period.start),
                end: time(period.end()),
                state: "sealed".to_owned(),
                events: 0,
                first_leaf: None,
                end_leaf: None,
            };
            match self.index(period).await? {
                Some(mut index) => {
                    index.sort_by_key(|r| r.leaf_index);
                    entry.first_leaf = index.first().map(|r| r.leaf_index);
                    entry.end_leaf = index.last().map(|r| r.leaf_index + 1);
                    for row in index {
                        let line = objects.line(self, &row.object, row.line_number).await?;
                        if kept(ask.keep, &line) {
                            entry.events += 1;
                            rows.push((row, line));
                        }
                    }
                }
                None => match self.unindexed(period, "", None, ask.now).await {
                    Ok(Unindexed::Empty) => entry.state = "empty".to_owned(),
                    Ok(Unindexed::BeforeLog) => {
                        all_sealed = false;
                        entry.state = "before the log".to_owned();
                        not_proven.push(format!(
                            "the period {} to {} was sealed before the log began: its events are not leaves, and are not in the bundle",
                            entry.start, entry.end
                        ));
                    }
                    Ok(Unindexed::NoDigest) => {
                        all_sealed = false;
                        entry.state = "no digest".to_owned();
                        not_proven.push(format!(
                            "the period {} to {} has no digest (before the trail began, or its digest is missing: `auditctl verify` says which)",
                            entry.start, entry.end
                        ));
                    }
                    Err(Error::Prove(
                        ProveError::NotSealed { .. }
                        | ProveError::Overdue { .. }
                        | ProveError::LogPending { .. },
                    )) => {
                        all_sealed = false;
                        entry.state = "not sealed".to_owned();
                        let before = unproven.len();
                        self.unsealed(period, ask, &mut unproven, &mut unproven_lines)
                            .await?;
                        entry.events = (unproven.len() - before) as u64;
                        not_proven.push(format!(
                            "the period {} to {} is not sealed yet: its {} event(s) archived so far are listed as unproven (unproven.jsonl), not proven",
                            entry.start, entry.end, entry.events
                        ));
                    }
                    Err(e) => return Err(e),
                },
            }
            periods.push(entry);
            period = period.next();
        }
        let last_leaf = rows.last().map(|(r, _)| r.leaf_index);
        let tree_size = match last_leaf {
            Some(leaf) => self.proof_size(leaf, ask.tree_size, ask.witnesses).await?,
            None => match ask.tree_size {
                Some(size) => size,
                None => self
                    .newest_size(None)
                    .await?
                    .ok_or(ProveError::NoCheckpoint)?,
            },
        };
        let (note, body) = self
            .signed_checkpoint(tree_size, ask.key, ask.origin, ask.witnesses)
            .await?;
        let checkpoint = note.text();
        // Every tile that any proof needs, read once.
        let mut needed = BTreeSet::new();
        for (row, _) in &rows {
            needed.extend(inclusion_tiles(row.leaf_index, tree_size).map_err(tlog_broken)?);
        }
        let mut read = self.tiles(tree_size, needed).await?;
        // Neighbouring leaves' paths share their nodes: each hashed once for all the proofs.
        let mut tiles = Remembered::new(&mut read);
        let mut events = Vec::with_capacity(rows.len());
        let mut proofs = Vec::with_capacity(rows.len());
        for (row, line) in rows {
            let path =
                inclusion_proof(row.leaf_index, tree_size, &mut tiles).map_err(tlog_broken)?;
            let proof = Proof {
                format: PROOF_FORMAT.to_owned(),
                message_id: row.message_id,
                audit_time: row.audit_time,
                line: line.clone(),
                object: row.object,
                line_number: row.line_number,
                leaf_index: row.leaf_index,
                tree_size,
                inclusion_path: path.iter().map(|h| HexHash(h).to_string()).collect(),
                checkpoint: checkpoint.clone(),
            };
            // The checkpoint's signature was checked once, above (signed_checkpoint).
            check_inclusion(&proof, &body).map_err(|e| ProveError::Broken {
                what: format!(
                    "the proof of leaf {} made from the archive does not hold ({e})",
                    proof.leaf_index
                ),
                period: None,
            })?;
            events.push(line);
            proofs.push(proof);
        }
        let mut proven = vec![format!(
            "inclusion: each of the {} event(s) of events.jsonl is, byte for byte, the leaf its proof names in the log's tree of {tree_size} leaves (checkpoint.txt, signed by the digest key)",
            events.len()
        )];
        let mut checkpoints = Vec::new();
        let completeness = if ask.filtered {
            not_proven.push("completeness: filters were given, so only inclusion is proven (events of the periods that the filters leave out are not in the bundle)".to_owned());
            None
        } else if !all_sealed {
            not_proven.push(
                "completeness: not every period of the range is sealed with the log".to_owned(),
            );
            None
        } else {
            self.completeness(&proofs, ask, &mut checkpoints, &mut not_proven)
                .await?
        };
        if let Some(claim) = &completeness {
            proven.push(format!(
                "completeness: the events are every leaf from {} to {} of the log, the leaves of the periods listed: with the range proof they recompute the root of the checkpoint of {} leaves and, before them, of {} (the periods' digests, which `auditctl verify` checks, name those tree sizes)",
                claim.start, claim.end, claim.end, claim.start
            ));
        }
        Ok(Evidence {
            events,
            proofs,
            tree_size,
            checkpoint,
            checkpoints,
            periods,
            completeness,
            proven,
            not_proven,
            unproven,
            unproven_lines,
        })
    }

    /// The events archived so far in a period not sealed yet: read from its objects.
    async fn unsealed(
        &self,
        period: Period,
        ask: &Ask<'_>,
        unproven: &mut Vec<Unproven>,
        lines: &mut Vec<String>,
    ) -> Result<(), Error> {
        for prefix in object_prefixes(period) {
            for key in self.keys(&prefix, None).await? {
                let Some(bytes) = self.get(&key).await? else {
                    continue;
                };
                let Ok(text) = gunzip(&bytes) else { continue };
                for (number, line) in object_lines(&text).into_iter().enumerate() {
                    let line = String::from_utf8_lossy(line).into_owned();
                    let Ok(value) = serde_json::from_str::<serde_json::Value>(&line) else {
                        continue;
                    };
                    if !(ask.keep)(&value) {
                        continue;
                    }
                    let field = |name: &str| {
                        value
                            .get(name)
                            .and_then(|v| v.as_str())
                            .unwrap_or_default()
                            .to_owned()
                    };
                    unproven.push(Unproven {
                        message_id: field("messageId"),
                        audit_time: field("auditTime"),
                        object: key.clone(),
                        line_number: number as u64,
                        why: format!(
                            "its period {} to {} is not sealed yet",
                            time(period.start),
                            time(period.end())
                        ),
                    });
                    lines.push(line);
                }
            }
        }
        Ok(())
    }

    /// The completeness claim over the proofs' leaves when they are one contiguous run with a
    /// checkpoint at each end; else why not (in `not_proven`).
    async fn completeness(
        &self,
        proofs: &[Proof],
        ask: &Ask<'_>,
        checkpoints: &mut Vec<(String, String)>,
        not_proven: &mut Vec<String>,
    ) -> Result<Option<Completeness>, Error> {
        let (Some(first), Some(last)) = (proofs.first(), proofs.last()) else {
            not_proven.push(
                "completeness: the periods hold no event, so there is no range to prove".to_owned(),
            );
            return Ok(None);
        };
        let (start, end) = (first.leaf_index, last.leaf_index + 1);
        if end - start != proofs.len() as u64 {
            // Leaves the indexes do not name (a tamper/ object's lines) lie among them.
            not_proven.push(format!(
                "completeness: the periods' leaves from {start} to {end} are not all events of the index ({} are): lines that are not trail events lie among them",
                proofs.len()
            ));
            return Ok(None);
        }
        let start_checkpoint = if start == 0 {
            None
        } else {
            match self.named_checkpoint(start, ask).await {
                Ok(named) => {
                    checkpoints.push(named.clone());
                    Some(named.0)
                }
                Err(Error::Prove(ProveError::NoCheckpointOf { .. })) => {
                    not_proven.push(format!("completeness: the log has no checkpoint of {start} leaves, where the range starts"));
                    return Ok(None);
                }
                Err(e) => return Err(e),
            }
        };
        let end_checkpoint = match self.named_checkpoint(end, ask).await {
            Ok(named) => {
                checkpoints.push(named.clone());
                named.0
            }
            Err(Error::Prove(ProveError::NoCheckpointOf { .. })) => {
                not_proven.push(format!(
                    "completeness: the log has no checkpoint of {end} leaves, where the range ends"
                ));
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let mut tiles = self
            .tiles(end, range_tiles(start, end, end).map_err(tlog_broken)?)
            .await?;
        let proof = range_proof(start, end, end, &mut tiles).map_err(tlog_broken)?;
        Ok(Some(Completeness {
            start,
            end,
            start_checkpoint,
            end_checkpoint,
            range_proof: proof.iter().map(|h| HexHash(h).to_string()).collect(),
        }))
    }

    /// The checkpoint of `size`, its signature and origin checked: its file in the bundle and
    /// its text.
    async fn named_checkpoint(&self, size: u64, ask: &Ask<'_>) -> Result<(String, String), Error> {
        let (note, _) = self
            .signed_checkpoint(size, ask.key, ask.origin, &[])
            .await?;
        Ok((checkpoint_file(size), note.text()))
    }
}
