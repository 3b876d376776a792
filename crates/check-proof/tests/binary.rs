//! `audit-check-proof` as an auditor runs it: the binary with an empty environment (no AWS
//! configuration, nothing to reach), given a proof and the log's PEM key in files; its words and
//! exit status, the same as `auditctl check-proof`'s (crates/auditctl/tests/auditctl/check_proof.rs
//! checks those in full).

use std::path::PathBuf;
use std::process::{Command, Output};

use audit_model::note::{Checkpoint, NoteSignature, PROOF_FORMAT, Proof, SignedNote, ecdsa_key_id};
use audit_model::tlog::{HexHash, Tiles, TreeEdge, inclusion_proof, leaf_hash};
use aws_lc_rs::encoding::{AsDer, PublicKeyX509Der};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};

fn line(i: usize) -> String {
    format!(r#"{{"auditTime":"2026-11-24T10:00:{i:02}.000Z","messageId":"m-{i}"}}"#)
}

/// A directory with `key.pem` and `proof.json`: the proof of line 3 of 7, signed by the log.
fn case(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("audit-check-proof-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut edge = TreeEdge::default();
    let mut tiles = Tiles::default();
    for i in 0..7 {
        let mut full = Vec::new();
        edge.push(leaf_hash(line(i).as_bytes()), &mut full);
        tiles.tiles.extend(full);
    }
    tiles.tiles.extend(edge.partial_tiles());
    tiles.size = edge.size;
    let path = inclusion_proof(3, edge.size, &mut tiles).unwrap();
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref()).unwrap();
    let der = AsDer::<PublicKeyX509Der>::as_der(pair.public_key()).unwrap();
    let der = der.as_ref();
    let origin = "audit-receiver/audit-archive-test".to_owned();
    let body = Checkpoint {
        origin: origin.clone(),
        size: edge.size,
        root: edge.root(),
    }
    .body();
    let note = SignedNote {
        body: body.clone(),
        signatures: vec![NoteSignature {
            name: origin,
            key_id: ecdsa_key_id(der),
            signature: pair.sign(&rng, body.as_bytes()).unwrap().as_ref().to_vec(),
        }],
    };
    let proof = Proof {
        format: PROOF_FORMAT.to_owned(),
        message_id: "m-3".to_owned(),
        audit_time: "2026-11-24T10:00:03.000Z".to_owned(),
        line: line(3),
        object: "trail/dt=2026-11-24/hour=10/x.jsonl.gz".to_owned(),
        line_number: 3,
        leaf_index: 3,
        tree_size: edge.size,
        inclusion_path: path.iter().map(|h| HexHash(h).to_string()).collect(),
        checkpoint: note.text(),
    };
    std::fs::write(
        dir.join("proof.json"),
        serde_json::to_string(&proof).unwrap(),
    )
    .unwrap();
    let pem = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, der);
    std::fs::write(
        dir.join("key.pem"),
        format!("-----BEGIN PUBLIC KEY-----\n{pem}\n-----END PUBLIC KEY-----\n"),
    )
    .unwrap();
    dir
}

/// The binary run with nothing in its environment, for the cases' log.
fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_audit-check-proof"))
        .args(args)
        .args(["--origin", "audit-receiver/audit-archive-test"])
        .env_clear()
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn a_proof_that_holds_is_ok_with_no_aws_configuration() {
    let dir = case("ok");
    let output = check(&[
        dir.join("proof.json").to_str().unwrap(),
        "--public-key",
        dir.join("key.pem").to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        stdout(&output),
        "OK: messageId m-3 is leaf 3 of the tree of size 7 of audit-receiver/audit-archive-test; cosigned by: no witness asked for\n"
    );
}

#[test]
fn a_changed_line_fails_with_its_reason_and_exit_1() {
    let dir = case("changed");
    let proof = dir.join("proof.json");
    let text = std::fs::read_to_string(&proof).unwrap();
    std::fs::write(&proof, text.replacen("m-3", "m-4", 1)).unwrap();
    let output = check(&[
        proof.to_str().unwrap(),
        "--public-key",
        dir.join("key.pem").to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        stdout(&output).starts_with("FAILED: "),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_file_that_cannot_be_read_is_bad_usage_naming_it() {
    let dir = case("usage");
    let output = check(&[
        dir.join("absent.json").to_str().unwrap(),
        "--public-key",
        dir.join("key.pem").to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error: cannot read the proof ") && stderr.contains("absent.json"),
        "{stderr}"
    );
}
