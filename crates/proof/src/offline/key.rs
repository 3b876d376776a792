//! Owns the keys a proof is checked with: the log's ECDSA P-256 key (from DER or PEM) and its
//! signature on a checkpoint, a witness's Ed25519 key (from its vkey or a file) and its
//! cosignature. Must not know where a key was fetched from (KMS, a file, a command line).

use audit_model::digest::hex;
use audit_model::note::{
    Checkpoint, SignedNote, WitnessKey, cosigned_message, ecdsa_key_id, split_cosignature,
};
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1, ED25519, ParsedPublicKey, UnparsedPublicKey};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::CheckError;

/// Why bytes or a text are not the log's public key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("the public key is not an ECDSA P-256 key ({0})")]
    NotEcdsaP256(String),
    #[error(
        "not a PEM public key (want a -----BEGIN PUBLIC KEY----- block, as `openssl ec -pubin` or docs/operations.md makes it)"
    )]
    NotPem,
    #[error("the PEM block is not base64")]
    NotBase64,
}

/// The DER SubjectPublicKeyInfo as a PEM public key, 64 characters a line (what `from_pem`
/// reads back).
pub fn public_key_pem(der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut text = String::from("-----BEGIN PUBLIC KEY-----\n");
    for line in body.as_bytes().chunks(64) {
        text.push_str(&String::from_utf8_lossy(line));
        text.push('\n');
    }
    text.push_str("-----END PUBLIC KEY-----\n");
    text
}

/// Why a `--witness-key` argument is not a witness's key. Each names the argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WitnessKeyError {
    #[error("--witness-key {arg}: {reason}")]
    NotKey { arg: String, reason: String },
    #[error(
        "--witness-key {arg}: neither a witness key (<name>+<key id>+<base64 key>, as `auditctl witness --init` prints it) nor a file that holds one ({reason})"
    )]
    Unreadable { arg: String, reason: String },
    #[error("--witness-key {arg}: the file holds no witness key: {reason}")]
    FileHoldsNoKey { arg: String, reason: String },
}

/// The log's key: the digest key's public key (DER SPKI), checking checkpoints' signature lines
/// of type 0x02 (key id: the first four bytes of SHA-256 of the DER).
pub struct LogKey {
    key: ParsedPublicKey,
    key_id: [u8; 4],
}

impl std::fmt::Debug for LogKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogKey")
            .field("key_id", &hex(&self.key_id))
            .finish()
    }
}

impl LogKey {
    /// The key from its DER SubjectPublicKeyInfo (KMS GetPublicKey's `PublicKey`).
    pub fn from_der(der: &[u8]) -> Result<Self, KeyError> {
        let key = ParsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, der)
            .map_err(|e| KeyError::NotEcdsaP256(e.to_string()))?;
        Ok(Self {
            key,
            key_id: ecdsa_key_id(der),
        })
    }

    /// The key from a PEM `PUBLIC KEY` block (what `aws kms get-public-key` gives, as
    /// docs/operations.md turns it into a file).
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        let body: String = pem
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("-----"))
            .collect();
        if !pem.contains("-----BEGIN PUBLIC KEY-----") {
            return Err(KeyError::NotPem);
        }
        let der = STANDARD.decode(body).map_err(|_| KeyError::NotBase64)?;
        Self::from_der(&der)
    }

    pub fn key_id(&self) -> [u8; 4] {
        self.key_id
    }

    /// The checkpoint a note carries, when this key's signature (by the checkpoint's origin as
    /// key name, with this key's id) is on it and holds.
    pub fn checkpoint(&self, note: &SignedNote) -> Result<Checkpoint, CheckError> {
        let checkpoint = Checkpoint::parse(&note.body)?;
        let mut signatures = note.by(&checkpoint.origin, self.key_id).peekable();
        if signatures.peek().is_none() {
            return Err(CheckError::NotSignedByKey {
                origin: checkpoint.origin.clone(),
                key_id: hex(&self.key_id),
            });
        }
        for signature in signatures {
            if self
                .key
                .verify_sig(note.body.as_bytes(), &signature.signature)
                .is_err()
            {
                return Err(CheckError::LogSignature);
            }
        }
        Ok(checkpoint)
    }
}

/// The timestamp of `witness`'s cosignature on `note`, when it is there and holds.
pub fn check_cosignature(note: &SignedNote, witness: &WitnessKey) -> Result<u64, CheckError> {
    let Some(line) = note.by(&witness.name, witness.key_id()).next() else {
        return Err(CheckError::NoCosignature {
            name: witness.name.clone(),
            key_id: hex(&witness.key_id()),
        });
    };
    let (timestamp, signature) =
        split_cosignature(&line.signature).ok_or_else(|| CheckError::CosignatureMalformed {
            name: witness.name.clone(),
        })?;
    let message = cosigned_message(timestamp, &note.body);
    UnparsedPublicKey::new(&ED25519, witness.public)
        .verify(message.as_bytes(), signature)
        .map_err(|_| CheckError::Cosignature {
            name: witness.name.clone(),
        })?;
    Ok(timestamp)
}

/// Every `--witness-key` given, each read with `witness_key_arg`, a key given twice kept once, in
/// the order given.
pub fn witness_key_args(args: &[String]) -> Result<Vec<WitnessKey>, WitnessKeyError> {
    let mut witnesses = Vec::new();
    for arg in args {
        let witness = witness_key_arg(arg)?;
        if !witnesses.contains(&witness) {
            witnesses.push(witness);
        }
    }
    Ok(witnesses)
}

/// A witness's key as given on the command line (`--witness-key`): the vkey itself
/// (`<name>+<key id>+<base64 key>`, as `auditctl witness --init` prints it) or the path of a file
/// that holds one.
pub fn witness_key_arg(arg: &str) -> Result<WitnessKey, WitnessKeyError> {
    let text = arg.trim();
    if text.matches('+').count() >= 2 && !std::path::Path::new(text).is_file() {
        return WitnessKey::parse(text).map_err(|e| WitnessKeyError::NotKey {
            arg: text.to_owned(),
            reason: e.to_string(),
        });
    }
    let held = std::fs::read_to_string(text).map_err(|e| WitnessKeyError::Unreadable {
        arg: text.to_owned(),
        reason: e.to_string(),
    })?;
    WitnessKey::parse(held.trim()).map_err(|e| WitnessKeyError::FileHoldsNoKey {
        arg: text.to_owned(),
        reason: e.to_string(),
    })
}
