//! The offline check as the sealer, `prove` and a witness make what it checks: a tree of lines,
//! its checkpoint signed with a P-256 key (as KMS signs it), cosigned by an Ed25519 witness.

use super::*;
use audit_model::note::{COSIGNATURE_TYPE, NoteSignature, cosigner_key_id};
use audit_model::note::{Checkpoint, PROOF_FORMAT, Proof, SignedNote, WitnessKey, ecdsa_key_id};
use audit_model::tlog::{Tiles, TlogError, leaf_hash};
use audit_model::tlog::{TreeEdge, inclusion_proof, inclusion_tiles};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// A log key pair, its public key as DER SPKI.
fn log_pair() -> (EcdsaKeyPair, Vec<u8>) {
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &SystemRandom::new())
        .unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref()).unwrap();
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
            .to_string()
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
            .to_string()
            .contains("messageId")
    );
    let mut forged = good.clone();
    forged.checkpoint = forged.checkpoint.replacen("\n300\n", "\n301\n", 1);
    assert!(
        check_proof(&forged, &key, &[])
            .unwrap_err()
            .to_string()
            .contains("does not hold")
    );
    let (_, other_der) = log_pair();
    assert!(
        check_proof(&good, &LogKey::from_der(&other_der).unwrap(), &[])
            .unwrap_err()
            .to_string()
            .contains("no signature by the log's key")
    );
    let (_, stranger) = witness_pair("witness.example/w2");
    assert!(
        check_proof(&good, &key, &[stranger])
            .unwrap_err()
            .to_string()
            .contains("no cosignature")
    );
    let unsigned = proof(&lines, 3, &log, &der, None);
    assert!(
        check_proof(&unsigned, &key, std::slice::from_ref(&witness))
            .unwrap_err()
            .to_string()
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
            .to_string()
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
    assert!(
        error.to_string().contains("<name>+<key id>+<base64 key>"),
        "{error}"
    );
    std::fs::remove_file(&file).unwrap();
    for bad in ["w+00000000+AAAA", "/no/such/file"] {
        let error = witness_key_arg(bad).unwrap_err();
        assert!(
            error.to_string().contains("<name>+<key id>+<base64 key>"),
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
    assert!(
        LogKey::from_pem("hello")
            .unwrap_err()
            .to_string()
            .contains("PEM")
    );
}

#[test]
fn each_reason_a_proof_fails_is_its_own_error() {
    let (log, der) = log_pair();
    let key = LogKey::from_der(&der).unwrap();
    let good = proof(&lines(7), 3, &log, &der, None);
    let mut changed = good.clone();
    changed.line = changed.line.replace("m-3", "m-4");
    assert_eq!(
        check_proof(&changed, &key, &[]),
        Err(CheckError::NotLeaf {
            index: 3,
            source: TlogError::RootMismatch
        })
    );
    let mut larger = good.clone();
    larger.tree_size = 8;
    assert_eq!(
        check_proof(&larger, &key, &[]),
        Err(CheckError::SizeMismatch {
            claimed: 8,
            size: 7
        })
    );
    let mut other = good.clone();
    other.format = "other/1".to_owned();
    assert!(matches!(
        check_proof(&other, &key, &[]),
        Err(CheckError::Format { .. })
    ));
    assert_eq!(LogKey::from_pem("hello").unwrap_err(), KeyError::NotPem);
    assert!(matches!(
        LogKey::from_der(b"not der"),
        Err(KeyError::NotEcdsaP256(_))
    ));
}
