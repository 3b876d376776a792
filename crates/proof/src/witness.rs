//! Owns the witness (`auditctl witness`): its Ed25519 key file, its state (the last checkpoint it
//! accepted), and one run: every checkpoint after the accepted one checked (the log's signature,
//! the origin, no fork at the accepted size, RFC 9162 consistency from the tiles), then cosigned
//! (c2sp.org/tlog-cosignature) under `log/cosignatures/`. Must not know the flags or where the key
//! and state files live (commands/witness.rs); the log's formats are `audit_model::note`'s.

use audit_aws::error::{AwsError, ErrorKind};
use audit_aws::s3::{Bucket, Created, NewObject};
use audit_model::digest::hex;
use audit_model::note::{
    COSIGNATURE_TYPE, Checkpoint, NoteSignature, SignedNote, WitnessKey, cosignature_key,
    cosigned_message,
};
use audit_model::tlog::{
    Hash, HexHash, Tiles, consistency_proof, consistency_tiles, parse_hex_hash, verify_consistency,
};
use aws_lc_rs::encoding::AsBigEndian;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use crate::Error;
use crate::archive::S3Archive;
use crate::tlog::{LogKey, LogReader};

/// How a private key file starts (the form of Go's `note.NewSigner`/`GenerateKey`).
const PRIVATE_PREFIX: &str = "PRIVATE+KEY+";

/// The witness's signing key: its name, its Ed25519 key pair and the seed it was made from.
pub struct WitnessSigner {
    pub key: WitnessKey,
    pair: Ed25519KeyPair,
    seed: [u8; 32],
}

impl std::fmt::Debug for WitnessSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WitnessSigner")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// Whether `name` can name a key in a signed note: not empty, no space, no `+`, printable.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '+')
    {
        return Err(format!(
            "{name:?} cannot name a witness key: it must be non-empty, without spaces or '+' (e.g. witness.example.com/w1)"
        ));
    }
    Ok(())
}

impl WitnessSigner {
    /// A new key named `name` (aws-lc-rs's Ed25519 key generation).
    pub fn generate(name: &str) -> Result<Self, String> {
        check_name(name)?;
        let pair = Ed25519KeyPair::generate()
            .map_err(|_| "could not generate an Ed25519 key".to_owned())?;
        let seed = pair
            .seed()
            .and_then(|s| s.as_be_bytes())
            .map_err(|_| "could not read the new key's seed".to_owned())?;
        let seed: [u8; 32] = seed
            .as_ref()
            .try_into()
            .map_err(|_| "the new key's seed is not 32 bytes".to_owned())?;
        Self::from_seed(name, seed)
    }

    fn from_seed(name: &str, seed: [u8; 32]) -> Result<Self, String> {
        let pair = Ed25519KeyPair::from_seed_unchecked(&seed)
            .map_err(|e| format!("the key's seed is not an Ed25519 key ({e})"))?;
        let public: [u8; 32] = pair
            .public_key()
            .as_ref()
            .try_into()
            .map_err(|_| "the key's public key is not 32 bytes".to_owned())?;
        Ok(Self {
            key: WitnessKey {
                name: name.to_owned(),
                public,
            },
            pair,
            seed,
        })
    }

    /// The key file's text: `PRIVATE+KEY+<name>+<key id hex>+<base64(0x04 || seed)>`.
    pub fn key_file(&self) -> String {
        let mut bytes = vec![COSIGNATURE_TYPE];
        bytes.extend_from_slice(&self.seed);
        format!(
            "{PRIVATE_PREFIX}{}+{}+{}\n",
            self.key.name,
            hex(&self.key.key_id()),
            STANDARD.encode(bytes)
        )
    }

    /// Reads a key file (what [`WitnessSigner::key_file`] writes); the key id must be the one its
    /// name and key give.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "not a witness key file: {why} (want PRIVATE+KEY+<name>+<key id>+<base64 key>, as `auditctl witness --init` writes)"
            )
        };
        let rest = text
            .trim()
            .strip_prefix(PRIVATE_PREFIX)
            .ok_or_else(|| bad("it does not start with PRIVATE+KEY+"))?;
        // From the left: a name holds no '+', base64 may (c2sp.org/signed-note).
        let mut parts = rest.splitn(3, '+');
        let (Some(name), Some(id), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad("it does not have three parts after PRIVATE+KEY+"));
        };
        check_name(name).map_err(|e| bad(&e))?;
        let bytes = STANDARD
            .decode(key)
            .map_err(|_| bad("its key is not base64"))?;
        if bytes.len() != 33 || bytes[0] != COSIGNATURE_TYPE {
            return Err(bad("its key is not a type 0x04 Ed25519 seed"));
        }
        let seed: [u8; 32] = bytes[1..]
            .try_into()
            .map_err(|_| bad("its seed is not 32 bytes"))?;
        let signer = Self::from_seed(name, seed).map_err(|e| bad(&e))?;
        if hex(&signer.key.key_id()) != id.to_ascii_lowercase() {
            return Err(bad("its key id is not the one its name and key give"));
        }
        Ok(signer)
    }

    /// The cosignature line of `body` at `timestamp` (seconds since the epoch): Ed25519 over
    /// `cosignature/v1\ntime <t>\n<body>`, the signature bytes being the timestamp (8 bytes,
    /// big-endian) and the Ed25519 signature.
    pub fn cosign(&self, body: &str, timestamp: u64) -> NoteSignature {
        let mut signature = timestamp.to_be_bytes().to_vec();
        signature.extend_from_slice(
            self.pair
                .sign(cosigned_message(timestamp, body).as_bytes())
                .as_ref(),
        );
        NoteSignature {
            name: self.key.name.clone(),
            key_id: self.key.key_id(),
            signature,
        }
    }
}

/// What the witness keeps between runs: the last checkpoint it accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WitnessState {
    pub origin: String,
    pub size: u64,
    /// The root hash, hex.
    pub root: String,
    /// The accepted checkpoint's signed note, as read.
    pub checkpoint: String,
    /// When it was accepted (RFC 3339).
    pub accepted: String,
}

impl WitnessState {
    pub fn parse(text: &str) -> Result<Self, String> {
        let state: Self = serde_json::from_str(text).map_err(|e| {
            format!("not a witness state (origin, size, root, checkpoint, accepted): {e}")
        })?;
        state.root_hash()?;
        Ok(state)
    }

    fn root_hash(&self) -> Result<Hash, String> {
        parse_hex_hash(&self.root)
            .ok_or_else(|| format!("the state's root {:?} is not a hex SHA-256", self.root))
    }
}

/// Why the witness refuses to cosign: the state stays; nothing is written, but for `SlotTaken`,
/// where the cosignatures of the sizes before it are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "rollback: the newest checkpoint is of size {newest}, smaller than the size {accepted} this witness accepted (another bucket, or a log rolled back)"
    )]
    Rollback { accepted: u64, newest: u64 },
    #[error(
        "rollback: the checkpoint of size {accepted} this witness accepted is not in the bucket any more (another bucket, or a log rolled back)"
    )]
    Gone { accepted: u64 },
    #[error(
        "fork: the checkpoint of size {size} now has root {now}, but this witness accepted root {accepted}: two checkpoints of one size with different roots"
    )]
    Fork {
        size: u64,
        accepted: String,
        now: String,
    },
    #[error("bad signature: the checkpoint of size {size}: {why}")]
    BadSignature { size: u64, why: String },
    #[error(
        "another log: the checkpoint of size {size} is of origin {origin:?}, this witness follows {accepted:?}"
    )]
    OtherOrigin {
        size: u64,
        origin: String,
        accepted: String,
    },
    #[error(
        "the checkpoint stored under size {key_size} says size {size}: it is not that key's checkpoint"
    )]
    WrongKey { key_size: u64, size: u64 },
    #[error(
        "the tree of size {new} does not extend the accepted tree of size {old}: {why} (RFC 9162 consistency, from the log's tiles)"
    )]
    NotExtending { old: u64, new: u64, why: String },
    #[error(
        "slot taken: {key} was already written, and it is not this witness's cosignature of the checkpoint of size {size} ({why}); someone else wrote under this witness's key id: readers take no cosignature from it, and this witness cannot cosign size {size} (state unchanged)"
    )]
    SlotTaken { size: u64, key: String, why: String },
}

/// A run that did not finish: refused (exit 1, `REFUSED: ...`), or the bucket failed.
#[derive(Debug, thiserror::Error)]
pub enum WitnessError {
    #[error("REFUSED: {0}")]
    Refused(#[from] Refusal),
    #[error(transparent)]
    Failed(#[from] Error),
}

/// One checkpoint cosigned by a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cosigned {
    pub size: u64,
    /// Already cosigned by this key (a run before whose state was not saved): left as it was.
    pub already: bool,
}

/// An object at a checkpoint's name that is no checkpoint the log signed (anyone able to write
/// under `log/checkpoints/` could put one there): passed over, never cosigned, never a refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassedOver {
    pub size: u64,
    pub why: String,
}

/// What one run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// First run: the size of the checkpoint trusted on first sight (its signature held).
    pub trusted: Option<u64>,
    pub cosigned: Vec<Cosigned>,
    /// Objects at checkpoint names that the log's key did not sign, passed over.
    pub passed_over: Vec<PassedOver>,
    /// The state to keep (unchanged when there was nothing new).
    pub state: Option<WitnessState>,
}

/// A checkpoint checked, ready to cosign.
struct Accepted {
    checkpoint: Checkpoint,
    /// The checkpoint's body as read (what the log signed, extension lines included): what is
    /// cosigned.
    body: String,
    text: String,
}

/// One run: checks every checkpoint after the state's (all of them on the first run, the first
/// trusted once its signature holds) in size order, each against the one before and each of
/// `origin` (the log this witness follows, from its configuration: never taken from a
/// checkpoint); then, only if every one held, cosigns them all at `now` (seconds since the
/// epoch), each over its body as read. Nothing is written when any is refused.
pub async fn run<B: Bucket>(
    reader: &LogReader<'_, S3Archive<B>>,
    log: &LogKey,
    origin: &str,
    signer: &WitnessSigner,
    state: Option<&WitnessState>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Run, WitnessError> {
    let mut trusted = None;
    let mut passed_over = Vec::new();
    let origin = origin.to_owned();
    // The last accepted (size, root), and the sizes to check, smallest first.
    let (mut size, mut root, sizes) = match state {
        Some(state) => {
            if state.origin != origin {
                return Err(Refusal::OtherOrigin {
                    size: state.size,
                    origin: state.origin.clone(),
                    accepted: origin,
                }
                .into());
            }
            let root = state
                .root_hash()
                .map_err(|e| Error::WitnessState(e.to_string()))?;
            let newer = check_accepted(reader, log, state, root).await?;
            (state.size, root, newer)
        }
        None => {
            let all = reader.checkpoint_sizes(None).await?;
            // The first checkpoint the log signed (objects before it that it did not sign are
            // passed over).
            let mut first = None;
            for (i, &size) in all.iter().enumerate() {
                if let Some(accepted) =
                    signed_or_passed(reader, log, size, &mut passed_over).await?
                {
                    first = Some((i, accepted));
                    break;
                }
            }
            let Some((i, accepted)) = first else {
                return Ok(Run {
                    trusted: None,
                    cosigned: Vec::new(),
                    passed_over,
                    state: None,
                });
            };
            // The first run cosigns the checkpoint it trusted too (of the configured origin: the
            // loop below refuses any other).
            trusted = Some(accepted.checkpoint.size);
            (
                accepted.checkpoint.size,
                accepted.checkpoint.root,
                all[i..].to_vec(),
            )
        }
    };
    let mut accepted = Vec::new();
    for (i, &next) in sizes.iter().enumerate() {
        let Some(checkpoint) = signed_or_passed(reader, log, next, &mut passed_over).await? else {
            continue;
        };
        if checkpoint.checkpoint.origin != origin {
            return Err(Refusal::OtherOrigin {
                size: next,
                origin: checkpoint.checkpoint.origin,
                accepted: origin,
            }
            .into());
        }
        if !(trusted.is_some() && i == 0) {
            consistent(reader, (size, root), &checkpoint.checkpoint).await?;
        }
        size = checkpoint.checkpoint.size;
        root = checkpoint.checkpoint.root;
        accepted.push(checkpoint);
    }
    let Some(last) = accepted.last() else {
        return Ok(Run {
            trusted,
            cosigned: Vec::new(),
            passed_over,
            state: state.cloned(),
        });
    };
    let new_state = WitnessState {
        origin: last.checkpoint.origin.clone(),
        size: last.checkpoint.size,
        root: HexHash(&last.checkpoint.root).to_string(),
        checkpoint: last.text.clone(),
        accepted: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    };
    let timestamp = u64::try_from(now.timestamp()).unwrap_or(0);
    let mut cosigned = Vec::new();
    for checkpoint in &accepted {
        let body = &checkpoint.body;
        let line = signer.cosign(body, timestamp);
        let already = store(reader, checkpoint.checkpoint.size, body, &line, signer).await?;
        cosigned.push(Cosigned {
            size: checkpoint.checkpoint.size,
            already,
        });
    }
    Ok(Run {
        trusted,
        cosigned,
        passed_over,
        state: Some(new_state),
    })
}

/// The checkpoint of `size`, its log signature checked; `None` (noted in `passed_over`) when the
/// object at its name is no checkpoint the log's key signed for that size: an unsigned object,
/// or a signed checkpoint of another size copied to this name. Neither is a statement of the log
/// about this size, so neither can fork it, and planting one must not stop the witness. The
/// witness so follows only the sizes the log itself signed checkpoints for, which are the sizes
/// its signed digests name (the sealer writes a period's checkpoint after its digest:
/// docs/archive.md "Planted log objects"). A checkpoint the log signed for this size that is
/// wrong (another origin, not extending the accepted tree) is still refused.
async fn signed_or_passed<B: Bucket>(
    reader: &LogReader<'_, S3Archive<B>>,
    log: &LogKey,
    size: u64,
    passed_over: &mut Vec<PassedOver>,
) -> Result<Option<Accepted>, WitnessError> {
    match signed(reader, log, size).await {
        Ok(accepted) => Ok(Some(accepted)),
        Err(WitnessError::Refused(Refusal::BadSignature { size, why })) => {
            passed_over.push(PassedOver { size, why });
            Ok(None)
        }
        Err(WitnessError::Refused(refusal @ Refusal::WrongKey { .. })) => {
            passed_over.push(PassedOver {
                size,
                why: refusal.to_string(),
            });
            Ok(None)
        }
        Err(other) => Err(other),
    }
}

/// The accepted checkpoint is still in the bucket, with the accepted root (otherwise a rollback or
/// a fork); the sizes of the checkpoints after it. Listed from the accepted size on, so that a
/// missing checkpoint is never a GET (which a witness allowed to list only log/ could not tell
/// from a refusal).
async fn check_accepted<B: Bucket>(
    reader: &LogReader<'_, S3Archive<B>>,
    log: &LogKey,
    state: &WitnessState,
    root: Hash,
) -> Result<Vec<u64>, WitnessError> {
    let mut listed = reader
        .checkpoint_sizes(state.size.checked_sub(1))
        .await?
        .into_iter();
    if listed.next() != Some(state.size) {
        let newest = reader.newest_size(None).await?.unwrap_or(0);
        return Err(if newest < state.size {
            Refusal::Rollback {
                accepted: state.size,
                newest,
            }
        } else {
            Refusal::Gone {
                accepted: state.size,
            }
        }
        .into());
    }
    let stored = signed(reader, log, state.size).await?;
    if stored.checkpoint.origin != state.origin {
        return Err(Refusal::OtherOrigin {
            size: state.size,
            origin: stored.checkpoint.origin,
            accepted: state.origin.clone(),
        }
        .into());
    }
    if stored.checkpoint.root != root {
        return Err(Refusal::Fork {
            size: state.size,
            accepted: state.root.clone(),
            now: HexHash(&stored.checkpoint.root).to_string(),
        }
        .into());
    }
    Ok(listed.collect())
}

/// The checkpoint of `size`, its log signature checked.
async fn signed<B: Bucket>(
    reader: &LogReader<'_, S3Archive<B>>,
    log: &LogKey,
    size: u64,
) -> Result<Accepted, WitnessError> {
    let key = audit_model::note::checkpoint_key(size);
    // The first of its names whose log signature holds (one planted at its name is passed
    // over: docs/archive.md "Planted log objects").
    let (stored, _) = reader.checkpoint_signed(size, log).await?;
    let note = match stored {
        None => return Err(Error::Vanished { key }.into()),
        // A note that does not parse (named by its key) is no checkpoint the log signed.
        Some(Err(why)) => {
            return Err(Refusal::BadSignature {
                size,
                why: Error::NotANote { key, why }.to_string(),
            }
            .into());
        }
        Some(Ok(note)) => note,
    };
    let checkpoint = log.checkpoint(&note).map_err(|why| Refusal::BadSignature {
        size,
        why: why.to_string(),
    })?;
    if checkpoint.size != size {
        return Err(Refusal::WrongKey {
            key_size: size,
            size: checkpoint.size,
        }
        .into());
    }
    Ok(Accepted {
        checkpoint,
        text: note.text(),
        body: note.body,
    })
}

/// RFC 9162 consistency of the accepted tree `(size, root)` with `new`, the proof made from the
/// tiles of the tree of `new.size`.
async fn consistent<B: Bucket>(
    reader: &LogReader<'_, S3Archive<B>>,
    (old, old_root): (u64, Hash),
    new: &Checkpoint,
) -> Result<(), WitnessError> {
    let refuse = |why: String| Refusal::NotExtending {
        old,
        new: new.size,
        why,
    };
    let tiles = consistency_tiles(old, new.size).map_err(|e| refuse(e.to_string()))?;
    let holds = |tiles: &mut Tiles| {
        consistency_proof(old, new.size, tiles).is_ok_and(|proof| {
            verify_consistency(old, new.size, &old_root, &new.root, &proof).is_ok()
        })
    };
    let (mut tiles, _) = reader.tiles_checked(new.size, tiles, holds).await?;
    let proof = consistency_proof(old, new.size, &mut tiles).map_err(|e| refuse(e.to_string()))?;
    verify_consistency(old, new.size, &old_root, &new.root, &proof)
        .map_err(|e| refuse(e.to_string()))?;
    Ok(())
}

/// Stores `line` as this witness's cosignature of the checkpoint of `size`, whose body is `body`
/// (If-None-Match): true when its own cosignature was already there (a run before whose state was
/// not saved). A slot that holds anything else (someone with `s3:PutObject` under
/// `log/cosignatures/` wrote there first) is refused: the witness never counts another's object
/// as its own cosignature.
async fn store<B: Bucket>(
    reader: &LogReader<'_, S3Archive<B>>,
    size: u64,
    body: &str,
    line: &NoteSignature,
    signer: &WitnessSigner,
) -> Result<bool, WitnessError> {
    let key = cosignature_key(size, signer.key.key_id());
    let bytes = line.line().into_bytes();
    let sha256 = audit_model::digest::sha256(&bytes);
    let created = reader
        .archive
        .put_if_absent(NewObject {
            key: key.clone(),
            body: bytes.into(),
            content_type: "text/plain; charset=utf-8",
            sha256,
            metadata: Vec::new(),
        })
        .await
        .map_err(|e| write_error(&key, &e))?;
    if created != Created::AlreadyExists {
        return Ok(false);
    }
    let taken = |why: &str| Refusal::SlotTaken {
        size,
        key: key.clone(),
        why: why.to_owned(),
    };
    let Some(stored) = reader.get(&key).await? else {
        return Err(taken("it cannot be read back").into());
    };
    let Ok(text) = String::from_utf8(stored) else {
        return Err(taken("it is not UTF-8 text").into());
    };
    // The object must be exactly one signature line of this witness, over this body.
    let note = SignedNote::parse(&format!("{body}\n{text}"))
        .map_err(|e| taken(&format!("it is not one signature line: {e}")))?;
    if note.signatures.len() != 1 {
        return Err(taken("it is not one signature line").into());
    }
    crate::offline::check_cosignature(&note, &signer.key).map_err(|e| taken(&e.to_string()))?;
    Ok(true)
}

fn write_error(key: &str, error: &AwsError) -> Error {
    let (key, error) = (key.to_owned(), error.clone());
    match error.kind {
        ErrorKind::Denied => Error::CosignatureDenied { key, error },
        _ => Error::Cosignature { key, error },
    }
}

#[cfg(test)]
mod tests;
