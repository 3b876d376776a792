//! Owns reading and checking the transparency log for `auditctl`'s commands (`prove`,
//! `check-proof`, `consistency`, `witness`, `verify`, the viewer): the log's key and its
//! signature on a checkpoint, a witness's cosignature, a whole proof checked offline, and the
//! log's objects read from the archive bucket (tiles, checkpoints, cosignatures). The formats are
//! `audit_model::tlog` and `audit_model::note`'s; docs/archive.md "The transparency log".

use std::collections::BTreeSet;

use audit_aws::s3::Bucket;
use audit_model::note::{
    CHECKPOINTS_PREFIX, COSIGNATURES_PREFIX, Checkpoint, NoteSignature, PROOF_FORMAT, Proof,
    SignedNote, WitnessKey, checkpoint_key, cosignatures_of, ecdsa_key_id, parse_checkpoint_key,
    split_cosignature,
};
use audit_model::tlog::{Hash, TileRef, Tiles, leaf_hash, parse_hex_hash, verify_inclusion};
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1, ED25519, ParsedPublicKey, UnparsedPublicKey};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures::{StreamExt, TryStreamExt};

use crate::TrailError;
use crate::verify::s3::S3Archive;

/// Tiles read at once.
const TILE_CONCURRENCY: usize = 16;
/// Keys per listing page.
const LIST_PAGE: usize = 1000;

/// The log's key: the digest key's public key (DER SPKI), checking checkpoints' signature lines
/// of type 0x02 (key id: the first four bytes of SHA-256 of the DER).
pub struct LogKey {
    key: ParsedPublicKey,
    key_id: [u8; 4],
}

impl std::fmt::Debug for LogKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogKey")
            .field("key_id", &audit_model::digest::hex(&self.key_id))
            .finish()
    }
}

impl LogKey {
    /// The key from its DER SubjectPublicKeyInfo (KMS GetPublicKey's `PublicKey`).
    pub fn from_der(der: &[u8]) -> Result<Self, String> {
        let key = ParsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, der)
            .map_err(|e| format!("the public key is not an ECDSA P-256 key ({e})"))?;
        Ok(Self {
            key,
            key_id: ecdsa_key_id(der),
        })
    }

    /// The key from a PEM `PUBLIC KEY` block (what `aws kms get-public-key` gives, as
    /// docs/operations.md turns it into a file).
    pub fn from_pem(pem: &str) -> Result<Self, String> {
        let body: String = pem
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("-----"))
            .collect();
        if !pem.contains("-----BEGIN PUBLIC KEY-----") {
            return Err(
                "not a PEM public key (want a -----BEGIN PUBLIC KEY----- block, as `openssl ec -pubin` or docs/operations.md makes it)"
                    .to_owned(),
            );
        }
        let der = STANDARD
            .decode(body)
            .map_err(|_| "the PEM block is not base64".to_owned())?;
        Self::from_der(&der)
    }

    pub fn key_id(&self) -> [u8; 4] {
        self.key_id
    }

    /// The checkpoint a note carries, when this key's signature (by the checkpoint's origin as
    /// key name, with this key's id) is on it and holds.
    pub fn checkpoint(&self, note: &SignedNote) -> Result<Checkpoint, String> {
        let checkpoint = Checkpoint::parse(&note.body).map_err(|e| e.to_string())?;
        let mut signatures = note.by(&checkpoint.origin, self.key_id).peekable();
        if signatures.peek().is_none() {
            return Err(format!(
                "the checkpoint has no signature by the log's key (name {}, key id {}): it was not signed by this key",
                checkpoint.origin,
                audit_model::digest::hex(&self.key_id)
            ));
        }
        for signature in signatures {
            if self
                .key
                .verify_sig(note.body.as_bytes(), &signature.signature)
                .is_err()
            {
                return Err("the log's signature on the checkpoint does not hold".to_owned());
            }
        }
        Ok(checkpoint)
    }
}

/// The timestamp of `witness`'s cosignature on `note`, when it is there and holds.
pub fn check_cosignature(note: &SignedNote, witness: &WitnessKey) -> Result<u64, String> {
    let Some(line) = note.by(&witness.name, witness.key_id()).next() else {
        return Err(format!(
            "no cosignature by the witness {} (key id {})",
            witness.name,
            audit_model::digest::hex(&witness.key_id())
        ));
    };
    let (timestamp, signature) = split_cosignature(&line.signature).ok_or_else(|| {
        format!(
            "the cosignature by {} is not a timestamp and an Ed25519 signature",
            witness.name
        )
    })?;
    let message = audit_model::note::cosigned_message(timestamp, &note.body);
    UnparsedPublicKey::new(&ED25519, witness.public)
        .verify(message.as_bytes(), signature)
        .map_err(|_| format!("the cosignature by {} does not hold", witness.name))?;
    Ok(timestamp)
}

/// A witness's key as given on the command line (`--witness-key`): the vkey itself
/// (`<name>+<key id>+<base64 key>`, as `auditctl witness --init` prints it) or the path of a file
/// that holds one; why not, naming the format.
pub fn witness_key_arg(arg: &str) -> Result<WitnessKey, String> {
    let text = arg.trim();
    if text.matches('+').count() >= 2 && !std::path::Path::new(text).is_file() {
        return WitnessKey::parse(text).map_err(|e| format!("--witness-key {text}: {e}"));
    }
    let held = std::fs::read_to_string(text).map_err(|e| {
        format!(
            "--witness-key {text}: neither a witness key (<name>+<key id>+<base64 key>, as `auditctl witness --init` prints it) nor a file that holds one ({e})"
        )
    })?;
    WitnessKey::parse(held.trim())
        .map_err(|e| format!("--witness-key {text}: the file holds no witness key: {e}"))
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
    witnesses: &[WitnessKey],
) -> Result<Verdict, String> {
    if proof.format != PROOF_FORMAT {
        return Err(format!(
            "not a proof of this format: {:?} (want {PROOF_FORMAT})",
            proof.format
        ));
    }
    let note = SignedNote::parse(&proof.checkpoint).map_err(|e| e.to_string())?;
    let checkpoint = log.checkpoint(&note)?;
    if checkpoint.size != proof.tree_size {
        return Err(format!(
            "the proof says treeSize {} but its checkpoint is of size {}",
            proof.tree_size, checkpoint.size
        ));
    }
    let path: Vec<Hash> = proof
        .inclusion_path
        .iter()
        .map(|h| {
            parse_hex_hash(h).ok_or_else(|| format!("{h:?} in inclusionPath is not a hex SHA-256"))
        })
        .collect::<Result<_, _>>()?;
    verify_inclusion(
        proof.leaf_index,
        proof.tree_size,
        &leaf_hash(proof.line.as_bytes()),
        &path,
        &checkpoint.root,
    )
    .map_err(|e| {
        format!(
            "the line is not the leaf {} of the checkpoint's tree: {e}",
            proof.leaf_index
        )
    })?;
    let fields: serde_json::Value = serde_json::from_str(&proof.line)
        .map_err(|_| "the proven line is not a JSON object".to_owned())?;
    for (field, want) in [
        ("messageId", &proof.message_id),
        ("auditTime", &proof.audit_time),
    ] {
        if fields.get(field).and_then(|v| v.as_str()) != Some(want.as_str()) {
            return Err(format!(
                "the proven line's {field} is not the proof's {want:?}"
            ));
        }
    }
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

/// The log's objects in the archive bucket, read.
pub struct LogReader<'a, B> {
    pub archive: &'a S3Archive<B>,
}

impl<B: Bucket> LogReader<'_, B> {
    pub(crate) async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, TrailError> {
        Ok(self
            .archive
            .get(key)
            .await
            .map_err(|e| self.archive.error(&e))?
            .map(|o| o.body.to_vec()))
    }

    async fn keys(&self, prefix: &str, after: Option<String>) -> Result<Vec<String>, TrailError> {
        let mut all = Vec::new();
        let mut after = after;
        loop {
            let page = self
                .archive
                .list_keys(prefix, after.as_deref(), LIST_PAGE)
                .await
                .map_err(|e| self.archive.error(&e))?;
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
    pub async fn tiles(&self, size: u64, tiles: BTreeSet<TileRef>) -> Result<Tiles, TrailError> {
        let read: Vec<(TileRef, Option<Vec<u8>>)> = futures::stream::iter(tiles)
            .map(|tile| async move { Ok::<_, TrailError>((tile, self.get(&tile.key()).await?)) })
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
    pub async fn checkpoint(&self, size: u64) -> Result<Option<SignedNote>, TrailError> {
        match self.stored_checkpoint(size).await? {
            None => Ok(None),
            Some(Ok(note)) => Ok(Some(note)),
            Some(Err(why)) => Err(TrailError::Aws(format!("{}: {why}", checkpoint_key(size)))),
        }
    }

    /// The checkpoint of the tree of `size` as stored, or why its bytes are not a signed note
    /// (for `verify`, which reports that as a problem rather than stopping).
    pub async fn stored_checkpoint(
        &self,
        size: u64,
    ) -> Result<Option<Result<SignedNote, String>>, TrailError> {
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
    pub async fn checkpoint_sizes(&self, after: Option<u64>) -> Result<Vec<u64>, TrailError> {
        let keys = self
            .keys(CHECKPOINTS_PREFIX, after.map(checkpoint_key))
            .await?;
        Ok(keys
            .iter()
            .filter_map(|k| parse_checkpoint_key(k))
            .collect())
    }

    /// The newest checkpoint's size (after `after`, when given).
    pub async fn newest_size(&self, after: Option<u64>) -> Result<Option<u64>, TrailError> {
        Ok(self.checkpoint_sizes(after).await?.last().copied())
    }

    /// Every cosignature line stored for the checkpoint of `size` (by any witness; a line that
    /// does not parse is passed over: a verifier checks only the witnesses it knows).
    pub async fn cosignatures(&self, size: u64) -> Result<Vec<NoteSignature>, TrailError> {
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
    pub async fn cosigned_checkpoint(&self, size: u64) -> Result<Option<SignedNote>, TrailError> {
        let Some(mut note) = self.checkpoint(size).await? else {
            return Ok(None);
        };
        for line in self.cosignatures(size).await? {
            note.add(line);
        }
        Ok(Some(note))
    }

    /// The sizes that have at least one cosignature, after `after`, smallest first.
    pub async fn cosigned_sizes(&self, after: Option<u64>) -> Result<Vec<u64>, TrailError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use audit_model::note::{COSIGNATURE_TYPE, NoteSignature, cosigner_key_id};
    use audit_model::tlog::{TreeEdge, inclusion_proof, inclusion_tiles};
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{
        ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair,
    };

    /// A log key pair, its public key as DER SPKI.
    fn log_pair() -> (EcdsaKeyPair, Vec<u8>) {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &SystemRandom::new())
                .unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref()).unwrap();
        let der = aws_lc_rs::encoding::AsDer::<aws_lc_rs::encoding::PublicKeyX509Der>::as_der(
            pair.public_key(),
        )
        .unwrap()
        .as_ref()
        .to_vec();
        (pair, der)
    }

    fn witness_pair(name: &str) -> (Ed25519KeyPair, WitnessKey) {
        let pair = Ed25519KeyPair::generate().unwrap();
        let public: [u8; 32] = pair.public_key().as_ref().try_into().unwrap();
        (
            pair,
            WitnessKey {
                name: name.to_owned(),
                public,
            },
        )
    }

    /// A proof of line `index` of `lines`, signed by the log and cosigned by `witness`.
    fn proof(
        lines: &[String],
        index: usize,
        log: &EcdsaKeyPair,
        der: &[u8],
        witness: Option<(&Ed25519KeyPair, &WitnessKey)>,
    ) -> Proof {
        let mut edge = TreeEdge::default();
        let mut tiles = Tiles::default();
        for line in lines {
            let mut full = Vec::new();
            edge.push(leaf_hash(line.as_bytes()), &mut full);
            tiles.tiles.extend(full);
        }
        tiles.tiles.extend(edge.partial_tiles());
        tiles.size = edge.size;
        assert!(
            inclusion_tiles(index as u64, edge.size)
                .unwrap()
                .iter()
                .all(|t| tiles.tiles.contains_key(t))
        );
        let path = inclusion_proof(index as u64, edge.size, &mut tiles).unwrap();
        let checkpoint = Checkpoint {
            origin: "audit-receiver/b".to_owned(),
            size: edge.size,
            root: edge.root(),
        };
        let body = checkpoint.body();
        let signature = log
            .sign(&SystemRandom::new(), body.as_bytes())
            .unwrap()
            .as_ref()
            .to_vec();
        let mut note = SignedNote {
            body: body.clone(),
            signatures: vec![NoteSignature {
                name: checkpoint.origin.clone(),
                key_id: ecdsa_key_id(der),
                signature,
            }],
        };
        if let Some((pair, key)) = witness {
            let timestamp = 1_790_000_000u64;
            let mut bytes = timestamp.to_be_bytes().to_vec();
            bytes.extend_from_slice(
                pair.sign(audit_model::note::cosigned_message(timestamp, &body).as_bytes())
                    .as_ref(),
            );
            note.add(NoteSignature {
                name: key.name.clone(),
                key_id: cosigner_key_id(&key.name, &key.public),
                signature: bytes,
            });
        }
        let fields: serde_json::Value = serde_json::from_str(&lines[index]).unwrap();
        Proof {
            format: PROOF_FORMAT.to_owned(),
            message_id: fields["messageId"].as_str().unwrap().to_owned(),
            audit_time: fields["auditTime"].as_str().unwrap().to_owned(),
            line: lines[index].clone(),
            object: "trail/x.jsonl.gz".to_owned(),
            line_number: index as u64,
            leaf_index: index as u64,
            tree_size: edge.size,
            inclusion_path: path
                .iter()
                .map(|h| audit_model::tlog::HexHash(h).to_string())
                .collect(),
            checkpoint: note.text(),
        }
    }

    fn lines(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                format!(
                    r#"{{"auditTime":"2026-11-24T00:00:{:02}.000Z","messageId":"m-{i}"}}"#,
                    i % 60
                )
            })
            .collect()
    }

    #[test]
    fn a_proof_holds_and_any_change_to_it_is_refused_with_its_reason() {
        let (log, der) = log_pair();
        let (pair, witness) = witness_pair("witness.example/w1");
        let lines = lines(300);
        let good = proof(&lines, 257, &log, &der, Some((&pair, &witness)));
        let key = LogKey::from_der(&der).unwrap();
        let verdict = check_proof(&good, &key, std::slice::from_ref(&witness)).unwrap();
        assert_eq!((verdict.leaf_index, verdict.tree_size), (257, 300));
        assert_eq!(
            verdict.cosigned,
            vec![("witness.example/w1".to_owned(), 1_790_000_000)]
        );

        let mut changed = good.clone();
        changed.line = changed.line.replace("m-257", "m-258");
        assert!(
            check_proof(&changed, &key, &[])
                .unwrap_err()
                .contains("not the leaf")
        );
        let mut moved = good.clone();
        moved.leaf_index = 256;
        assert!(check_proof(&moved, &key, &[]).is_err());
        let mut other_id = good.clone();
        other_id.message_id = "m-1".to_owned();
        assert!(
            check_proof(&other_id, &key, &[])
                .unwrap_err()
                .contains("messageId")
        );
        let mut forged = good.clone();
        forged.checkpoint = forged.checkpoint.replacen("\n300\n", "\n301\n", 1);
        assert!(
            check_proof(&forged, &key, &[])
                .unwrap_err()
                .contains("does not hold")
        );
        let (_, other_der) = log_pair();
        assert!(
            check_proof(&good, &LogKey::from_der(&other_der).unwrap(), &[])
                .unwrap_err()
                .contains("no signature by the log's key")
        );
        let (_, stranger) = witness_pair("witness.example/w2");
        assert!(
            check_proof(&good, &key, &[stranger])
                .unwrap_err()
                .contains("no cosignature")
        );
        let unsigned = proof(&lines, 3, &log, &der, None);
        assert!(
            check_proof(&unsigned, &key, std::slice::from_ref(&witness))
                .unwrap_err()
                .contains("no cosignature")
        );
        check_proof(&unsigned, &key, &[]).unwrap();
    }

    #[test]
    fn a_cosignature_over_another_body_does_not_hold() {
        let (log, der) = log_pair();
        let (pair, witness) = witness_pair("w");
        let a = proof(&lines(5), 1, &log, &der, Some((&pair, &witness)));
        let b = proof(&lines(6), 1, &log, &der, None);
        let a_note = SignedNote::parse(&a.checkpoint).unwrap();
        let mut b_note = SignedNote::parse(&b.checkpoint).unwrap();
        b_note.add(a_note.signatures[1].clone());
        assert!(
            check_cosignature(&b_note, &witness)
                .unwrap_err()
                .contains("does not hold")
        );
        assert_eq!(
            witness
                .vkey()
                .splitn(3, '+')
                .nth(2)
                .map(|k| STANDARD.decode(k).unwrap()[0]),
            Some(COSIGNATURE_TYPE)
        );
    }

    #[test]
    fn a_witness_key_is_read_from_its_text_or_a_file_and_a_bad_one_names_the_format() {
        let (_, witness) = witness_pair("witness.example/w1");
        assert_eq!(witness_key_arg(&witness.vkey()).unwrap(), witness);
        let file = std::env::temp_dir().join(format!("witness-{}.pub", std::process::id()));
        std::fs::write(&file, format!("{}\n", witness.vkey())).unwrap();
        assert_eq!(witness_key_arg(file.to_str().unwrap()).unwrap(), witness);
        std::fs::write(&file, "not a key\n").unwrap();
        let error = witness_key_arg(file.to_str().unwrap()).unwrap_err();
        assert!(error.contains("<name>+<key id>+<base64 key>"), "{error}");
        std::fs::remove_file(&file).unwrap();
        for bad in ["w+00000000+AAAA", "/no/such/file"] {
            let error = witness_key_arg(bad).unwrap_err();
            assert!(
                error.contains("<name>+<key id>+<base64 key>"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn a_pem_key_reads_and_a_bad_one_is_named() {
        let (_, der) = log_pair();
        let pem = format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            STANDARD.encode(&der)
        );
        assert_eq!(LogKey::from_pem(&pem).unwrap().key_id(), ecdsa_key_id(&der));
        assert!(LogKey::from_pem("hello").unwrap_err().contains("PEM"));
    }
}
