//! Owns checking one event's proof with no network: the log's key (`key`), the checkpoint's
//! signature and witnesses' cosignatures on it, the inclusion path, the typed reasons a proof
//! does not hold. Must not know where the proof, the key or the witness keys came from.

mod bundle;
mod key;

pub use bundle::{BundleProblem, BundleVerdict, check_bundle};
pub use key::{
    KeyError, LogKey, WitnessKeyError, check_cosignature, public_key_pem, witness_key_arg,
    witness_key_args,
};

use audit_model::note::{Checkpoint, NoteError, PROOF_FORMAT, Proof, SignedNote};
use audit_model::tlog::{Hash, TlogError, leaf_hash, parse_hex_hash, verify_inclusion};

/// Why a proof, a checkpoint or a cosignature does not hold. Each reads as the reason printed
/// after `FAILED: ` (docs/auditctl.md "check-proof").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    #[error("not a proof of this format: {found:?} (want {PROOF_FORMAT})")]
    Format { found: String },
    /// The checkpoint's text is not a signed note, or its body not a checkpoint.
    #[error(transparent)]
    Note(#[from] NoteError),
    #[error(
        "the checkpoint has no signature by the log's key (name {origin}, key id {key_id}): it was not signed by this key"
    )]
    NotSignedByKey { origin: String, key_id: String },
    #[error("the log's signature on the checkpoint does not hold")]
    LogSignature,
    #[error("the proof says treeSize {claimed} but its checkpoint is of size {size}")]
    SizeMismatch { claimed: u64, size: u64 },
    #[error("{hash:?} in inclusionPath is not a hex SHA-256")]
    PathHash { hash: String },
    #[error("the line is not the leaf {index} of the checkpoint's tree: {source}")]
    NotLeaf { index: u64, source: TlogError },
    #[error("the proven line is not a JSON object")]
    LineNotJson,
    #[error("the proven line's {field} is not the proof's {want:?}")]
    LineField { field: &'static str, want: String },
    #[error("no cosignature by the witness {name} (key id {key_id})")]
    NoCosignature { name: String, key_id: String },
    #[error("the cosignature by {name} is not a timestamp and an Ed25519 signature")]
    CosignatureMalformed { name: String },
    #[error("the cosignature by {name} does not hold")]
    Cosignature { name: String },
    /// The log's key itself is not one (a DER that is not ECDSA P-256).
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// What a proof proves, once checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub message_id: String,
    pub leaf_index: u64,
    pub tree_size: u64,
    pub origin: String,
    /// The witnesses asked for whose cosignatures hold, with their timestamps.
    pub cosigned: Vec<(String, u64)>,
}

/// Checks a proof with no network: the checkpoint's signature by `log`, the line's leaf up the
/// inclusion path to the checkpoint's root, the line's `messageId` and `auditTime` being the
/// proof's, and each witness's cosignature.
pub fn check_proof(
    proof: &Proof,
    log: &LogKey,
    witnesses: &[audit_model::note::WitnessKey],
) -> Result<Verdict, CheckError> {
    if proof.format != PROOF_FORMAT {
        return Err(CheckError::Format {
            found: proof.format.clone(),
        });
    }
    let note = SignedNote::parse(&proof.checkpoint)?;
    let checkpoint = log.checkpoint(&note)?;
    check_inclusion(proof, &checkpoint)?;
    let cosigned = witnesses
        .iter()
        .map(|w| check_cosignature(&note, w).map(|t| (w.name.clone(), t)))
        .collect::<Result<_, _>>()?;
    Ok(Verdict {
        message_id: proof.message_id.clone(),
        leaf_index: proof.leaf_index,
        tree_size: proof.tree_size,
        origin: checkpoint.origin,
        cosigned,
    })
}

/// Checks a proof against `checkpoint`, its checkpoint's body whose signature by the log was
/// checked already (an evidence bundle's many proofs share one checkpoint: its ECDSA check, most
/// of a proof's cost, is done once): the format, the tree size, the line's leaf up the inclusion
/// path to the root, the line's `messageId` and `auditTime` being the proof's.
pub fn check_inclusion(proof: &Proof, checkpoint: &Checkpoint) -> Result<(), CheckError> {
    if proof.format != PROOF_FORMAT {
        return Err(CheckError::Format {
            found: proof.format.clone(),
        });
    }
    if checkpoint.size != proof.tree_size {
        return Err(CheckError::SizeMismatch {
            claimed: proof.tree_size,
            size: checkpoint.size,
        });
    }
    let path: Vec<Hash> = proof
        .inclusion_path
        .iter()
        .map(|h| parse_hex_hash(h).ok_or_else(|| CheckError::PathHash { hash: h.clone() }))
        .collect::<Result<_, _>>()?;
    verify_inclusion(
        proof.leaf_index,
        proof.tree_size,
        &leaf_hash(proof.line.as_bytes()),
        &path,
        &checkpoint.root,
    )
    .map_err(|source| CheckError::NotLeaf {
        index: proof.leaf_index,
        source,
    })?;
    let fields: serde_json::Value =
        serde_json::from_str(&proof.line).map_err(|_| CheckError::LineNotJson)?;
    for (field, want) in [
        ("messageId", &proof.message_id),
        ("auditTime", &proof.audit_time),
    ] {
        if fields.get(field).and_then(|v| v.as_str()) != Some(want.as_str()) {
            return Err(CheckError::LineField {
                field,
                want: want.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
