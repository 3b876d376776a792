//! Owns the transparency log's texts: the checkpoint (c2sp.org/tlog-checkpoint), the signed note
//! that carries it (c2sp.org/signed-note), the log's ECDSA signature line (type 0x02) and the
//! witnesses' Ed25519 cosignatures (c2sp.org/tlog-cosignature, type 0x04), the witness's keys,
//! the object keys of checkpoints, cosignatures and period indexes, and the proof `auditctl
//! prove` prints. Pure: the signatures themselves are made and checked by the callers' crypto
//! (KMS, aws-lc-rs); this module says which bytes and which lines.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::archive::Period;
use crate::tlog::Hash;

/// The log's checkpoints: `log/checkpoints/<tree size, 20 digits>` (keys sort by size; the
/// newest is the last key). A checkpoint is a statement about a tree size: a period that adds no
/// leaf names the checkpoint of the size before it.
pub const CHECKPOINTS_PREFIX: &str = "log/checkpoints/";
/// Where witnesses store cosignatures: `log/cosignatures/<tree size, 20 digits>/<key id hex>`,
/// one signature line each (the checkpoint's note text is the checkpoint's).
pub const COSIGNATURES_PREFIX: &str = "log/cosignatures/";
/// Each period's locator: `log/index/p<periodStart>.tsv.gz`, one line per trail event of the
/// period: `messageId TAB auditTime TAB leafIndex TAB objectKey TAB lineNumber`.
pub const INDEX_PREFIX: &str = "log/index/";
/// The signature type of the log's ECDSA P-256 signature (c2sp.org/signed-note).
pub const ECDSA_SIGNATURE_TYPE: u8 = 0x02;
/// The signature type of an Ed25519 cosignature (c2sp.org/tlog-cosignature).
pub const COSIGNATURE_TYPE: u8 = 0x04;
/// The proof's format, its first field.
pub const PROOF_FORMAT: &str = "audit-receiver-proof/1";

/// The checkpoint origin (and the log's key name) of the log of `bucket`.
pub fn origin(bucket: &str) -> String {
    format!("audit-receiver/{bucket}")
}

/// The key of the checkpoint of the tree of `size` leaves.
pub fn checkpoint_key(size: u64) -> String {
    format!("{CHECKPOINTS_PREFIX}{size:020}")
}

/// The tree size a checkpoint key names.
pub fn parse_checkpoint_key(key: &str) -> Option<u64> {
    let digits = key.strip_prefix(CHECKPOINTS_PREFIX)?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The key of `period`'s index.
pub fn index_key(period: Period) -> String {
    format!("{INDEX_PREFIX}p{}.tsv.gz", period.start)
}

/// Where the cosignatures of the checkpoint of `size` are.
pub fn cosignatures_of(size: u64) -> String {
    format!("{COSIGNATURES_PREFIX}{size:020}/")
}

/// The key of a witness's cosignature of the checkpoint of `size`.
pub fn cosignature_key(size: u64, key_id: [u8; 4]) -> String {
    format!("{}{}", cosignatures_of(size), crate::digest::hex(&key_id))
}

/// The tree size a cosignature key names.
pub fn parse_cosignature_key(key: &str) -> Option<u64> {
    let rest = key.strip_prefix(COSIGNATURES_PREFIX)?;
    let (digits, _) = rest.split_once('/')?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Why a text is not what it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    #[error("not a signed note: {0}")]
    Malformed(String),
    #[error("not a checkpoint: {0}")]
    NotCheckpoint(String),
    #[error("not a witness key: {0}")]
    NotKey(String),
}

/// A checkpoint's body: origin, tree size, root hash (each line ending in a newline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    pub origin: String,
    pub size: u64,
    pub root: Hash,
}

impl Checkpoint {
    /// The note text: `<origin>\n<size>\n<base64 root>\n`.
    pub fn body(&self) -> String {
        format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.size,
            STANDARD.encode(self.root)
        )
    }

    /// Reads a note text (extension lines after the third are allowed and ignored).
    pub fn parse(body: &str) -> Result<Self, NoteError> {
        let bad = |why: &str| NoteError::NotCheckpoint(why.to_owned());
        let mut lines = body.split_inclusive('\n');
        let origin = lines
            .next()
            .and_then(|l| l.strip_suffix('\n'))
            .filter(|l| !l.is_empty())
            .ok_or_else(|| bad("no origin line"))?;
        let size = lines
            .next()
            .and_then(|l| l.strip_suffix('\n'))
            .ok_or_else(|| bad("no tree size line"))?;
        if size.is_empty() || (size.len() > 1 && size.starts_with('0')) {
            return Err(bad("the tree size is not a decimal number"));
        }
        let size: u64 = size
            .parse()
            .map_err(|_| bad("the tree size is not a decimal number"))?;
        let root = lines
            .next()
            .and_then(|l| l.strip_suffix('\n'))
            .ok_or_else(|| bad("no root hash line"))?;
        let root: Hash = STANDARD
            .decode(root)
            .ok()
            .and_then(|r| r.try_into().ok())
            .ok_or_else(|| bad("the root hash is not 32 bytes of base64"))?;
        Ok(Self {
            origin: origin.to_owned(),
            size,
            root,
        })
    }
}

/// One signature line: `— <name> <base64(key id || signature)>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoteSignature {
    pub name: String,
    pub key_id: [u8; 4],
    pub signature: Vec<u8>,
}

impl NoteSignature {
    pub fn line(&self) -> String {
        let mut bytes = self.key_id.to_vec();
        bytes.extend_from_slice(&self.signature);
        format!("\u{2014} {} {}\n", self.name, STANDARD.encode(bytes))
    }
}

/// A signed note: its text and its signature lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedNote {
    /// The text, its final newline included.
    pub body: String,
    pub signatures: Vec<NoteSignature>,
}

impl SignedNote {
    /// Reads a signed note (c2sp.org/signed-note): the text, a blank line, one or more signature
    /// lines, each ending in a newline.
    pub fn parse(text: &str) -> Result<Self, NoteError> {
        let bad = |why: &str| NoteError::Malformed(why.to_owned());
        if text.chars().any(|c| c.is_control() && c != '\n') {
            return Err(bad("it holds a control character"));
        }
        let split = text
            .rfind("\n\n")
            .ok_or_else(|| bad("no blank line before the signatures"))?;
        let body = &text[..=split];
        let lines = &text[split + 2..];
        if lines.is_empty() {
            return Err(bad("no signature lines"));
        }
        if !lines.ends_with('\n') {
            return Err(bad(
                "the last signature line does not end in a newline (truncated?)",
            ));
        }
        let mut signatures = Vec::new();
        for line in lines.lines() {
            let rest = line.strip_prefix("\u{2014} ").ok_or_else(|| {
                bad(&format!(
                    "a signature line does not start with an em dash: {line:?}"
                ))
            })?;
            let (name, encoded) = rest
                .rsplit_once(' ')
                .ok_or_else(|| bad(&format!("a signature line has no signature: {line:?}")))?;
            if name.is_empty() || name.contains(' ') || name.contains('+') {
                return Err(bad(&format!(
                    "a signature line's key name is not valid: {line:?}"
                )));
            }
            let bytes = STANDARD
                .decode(encoded)
                .map_err(|_| bad(&format!("a signature is not base64: {line:?}")))?;
            if bytes.len() < 5 {
                return Err(bad(&format!("a signature is too short: {line:?}")));
            }
            signatures.push(NoteSignature {
                name: name.to_owned(),
                key_id: bytes[..4].try_into().unwrap_or([0; 4]),
                signature: bytes[4..].to_vec(),
            });
        }
        Ok(Self {
            body: body.to_owned(),
            signatures,
        })
    }

    /// The note as text.
    pub fn text(&self) -> String {
        let mut text = self.body.clone();
        text.push('\n');
        for signature in &self.signatures {
            text.push_str(&signature.line());
        }
        text
    }

    /// The signatures by `name` with `key_id` (a verifier checks only the keys it knows).
    pub fn by(&self, name: &str, key_id: [u8; 4]) -> impl Iterator<Item = &NoteSignature> {
        self.signatures
            .iter()
            .filter(move |s| s.name == name && s.key_id == key_id)
    }

    /// Adds `signature` unless the note already has it.
    pub fn add(&mut self, signature: NoteSignature) {
        if !self.signatures.contains(&signature) {
            self.signatures.push(signature);
        }
    }
}

/// The key ID of the log's ECDSA key (type 0x02): SHA-256 of its DER SPKI, first four bytes.
pub fn ecdsa_key_id(spki_der: &[u8]) -> [u8; 4] {
    let hash: [u8; 32] = Sha256::digest(spki_der).into();
    hash[..4].try_into().unwrap_or([0; 4])
}

/// The key ID of a witness's Ed25519 cosigning key:
/// SHA-256(name || `\n` || 0x04 || 32-byte public key), first four bytes.
pub fn cosigner_key_id(name: &str, public: &[u8; 32]) -> [u8; 4] {
    let mut hasher = Sha256::new();
    hasher.update(name.as_bytes());
    hasher.update([b'\n', COSIGNATURE_TYPE]);
    hasher.update(public);
    let hash: [u8; 32] = hasher.finalize().into();
    hash[..4].try_into().unwrap_or([0; 4])
}

/// What a witness signs (c2sp.org/tlog-cosignature, Ed25519): `cosignature/v1\ntime <t>\n` and
/// the checkpoint's note text.
pub fn cosigned_message(timestamp: u64, body: &str) -> String {
    format!("cosignature/v1\ntime {timestamp}\n{body}")
}

/// A cosignature's signature bytes: the timestamp (8 bytes, big-endian) and the Ed25519
/// signature (64 bytes).
pub fn split_cosignature(signature: &[u8]) -> Option<(u64, &[u8])> {
    if signature.len() != 72 {
        return None;
    }
    let timestamp = u64::from_be_bytes(signature[..8].try_into().ok()?);
    Some((timestamp, &signature[8..]))
}

/// A witness's public key, as a verifier key (c2sp.org/signed-note "vkey"):
/// `<name>+<hex key id>+<base64(0x04 || public key)>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WitnessKey {
    pub name: String,
    pub public: [u8; 32],
}

impl WitnessKey {
    pub fn key_id(&self) -> [u8; 4] {
        cosigner_key_id(&self.name, &self.public)
    }

    pub fn vkey(&self) -> String {
        let mut bytes = vec![COSIGNATURE_TYPE];
        bytes.extend_from_slice(&self.public);
        format!(
            "{}+{}+{}",
            self.name,
            crate::digest::hex(&self.key_id()),
            STANDARD.encode(bytes)
        )
    }

    /// Reads a vkey; the key ID must be the one its name and key give.
    pub fn parse(vkey: &str) -> Result<Self, NoteError> {
        let bad = |why: &str| {
            NoteError::NotKey(format!(
                "{why} (want <name>+<key id>+<base64 key>, as `auditctl witness --init` prints)"
            ))
        };
        let vkey = vkey.trim();
        // From the left: a name holds no '+', base64 may (c2sp.org/signed-note).
        let mut parts = vkey.splitn(3, '+');
        let (Some(name), Some(id), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad("it does not have three parts"));
        };
        let bytes = STANDARD
            .decode(key)
            .map_err(|_| bad("its key is not base64"))?;
        if bytes.len() != 33 || bytes[0] != COSIGNATURE_TYPE {
            return Err(bad("its key is not a type 0x04 Ed25519 key"));
        }
        let public: [u8; 32] = bytes[1..]
            .try_into()
            .map_err(|_| bad("its key is not 32 bytes"))?;
        let key = Self {
            name: name.to_owned(),
            public,
        };
        if crate::digest::hex(&key.key_id()) != id.to_ascii_lowercase() {
            return Err(bad("its key id is not the one its name and key give"));
        }
        Ok(key)
    }
}

/// What `auditctl prove` prints: everything needed to check one event offline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Proof {
    pub format: String,
    pub message_id: String,
    pub audit_time: String,
    /// The event's line, exactly as archived (its leaf is SHA-256(0x00 || line)).
    pub line: String,
    /// The archive object that holds the line, and the line's number in it (from 0).
    pub object: String,
    pub line_number: u64,
    pub leaf_index: u64,
    pub tree_size: u64,
    /// Hex, RFC 9162 order (from the leaf's sibling up).
    pub inclusion_path: Vec<String>,
    /// The checkpoint of `treeSize`: the signed note's text, the log's signature and the
    /// witnesses' cosignatures included.
    pub checkpoint: String,
}

/// One line of a period's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexRow {
    pub message_id: String,
    pub audit_time: String,
    pub leaf_index: u64,
    pub object: String,
    pub line_number: u64,
}

impl IndexRow {
    pub fn line(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{}\n",
            self.message_id, self.audit_time, self.leaf_index, self.object, self.line_number
        )
    }

    pub fn parse(line: &str) -> Option<Self> {
        let mut parts = line.trim_end_matches('\n').split('\t');
        let row = Self {
            message_id: parts.next()?.to_owned(),
            audit_time: parts.next()?.to_owned(),
            leaf_index: parts.next()?.parse().ok()?,
            object: parts.next()?.to_owned(),
            line_number: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint() -> Checkpoint {
        Checkpoint {
            origin: "audit-receiver/bucket".to_owned(),
            size: 20_852_163,
            root: [7; 32],
        }
    }

    #[test]
    fn a_checkpoint_reads_back_and_a_bad_one_is_named() {
        let body = checkpoint().body();
        assert_eq!(
            body,
            format!(
                "audit-receiver/bucket\n20852163\n{}\n",
                STANDARD.encode([7u8; 32])
            )
        );
        assert_eq!(Checkpoint::parse(&body).unwrap(), checkpoint());
        assert_eq!(
            Checkpoint::parse(&format!("{body}extension\n")).unwrap(),
            checkpoint()
        );
        for bad in [
            "",
            "origin\n",
            "origin\n012\nAAAA\n",
            "origin\n12\nAAAA\n",
            "origin\nx\n",
        ] {
            assert!(Checkpoint::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn signed_notes_parse_with_one_or_two_signatures_and_refuse_truncation() {
        let body = checkpoint().body();
        let log = NoteSignature {
            name: "audit-receiver/bucket".to_owned(),
            key_id: [1, 2, 3, 4],
            signature: vec![9; 70],
        };
        let witness = NoteSignature {
            name: "witness.example/w1".to_owned(),
            key_id: [5, 6, 7, 8],
            signature: vec![8; 72],
        };
        let note = SignedNote {
            body: body.clone(),
            signatures: vec![log.clone(), witness.clone()],
        };
        let text = note.text();
        assert_eq!(SignedNote::parse(&text).unwrap(), note);
        assert_eq!(note.by("witness.example/w1", [5, 6, 7, 8]).count(), 1);
        assert_eq!(
            note.by("witness.example/w1", [5, 6, 7, 9]).count(),
            0,
            "a wrong key id is no match"
        );
        assert!(SignedNote::parse(&body).is_err(), "no signatures");
        assert!(
            SignedNote::parse(&format!("{body}\n")).is_err(),
            "a blank line and no signature"
        );
        assert!(
            SignedNote::parse(text.trim_end_matches('\n')).is_err(),
            "a truncated last line"
        );
        assert!(SignedNote::parse(&text.replace('\u{2014}', "-")).is_err());
        assert!(
            SignedNote::parse(
                &text.replace("audit-receiver/bucket\n2", "audit-receiver/bucket\r\n2")
            )
            .is_err()
        );
    }

    #[test]
    fn witness_keys_read_back_and_a_wrong_key_id_is_refused() {
        let key = WitnessKey {
            name: "witness.example/w1".to_owned(),
            public: [3; 32],
        };
        let vkey = key.vkey();
        assert_eq!(WitnessKey::parse(&vkey).unwrap(), key);
        let (rest, _) = vkey.rsplit_once('+').unwrap();
        let (name, _) = rest.rsplit_once('+').unwrap();
        let wrong = format!("{name}+00000000+{}", vkey.rsplit_once('+').unwrap().1);
        assert!(WitnessKey::parse(&wrong).is_err());
        assert!(WitnessKey::parse("nonsense").is_err());
        // Base64 holds '+': a key whose encoding has one reads back too.
        let plus = (0u8..=255)
            .map(|b| WitnessKey {
                name: "w".to_owned(),
                public: [b; 32],
            })
            .find(|k| k.vkey().matches('+').count() > 2)
            .unwrap();
        assert_eq!(WitnessKey::parse(&plus.vkey()).unwrap(), plus);
    }

    #[test]
    fn keys_sort_by_tree_size_and_read_back() {
        assert_eq!(checkpoint_key(42), "log/checkpoints/00000000000000000042");
        assert!(checkpoint_key(9) < checkpoint_key(10));
        assert_eq!(parse_checkpoint_key(&checkpoint_key(1234)), Some(1234));
        assert_eq!(parse_checkpoint_key("log/checkpoints/12"), None);
        let key = cosignature_key(7, [0xab, 0, 1, 2]);
        assert_eq!(key, "log/cosignatures/00000000000000000007/ab000102");
        assert_eq!(parse_cosignature_key(&key), Some(7));
    }

    #[test]
    fn index_rows_read_back() {
        let row = IndexRow {
            message_id: "m-1".to_owned(),
            audit_time: "2026-01-01T00:00:00.000Z".to_owned(),
            leaf_index: 42,
            object: "trail/dt=2026-01-01/hour=00/p0-1-a0.jsonl.gz".to_owned(),
            line_number: 3,
        };
        assert_eq!(IndexRow::parse(&row.line()), Some(row));
        assert_eq!(IndexRow::parse("a\tb\t1"), None);
    }
}
