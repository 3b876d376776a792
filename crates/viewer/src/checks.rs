//! Owns what the health page checks: verify over the periods in view (bounded), the log's newest
//! checkpoint and cosignatures, an event's proof. Must not know HTTP or the pages.

use std::sync::Arc;

use audit_aws::s3::Bucket;
use audit_model::archive::Period;
use audit_model::digest::{Digest, hex};
use audit_model::note::{NoteSignature, SignedNote, WitnessKey, origin, split_cosignature};
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use serde_json::{Map, Value};

use super::archive::Archive;
use super::health::Sealed;
use crate::error::{Error, Words};
use audit_model::range::TimeRange;
use audit_proof::tlog::{CheckError, LogKey, LogReader};
use audit_proof::verify::key::TrustedKey;
use audit_proof::verify::ports::{Archive as _, Table, TableItem};
use audit_proof::verify::report::{Observer, Problem, Summary};
use audit_proof::verify::{ARCHIVE_LAG_SECONDS, Settings, walk};

/// Days of periods the page verifies at most at once; `auditctl verify` takes any range.
pub const MAX_VERIFY_DAYS: i64 = 31;
/// How long a verify run may hold the page.
pub const VERIFY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);
/// Problems listed at most (all are counted).
pub const PROBLEMS_SHOWN: usize = 1000;
/// Object reads in flight at most (`auditctl verify`'s default).
const CONCURRENCY: usize = 8;

/// Why the page does not run verify over a range, in words that name the fix (HTTP 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyRefused {
    #[error(
        "verify needs the digest key: start auditctl ui with DIGEST_KEY_ID or --key-id (stack output AuditDigestKeyArn)"
    )]
    NoKey,
    #[error("the range from {from} to {to} holds no millisecond: nothing to verify")]
    Empty { from: String, to: String },
    #[error(
        "the range from {from} to {to} spans {days} days of periods: the page verifies at most {MAX_VERIFY_DAYS} days at once; run auditctl verify --from {from} --to {to} for longer ranges"
    )]
    TooLong { from: String, to: String, days: i64 },
}

/// What a verify run checked and found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub range: TimeRange,
    pub summary: Summary,
    /// The first `PROBLEMS_SHOWN` problems, as found.
    pub problems: Vec<Problem>,
}

/// No table: the page verifies the archive alone, as `auditctl verify` without `--table`.
struct NoTable;

impl Table for NoTable {
    fn items(&self, _: &TimeRange) -> BoxStream<'static, Result<TableItem, audit_proof::Error>> {
        futures::stream::empty().boxed()
    }

    async fn get(&self, _: Vec<(String, String)>) -> Result<Vec<TableItem>, audit_proof::Error> {
        Ok(Vec::new())
    }
}

/// Keeps the first problems; the summary counts them all.
struct Kept(Vec<Problem>);

impl Observer for Kept {
    fn problem(&mut self, problem: &Problem) -> Result<(), audit_proof::Error> {
        if self.0.len() < PROBLEMS_SHOWN {
            self.0.push(problem.clone());
        }
        Ok(())
    }
}

impl<B: Bucket> Archive<B> {
    /// Whether the page may verify `range` (before anything is recorded or read).
    pub fn may_verify(&self, range: &TimeRange) -> Result<(), VerifyRefused> {
        if self.key.is_none() {
            return Err(VerifyRefused::NoKey);
        }
        let Some((from, to)) = range.bounds() else {
            return Err(VerifyRefused::Empty {
                from: range.from.clone(),
                to: range.to.clone(),
            });
        };
        let (first, last) = (self.length.period_of(from), self.length.period_of(to));
        let span = last.end() - first.start;
        if span > MAX_VERIFY_DAYS * 86_400 {
            return Err(VerifyRefused::TooLong {
                from: range.from.clone(),
                to: range.to.clone(),
                days: (span + 86_399) / 86_400,
            });
        }
        Ok(())
    }

    /// `verify` over `range` at `now`, as `auditctl verify --from --to` (without `--table`): the
    /// digest key's public key fetched, the walk over the range's periods; stopped after
    /// `VERIFY_TIMEOUT` (`None`). The walk runs on a blocking thread of the runtime, driven there:
    /// its futures need not be `Send` as a server task's must.
    pub async fn verify(
        self: Arc<Self>,
        range: TimeRange,
        now: DateTime<Utc>,
    ) -> Option<Result<Verified, Error>>
    where
        B: 'static,
    {
        let run = tokio::task::spawn_blocking(move || {
            tokio::runtime::Handle::current().block_on(tokio::time::timeout(
                VERIFY_TIMEOUT,
                self.verify_now(&range, now),
            ))
        });
        match run.await {
            Ok(Ok(verified)) => Some(verified),
            Ok(Err(_elapsed)) => None,
            Err(error) => Some(Err(Error::VerifyStopped(error.to_string()))),
        }
    }

    async fn verify_now(&self, range: &TimeRange, now: DateTime<Utc>) -> Result<Verified, Error> {
        let Some(fetch) = &self.key else {
            return Err(Error::NoKey);
        };
        let key = TrustedKey::new(fetch().await?)?;
        let settings = Settings {
            bucket: self.name.clone(),
            length: self.length,
            range: range.clone(),
            now,
            grace_seconds: Settings::default_grace(self.length),
            lag_seconds: ARCHIVE_LAG_SECONDS,
            concurrency: CONCURRENCY,
            attestations: None,
        };
        let mut kept = Kept(Vec::new());
        let summary =
            walk::verify(&self.bucket, &key, None::<&NoTable>, &settings, &mut kept).await?;
        Ok(Verified {
            range: range.clone(),
            summary,
            problems: kept.0,
        })
    }

    /// The log's newest checkpoint and the cosignatures stored for it (or, when it has none, for
    /// the newest size that has any); `None` before the log's first checkpoint. `newest` is the
    /// newest sealed period's digest: when its tree is the checkpoint's, the checkpoint's period.
    /// Boxed as `Send` here, where the compiler can prove it for the reads' futures (a server
    /// task must be `Send`).
    /// `words` words why the key could not be had (the command line's words).
    pub fn log_head<'a>(
        &'a self,
        newest: Option<&'a Sealed>,
        words: Words,
    ) -> BoxFuture<'a, Result<Option<LogHead>, Error>> {
        Box::pin(self.read_log_head(newest, words))
    }

    async fn read_log_head(
        &self,
        newest: Option<&Sealed>,
        words: Words,
    ) -> Result<Option<LogHead>, Error> {
        let reader = LogReader {
            archive: &self.bucket,
        };
        // The newest digest's tree names the newest checkpoint but for one the sealer has not
        // written yet: listed from there (one request), else every checkpoint key.
        let tree = match newest {
            Some(sealed) => self.tree_of(sealed).await?,
            None => None,
        };
        let hinted = match tree.as_ref().and_then(|(_, _, size)| size.checked_sub(1)) {
            Some(before) => reader.newest_size(Some(before)).await?,
            None => None,
        };
        let newest_size = match hinted {
            Some(size) => Some(size),
            None => reader.newest_size(None).await?,
        };
        let Some(size) = newest_size else {
            return Ok(None);
        };
        let Some(mut note) = reader.checkpoint(size).await? else {
            return Ok(None);
        };
        let mut signature = self.log_signature(&note, size, words).await;
        // One planted at the checkpoint's name: the sealer wrote it under an alternate
        // (docs/archive.md "Planted log objects"), the first whose signature holds.
        if matches!(signature, LogSignature::Fails(_))
            && let Some(fetch) = &self.key
            && let Ok(info) = fetch().await
            && let Ok(key) = LogKey::from_der(&info.der)
            && let (Some(Ok(alternate)), planted) = reader.checkpoint_signed(size, &key).await?
            && !planted.is_empty()
        {
            note = alternate;
            signature = self.log_signature(&note, size, words).await;
        }
        let mut cosigned_size = size;
        let mut lines = reader.cosignatures(size, &self.witnesses).await?;
        // None by a witness given: the newest size one of them cosigned (never a size taken
        // from an object that does not verify).
        if !lines
            .iter()
            .any(|line| cosignature_verifies(&note.body, line, &self.witnesses))
        {
            let checkpoints = reader.checkpoint_sizes(None).await?;
            if let Some(last) = reader
                .newest_cosigned(None, &checkpoints, &self.witnesses)
                .await?
            {
                cosigned_size = last;
                lines = reader.cosignatures(last, &self.witnesses).await?;
            }
        }
        // The cosignatures are checked against the checkpoint they are of.
        let cosigned_note = if cosigned_size == size {
            Some(note)
        } else {
            reader.checkpoint(cosigned_size).await?
        };
        let cosignatures = lines
            .iter()
            .map(|line| Cosignature {
                witness: line.name.clone(),
                key_id: hex(&line.key_id),
                at: split_cosignature(&line.signature)
                    .and_then(|(t, _)| i64::try_from(t).ok())
                    .and_then(|t| DateTime::from_timestamp(t, 0)),
                verified: cosigned_note
                    .as_ref()
                    .is_some_and(|note| cosignature_verifies(&note.body, line, &self.witnesses)),
            })
            .collect::<Vec<_>>();
        let sealed = tree
            .filter(|(_, _, tree_size)| *tree_size == size)
            .map(|(period, sealed_at, _)| (period, sealed_at));
        Ok(Some(LogHead {
            size,
            signature,
            sealed,
            cosigned_size: (!cosignatures.is_empty()).then_some(cosigned_size),
            cosignatures,
        }))
    }

    /// The log's signature on the checkpoint of `size`, checked with the digest key's public key.
    async fn log_signature(&self, note: &SignedNote, size: u64, words: Words) -> LogSignature {
        let Some(fetch) = &self.key else {
            return LogSignature::NotChecked(
                "no digest key: start auditctl ui with DIGEST_KEY_ID or --key-id (stack output AuditDigestKeyArn) to check it".into(),
            );
        };
        let info = match fetch().await {
            Ok(info) => info,
            Err(error) => return LogSignature::NotChecked(words(error.into())),
        };
        let checked = LogKey::from_der(&info.der)
            .map_err(CheckError::from)
            .and_then(|key| key.checkpoint(note));
        match checked {
            Ok(checkpoint) if checkpoint.origin != origin(&self.name) => {
                LogSignature::Fails(format!(
                    "the checkpoint's origin {} is not this bucket's log ({})",
                    checkpoint.origin,
                    origin(&self.name)
                ))
            }
            Ok(checkpoint) if checkpoint.size != size => LogSignature::Fails(format!(
                "the checkpoint stored as size {size} says size {}",
                checkpoint.size
            )),
            Ok(_) => LogSignature::Holds,
            Err(why) => LogSignature::Fails(why.to_string()),
        }
    }

    /// The period, seal time and tree size of `sealed`'s digest (its version as sealed, the
    /// oldest), when it has a tree.
    async fn tree_of(&self, sealed: &Sealed) -> Result<Option<(Period, String, u64)>, Error> {
        let versions: Vec<_> = self
            .bucket
            .versions(sealed.key.clone())
            .try_filter(|v| futures::future::ready(v.key == sealed.key && !v.delete_marker))
            .try_collect()
            .await?;
        let Some(first) = versions.last() else {
            return Ok(None);
        };
        let Some(fetched) = self.bucket.get(&sealed.key, &first.version_id).await? else {
            return Ok(None);
        };
        let Ok(digest) = Digest::parse(&fetched.bytes().await?) else {
            return Ok(None);
        };
        Ok(digest
            .tree
            .map(|tree| (sealed.period, digest.sealed_at, tree.size)))
    }
}

/// The log's newest checkpoint, as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogHead {
    pub size: u64,
    pub signature: LogSignature,
    /// The period whose digest carries this tree, and when it was sealed.
    pub sealed: Option<(Period, String)>,
    /// The tree size the cosignatures are of (the newest checkpoint's, or the newest cosigned).
    pub cosigned_size: Option<u64>,
    pub cosignatures: Vec<Cosignature>,
}

/// The log's signature on a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogSignature {
    Holds,
    Fails(String),
    /// The key could not be had (no key configured, or KMS failed).
    NotChecked(String),
}

/// One witness's cosignature line, as stored, and whether it verifies under a witness key the
/// viewer was given (`auditctl ui --witness-key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cosignature {
    pub witness: String,
    pub key_id: String,
    /// Its timestamp; `None` when the line is not a timestamped cosignature.
    pub at: Option<DateTime<Utc>>,
    /// It verifies under the given key of the witness it names; anyone who can write under
    /// `log/cosignatures/` can store a line that names a witness (docs/ui.md).
    pub verified: bool,
}

/// Whether the cosignature `line` of the checkpoint `body` verifies under the key, among
/// `witnesses`, of the witness it names (name and key id), as `auditctl check-proof
/// --witness-key` checks one.
pub fn cosignature_verifies(body: &str, line: &NoteSignature, witnesses: &[WitnessKey]) -> bool {
    let alone = SignedNote {
        body: body.to_owned(),
        signatures: vec![line.clone()],
    };
    witnesses.iter().any(|witness| {
        witness.name == line.name
            && witness.key_id() == line.key_id
            && audit_proof::check_cosignature(&alone, witness).is_ok()
    })
}

/// The cosignatures on a proof's checkpoint: the witnesses whose verify under their given key,
/// and the names on any other line (the log's own signature left out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cosigned {
    pub verified: Vec<String>,
    pub unverified: Vec<String>,
}

impl Cosigned {
    /// The cosignatures of `note` beside the log's own signature (`log`: its name).
    fn of(note: &SignedNote, log: &str, key_id: [u8; 4], witnesses: &[WitnessKey]) -> Self {
        let mut cosigned = Self::default();
        for line in &note.signatures {
            if line.name == log && line.key_id == key_id {
                continue;
            }
            if cosignature_verifies(&note.body, line, witnesses) {
                cosigned.verified.push(line.name.clone());
            } else {
                cosigned.unverified.push(line.name.clone());
            }
        }
        cosigned
    }
}

/// The fields in which the table's item (`table`, as plain JSON) differs from the archived line
/// (`archived`): changed, added or removed, by name.
pub fn differing_fields(archived: &Map<String, Value>, table: &Map<String, Value>) -> Vec<String> {
    let names: std::collections::BTreeSet<&String> = archived.keys().chain(table.keys()).collect();
    names
        .into_iter()
        .filter(|name| archived.get(*name) != table.get(*name))
        .cloned()
        .collect()
}

/// The transparency log's verdict on one event, checked in the page as `auditctl check-proof`
/// checks a proof: found through the period indexes from `anchor` (its `receivedAt`, else its
/// `auditTime`), its line read from its archive object, the inclusion path made from the tiles,
/// the checkpoint's signature checked with the digest key's public key, each cosignature with the
/// witness keys given; then the archived line compared with `table`, the table's item (plain
/// JSON). `None` when the page has no digest key to check with (it then shows the period's digest
/// status alone). `words` words why the key could not be had (the command line's words).
pub async fn proof_verdict<B: Bucket>(
    archive: &Archive<B>,
    table: &Map<String, Value>,
    audit_time: &str,
    anchor: DateTime<Utc>,
    now: i64,
    words: Words,
) -> Option<ProofVerdict> {
    use audit_proof::prove::Wanted;
    let fetch = archive.key.as_ref()?;
    let wanted = Wanted::around(
        table
            .get("messageId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        audit_time.to_owned(),
        anchor,
        archive.length,
    );
    let log = LogReader {
        archive: &archive.bucket,
    };
    let found = match log.locate(&wanted, now).await {
        Ok(found) => found,
        Err(error) => return Some(ProofVerdict::NotYet(words(error.into()))),
    };
    let (key, key_id) = match fetch().await {
        Ok(info) => match LogKey::from_der(&info.der) {
            Ok(key) => (key, audit_model::note::ecdsa_key_id(&info.der)),
            Err(error) => return Some(ProofVerdict::NotChecked(error.to_string())),
        },
        Err(error) => return Some(ProofVerdict::NotChecked(words(error.into()))),
    };
    let log_name = origin(&archive.name);
    let proof = match log
        .prove(&found, &key, &log_name, &archive.witnesses, None)
        .await
    {
        Ok(proof) => proof,
        Err(error) => return Some(ProofVerdict::Fails(words(error.into()))),
    };
    Some(match audit_proof::tlog::check_proof(&proof, &key, &[]) {
        Ok(verdict) => {
            // check_proof read the line as JSON: an object, as every archived line is.
            let line: Map<String, Value> = serde_json::from_str(&proof.line).unwrap_or_default();
            let held = Held {
                leaf: verdict.leaf_index,
                size: verdict.tree_size,
                cosigned: SignedNote::parse(&proof.checkpoint)
                    .map(|note| Cosigned::of(&note, &log_name, key_id, &archive.witnesses))
                    .unwrap_or_default(),
                fields: differing_fields(&line, table),
                line,
            };
            if held.fields.is_empty() {
                ProofVerdict::Proven(held)
            } else {
                ProofVerdict::Differs(held)
            }
        }
        Err(error) => ProofVerdict::Fails(error.to_string()),
    })
}

/// A proof that holds: its line is this leaf of the tree of this size, under a checkpoint the
/// digest key signed, with these cosignatures on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub leaf: u64,
    pub size: u64,
    pub cosigned: Cosigned,
    /// The archived line's fields: what the proof covers.
    pub line: Map<String, Value>,
    /// The fields in which the table's item differs from the line (none: it is the line).
    pub fields: Vec<String>,
}

/// What the page says of an event's proof in the transparency log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProofVerdict {
    /// The proof holds and the table's item is its archived line.
    Proven(Held),
    /// The proof holds for the archived line, and the table's item differs from it: the page
    /// shows the line, and says the item is not proven.
    Differs(Held),
    /// No proof can be made yet (its period not sealed yet, not found in the indexes, …): why.
    NotYet(String),
    /// The digest key's public key could not be had or used: why.
    NotChecked(String),
    /// A proof was made or read and does not hold: why.
    Fails(String),
}

/// The witnesses of a proof's checkpoint, in words.
fn witnessed(cosigned: &Cosigned) -> String {
    let mut words = format!(
        "{} witness cosignature(s) verified with the witness keys given",
        cosigned.verified.len()
    );
    if !cosigned.verified.is_empty() {
        words.push_str(&format!(" ({})", cosigned.verified.join(", ")));
    }
    if !cosigned.unverified.is_empty() {
        words.push_str(&format!(
            "; unverified, not counted: {}",
            cosigned.unverified.join(", ")
        ));
    }
    words
}

impl std::fmt::Display for ProofVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Proven(held) => write!(
                f,
                "Proven, checked in this page: its line, as archived and shown here, is leaf {} of the transparency log's tree of {} leaves, whose checkpoint the digest key signed; {}. `auditctl check-proof --witness-key` checks it offline.",
                held.leaf,
                held.size,
                witnessed(&held.cosigned)
            ),
            Self::Differs(held) => write!(
                f,
                "NOT PROVEN: the table's item differs from the archived event in {}. The fields shown are the archived line's, leaf {} of the transparency log's tree of {} leaves, whose checkpoint the digest key signed; the table's item was changed after it was archived (auditctl verify --table reports it).",
                held.fields.join(", "),
                held.leaf,
                held.size
            ),
            Self::NotYet(why) => write!(f, "No proof yet: {why}."),
            Self::NotChecked(why) => {
                write!(f, "Proof not checked: the digest key's public key: {why}.")
            }
            Self::Fails(why) => write!(
                f,
                "NOT PROVEN: {why}. `auditctl verify` over its period says what is wrong."
            ),
        }
    }
}
