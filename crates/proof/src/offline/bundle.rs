//! Owns checking an evidence bundle with no network (docs/archive.md "Evidence for auditors"):
//! its checkpoint's signature, origin and cosignatures, every event line against its proof, the
//! proofs' order, and the completeness claim (the events' leaves recompute the tree of the claim's
//! end checkpoint, and the prefix before them that of its start checkpoint). Each failure is one
//! typed problem; all are found, not only the first. Must not know where the files are read from.

use audit_model::evidence::{
    CHECKPOINT, Completeness, EVENTS, EVIDENCE_FORMAT, MANIFEST, Manifest, PROOFS,
};
use audit_model::note::{Proof, SignedNote, WitnessKey};
use audit_model::tlog::range::roots_of_range;
use audit_model::tlog::{Hash, HexHash, leaf_hash, parse_hex_hash};

use super::{CheckError, LogKey, check_cosignature, check_inclusion, check_proof};

/// One way a bundle does not hold; each reads as a line after `FAILED: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleProblem {
    #[error("cannot read {file}: {why}")]
    Unreadable { file: String, why: String },
    #[error("manifest.json is not a manifest of {EVIDENCE_FORMAT}: {why}")]
    Manifest { why: String },
    #[error("{file}: {source}")]
    Checkpoint { file: String, source: CheckError },
    #[error("{file} is of the log {found:?}, not of {want:?} (--origin)")]
    Origin {
        file: String,
        found: String,
        want: String,
    },
    #[error("{file} is of tree size {found}, the manifest says {want}")]
    TreeSize { file: String, found: u64, want: u64 },
    #[error("events.jsonl has {events} lines, proofs.jsonl {proofs}, the manifest says {manifest}")]
    Counts {
        events: u64,
        proofs: u64,
        manifest: u64,
    },
    #[error("{file} does not end with a newline (its last line may be cut)")]
    Unterminated { file: &'static str },
    #[error("proofs.jsonl line {line}: not a proof from `auditctl prove`: {why}")]
    NotAProof { line: usize, why: String },
    #[error("events.jsonl line {line} is not the line its proof proves (messageId {message_id})")]
    EventChanged { line: usize, message_id: String },
    #[error("proofs.jsonl line {line}: its checkpoint is not checkpoint.txt")]
    OtherCheckpoint { line: usize },
    #[error("proofs.jsonl line {line} (messageId {message_id}): {source}")]
    Proof {
        line: usize,
        message_id: String,
        source: CheckError,
    },
    #[error(
        "proofs.jsonl line {line}: leaf {leaf} does not follow leaf {previous} (events out of order, or one twice)"
    )]
    Order {
        line: usize,
        leaf: u64,
        previous: u64,
    },
    #[error("completeness: {0}")]
    Incomplete(String),
}

/// What a bundle that holds proves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleVerdict {
    pub events: u64,
    pub unproven: u64,
    pub tree_size: u64,
    pub origin: String,
    /// The leaves `[start, end)` proven to be every event of the periods, when claimed.
    pub complete: Option<(u64, u64)>,
    /// The witnesses asked for whose cosignatures hold, with their timestamps.
    pub cosigned: Vec<(String, u64)>,
}

/// The lines of a `.jsonl` file, each without its newline; the file must end with one.
fn lines<'a>(
    file: &'static str,
    bytes: &'a [u8],
    problems: &mut Vec<BundleProblem>,
) -> Vec<&'a [u8]> {
    if bytes.is_empty() {
        return Vec::new();
    }
    let Some(body) = bytes.strip_suffix(b"\n") else {
        problems.push(BundleProblem::Unterminated { file });
        return bytes.split(|b| *b == b'\n').collect();
    };
    body.split(|b| *b == b'\n').collect()
}

/// A checkpoint file, its log signature checked with `key` and its origin `origin`.
fn signed(
    read: &mut dyn FnMut(&str) -> Result<Vec<u8>, String>,
    file: &str,
    key: &LogKey,
    origin: &str,
) -> Result<(SignedNote, audit_model::note::Checkpoint), BundleProblem> {
    let bytes = read(file).map_err(|why| BundleProblem::Unreadable {
        file: file.to_owned(),
        why,
    })?;
    let checkpoint = |source: CheckError| BundleProblem::Checkpoint {
        file: file.to_owned(),
        source,
    };
    let text = String::from_utf8(bytes).map_err(|_| BundleProblem::Unreadable {
        file: file.to_owned(),
        why: "not UTF-8".to_owned(),
    })?;
    let note = SignedNote::parse(&text).map_err(|e| checkpoint(e.into()))?;
    let body = key.checkpoint(&note).map_err(checkpoint)?;
    if body.origin != origin {
        return Err(BundleProblem::Origin {
            file: file.to_owned(),
            found: body.origin,
            want: origin.to_owned(),
        });
    }
    Ok((note, body))
}

/// Checks the bundle whose files `read` gives by name: every problem found, or what it proves.
pub fn check_bundle(
    read: &mut dyn FnMut(&str) -> Result<Vec<u8>, String>,
    key: &LogKey,
    witnesses: &[WitnessKey],
    origin: &str,
) -> Result<BundleVerdict, Vec<BundleProblem>> {
    let mut problems = Vec::new();
    let manifest = match read(MANIFEST)
        .map_err(|why| BundleProblem::Unreadable {
            file: MANIFEST.to_owned(),
            why,
        })
        .and_then(|bytes| {
            serde_json::from_slice::<Manifest>(&bytes)
                .map_err(|e| BundleProblem::Manifest { why: e.to_string() })
        }) {
        Ok(m) if m.format == EVIDENCE_FORMAT => m,
        Ok(m) => {
            return Err(vec![BundleProblem::Manifest {
                why: format!("its format is {:?}", m.format),
            }]);
        }
        Err(problem) => return Err(vec![problem]),
    };
    let mut cosigned = Vec::new();
    let checkpoint = match signed(read, CHECKPOINT, key, origin) {
        Ok((note, body)) => {
            if body.size != manifest.tree_size {
                problems.push(BundleProblem::TreeSize {
                    file: CHECKPOINT.to_owned(),
                    found: body.size,
                    want: manifest.tree_size,
                });
            }
            for witness in witnesses {
                match check_cosignature(&note, witness) {
                    Ok(at) => cosigned.push((witness.name.clone(), at)),
                    Err(source) => problems.push(BundleProblem::Checkpoint {
                        file: CHECKPOINT.to_owned(),
                        source,
                    }),
                }
            }
            Some((note.text(), body))
        }
        Err(problem) => {
            problems.push(problem);
            None
        }
    };
    let mut file = |name: &'static str, problems: &mut Vec<BundleProblem>| match read(name) {
        Ok(bytes) => bytes,
        Err(why) => {
            problems.push(BundleProblem::Unreadable {
                file: name.to_owned(),
                why,
            });
            Vec::new()
        }
    };
    let events_bytes = file(EVENTS, &mut problems);
    let proofs_bytes = file(PROOFS, &mut problems);
    let events = lines(EVENTS, &events_bytes, &mut problems);
    let proofs = lines(PROOFS, &proofs_bytes, &mut problems);
    if events.len() as u64 != manifest.events || proofs.len() as u64 != manifest.events {
        problems.push(BundleProblem::Counts {
            events: events.len() as u64,
            proofs: proofs.len() as u64,
            manifest: manifest.events,
        });
    }
    let mut leaves: Vec<(u64, Hash)> = Vec::new();
    for (n, (event, proof)) in events.iter().zip(&proofs).enumerate() {
        let line = n + 1;
        let proof: Proof = match serde_json::from_slice(proof) {
            Ok(proof) => proof,
            Err(e) => {
                problems.push(BundleProblem::NotAProof {
                    line,
                    why: e.to_string(),
                });
                continue;
            }
        };
        if proof.line.as_bytes() != *event {
            problems.push(BundleProblem::EventChanged {
                line,
                message_id: proof.message_id.clone(),
            });
        }
        // A proof in checkpoint.txt, whose signature was checked above, is checked against its
        // body; any other checkpoint is a problem, and its proof is checked in full.
        let checked = match &checkpoint {
            Some((text, body)) if *text == proof.checkpoint => check_inclusion(&proof, body),
            Some(_) => {
                problems.push(BundleProblem::OtherCheckpoint { line });
                check_proof(&proof, key, &[]).map(|_| ())
            }
            None => check_proof(&proof, key, &[]).map(|_| ()),
        };
        if let Err(source) = checked {
            problems.push(BundleProblem::Proof {
                line,
                message_id: proof.message_id.clone(),
                source,
            });
        }
        if let Some((previous, _)) = leaves.last()
            && proof.leaf_index <= *previous
        {
            problems.push(BundleProblem::Order {
                line,
                leaf: proof.leaf_index,
                previous: *previous,
            });
        }
        leaves.push((proof.leaf_index, leaf_hash(event)));
    }
    let complete = manifest.completeness.as_ref().and_then(|claim| {
        match check_completeness(read, claim, &leaves, key, origin) {
            Ok(()) => Some((claim.start, claim.end)),
            Err(problem) => {
                problems.push(problem);
                None
            }
        }
    });
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(BundleVerdict {
        events: manifest.events,
        unproven: manifest.unproven_events,
        tree_size: manifest.tree_size,
        origin: manifest.origin,
        complete,
        cosigned,
    })
}

/// The completeness claim: the events are the leaves `start..end` one by one, and with the
/// range proof they recompute the root of the checkpoint of `end` and, before them, that of
/// `start`.
fn check_completeness(
    read: &mut dyn FnMut(&str) -> Result<Vec<u8>, String>,
    claim: &Completeness,
    leaves: &[(u64, Hash)],
    key: &LogKey,
    origin: &str,
) -> Result<(), BundleProblem> {
    let incomplete = |what: String| BundleProblem::Incomplete(what);
    let want = claim.end.saturating_sub(claim.start);
    if leaves.len() as u64 != want {
        return Err(incomplete(format!(
            "the claim is the leaves {} to {} ({want} events) but the bundle holds {}",
            claim.start,
            claim.end,
            leaves.len()
        )));
    }
    if let Some(n) = (0..leaves.len()).find(|&n| leaves[n].0 != claim.start + n as u64) {
        return Err(incomplete(format!(
            "event {} is leaf {}, not leaf {}: a leaf of the range is missing or another is there",
            n + 1,
            leaves[n].0,
            claim.start + n as u64
        )));
    }
    let proof: Vec<Hash> = claim
        .range_proof
        .iter()
        .map(|h| parse_hex_hash(h).ok_or_else(|| incomplete(format!("{h:?} is not a hex hash"))))
        .collect::<Result<_, _>>()?;
    let hashes: Vec<Hash> = leaves.iter().map(|(_, h)| *h).collect();
    let roots = roots_of_range(claim.start, claim.end, claim.end, &hashes, &proof)
        .map_err(|e| incomplete(format!("the range proof does not hold: {e}")))?;
    let (_, end) = signed(read, &claim.end_checkpoint, key, origin)?;
    if end.size != claim.end || end.root != roots.root {
        return Err(incomplete(format!(
            "the events with the range proof give the tree of {} leaves the root {}; {} is of size {} with root {}",
            claim.end,
            HexHash(&roots.root),
            claim.end_checkpoint,
            end.size,
            HexHash(&end.root)
        )));
    }
    match (&claim.start_checkpoint, claim.start) {
        (None, 0) => Ok(()),
        (None, start) => Err(incomplete(format!(
            "no checkpoint of size {start}, where the range starts"
        ))),
        (Some(file), start) => {
            let (_, body) = signed(read, file, key, origin)?;
            if body.size != start || body.root != roots.start_root {
                return Err(incomplete(format!(
                    "the tree before the events, of {start} leaves, has the root {}; {file} is of size {} with root {}",
                    HexHash(&roots.start_root),
                    body.size,
                    HexHash(&body.root)
                )));
            }
            Ok(())
        }
    }
}
