//! `audit-check-proof DIR` on an evidence bundle (docs/archive.md "Evidence for auditors"), as an
//! auditor runs it: the binary with an empty environment, given a bundle of the leaves 4 to 9 of
//! a log of 12, proven in its checkpoint of 12 and complete against its checkpoints of 4 and 9.
//! It holds; with one event (and its proof) left out, the completeness claim fails by name.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use audit_model::evidence::{
    Completeness, EVIDENCE_FORMAT, Manifest, PeriodEntry, Query, checkpoint_file,
};
use audit_model::note::{Checkpoint, NoteSignature, PROOF_FORMAT, Proof, SignedNote, ecdsa_key_id};
use audit_model::tlog::range::range_proof;
use audit_model::tlog::{
    Hash, HexHash, Subtree, SubtreeHashes, TlogError, inclusion_proof, leaf_hash, node_hash,
    tree_root,
};
use aws_lc_rs::encoding::{AsDer, PublicKeyX509Der};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};

const ORIGIN: &str = "audit-receiver/audit-archive-test";

fn line(i: u64) -> String {
    format!(r#"{{"auditTime":"2026-11-24T10:00:{i:02}.000Z","messageId":"m-{i}"}}"#)
}

/// Subtree hashes computed from the leaves themselves.
struct Leaves(Vec<Hash>);

impl SubtreeHashes for Leaves {
    fn subtree(&mut self, subtree: Subtree) -> Result<Hash, TlogError> {
        let width = 1usize << subtree.height;
        let first = usize::try_from(subtree.index).unwrap() * width;
        let mut level = self.0[first..first + width].to_vec();
        while level.len() > 1 {
            level = level
                .chunks(2)
                .map(|pair| node_hash(&pair[0], &pair[1]))
                .collect();
        }
        Ok(level[0])
    }
}

/// The bundle, written to a new directory.
fn bundle(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("audit-check-bundle-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("checkpoints")).unwrap();
    let leaves: Vec<Hash> = (0..12).map(|i| leaf_hash(line(i).as_bytes())).collect();
    let mut source = Leaves(leaves);
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref()).unwrap();
    let der = AsDer::<PublicKeyX509Der>::as_der(pair.public_key()).unwrap();
    let der = der.as_ref().to_vec();
    let mut sign = |size: u64| {
        let body = Checkpoint {
            origin: ORIGIN.to_owned(),
            size,
            root: tree_root(size, &mut source).unwrap(),
        }
        .body();
        SignedNote {
            body: body.clone(),
            signatures: vec![NoteSignature {
                name: ORIGIN.to_owned(),
                key_id: ecdsa_key_id(&der),
                signature: pair.sign(&rng, body.as_bytes()).unwrap().as_ref().to_vec(),
            }],
        }
        .text()
    };
    let checkpoint = sign(12);
    std::fs::write(dir.join("checkpoint.txt"), &checkpoint).unwrap();
    for size in [4, 9] {
        std::fs::write(dir.join(checkpoint_file(size)), sign(size)).unwrap();
    }
    let (mut events, mut proofs) = (String::new(), String::new());
    for i in 4..9u64 {
        let path = inclusion_proof(i, 12, &mut source).unwrap();
        let proof = Proof {
            format: PROOF_FORMAT.to_owned(),
            message_id: format!("m-{i}"),
            audit_time: format!("2026-11-24T10:00:{i:02}.000Z"),
            line: line(i),
            object: "trail/dt=2026-11-24/hour=10/x.jsonl.gz".to_owned(),
            line_number: i,
            leaf_index: i,
            tree_size: 12,
            inclusion_path: path.iter().map(|h| HexHash(h).to_string()).collect(),
            checkpoint: checkpoint.clone(),
        };
        events.push_str(&format!("{}\n", line(i)));
        proofs.push_str(&format!("{}\n", serde_json::to_string(&proof).unwrap()));
    }
    std::fs::write(dir.join("events.jsonl"), events).unwrap();
    std::fs::write(dir.join("proofs.jsonl"), proofs).unwrap();
    let range = range_proof(4, 9, 9, &mut source).unwrap();
    let manifest = Manifest {
        format: EVIDENCE_FORMAT.to_owned(),
        made_at: "2026-11-24T11:00:00Z".to_owned(),
        made_by: "arn:aws:iam::123456789012:user/auditor".to_owned(),
        origin: ORIGIN.to_owned(),
        key_arn: "arn:aws:kms:eu-west-1:123456789012:key/k".to_owned(),
        query: Query {
            from: "2026-11-24T10:00:00.000Z".to_owned(),
            to: "2026-11-24T10:00:09.999Z".to_owned(),
            filters: serde_json::Map::new(),
            period_seconds: 10,
        },
        periods: vec![PeriodEntry {
            start: "2026-11-24T10:00:00Z".to_owned(),
            end: "2026-11-24T10:00:10Z".to_owned(),
            state: "sealed".to_owned(),
            events: 5,
            first_leaf: Some(4),
            end_leaf: Some(9),
        }],
        events: 5,
        unproven_events: 0,
        tree_size: 12,
        proven: vec![],
        not_proven: vec![],
        completeness: Some(Completeness {
            start: 4,
            end: 9,
            start_checkpoint: Some(checkpoint_file(4)),
            end_checkpoint: checkpoint_file(9),
            range_proof: range.iter().map(|h| HexHash(h).to_string()).collect(),
        }),
        unproven: vec![],
    };
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
    let pem = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &der);
    std::fs::write(
        dir.join("digest-key.pem"),
        format!("-----BEGIN PUBLIC KEY-----\n{pem}\n-----END PUBLIC KEY-----\n"),
    )
    .unwrap();
    dir
}

fn check(dir: &Path) -> (Option<i32>, String) {
    let output: Output = Command::new(env!("CARGO_BIN_EXE_audit-check-proof"))
        .arg(dir)
        .args(["--public-key", dir.join("digest-key.pem").to_str().unwrap()])
        .args(["--origin", ORIGIN])
        .env_clear()
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn a_complete_bundle_holds_with_no_aws_configuration() {
    let dir = bundle("ok");
    let (code, said) = check(&dir);
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(
        said,
        format!(
            "OK: 5 event(s) each proven in the tree of size 12 of {ORIGIN}; complete: every leaf from 4 to 9, the periods' events, is in the bundle; 0 event(s) listed as unproven; cosigned by: no witness asked for\n"
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_complete_bundle_with_one_event_left_out_fails_its_completeness() {
    let dir = bundle("removed");
    for file in ["events.jsonl", "proofs.jsonl"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let kept: String = text
            .lines()
            .enumerate()
            .filter(|(n, _)| *n != 2)
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        std::fs::write(dir.join(file), kept).unwrap();
    }
    let path = dir.join("manifest.json");
    let mut manifest: Manifest = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    manifest.events = 4;
    std::fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let (code, said) = check(&dir);
    assert_eq!(code, Some(1), "{said}");
    assert_eq!(
        said,
        "FAILED: completeness: the claim is the leaves 4 to 9 (5 events) but the bundle holds 4\n"
    );
    // Claimed as the leaves 4 to 8, the run is not one: leaf 7 follows leaf 5.
    manifest.completeness.as_mut().unwrap().end = 8;
    std::fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let (code, said) = check(&dir);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.starts_with("FAILED: completeness: event 3 is leaf 7, not leaf 6"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Proof line `n` (from 1) of the bundle in `dir`, changed by `change`.
fn change_proof(dir: &Path, n: usize, change: impl Fn(&mut serde_json::Value)) {
    let path = dir.join("proofs.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let changed: String = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i + 1 != n {
                return format!("{l}\n");
            }
            let mut proof: serde_json::Value = serde_json::from_str(l).unwrap();
            change(&mut proof);
            format!("{proof}\n")
        })
        .collect();
    std::fs::write(&path, changed).unwrap();
}

#[test]
fn a_proof_whose_path_does_not_reach_checkpoint_txts_root_is_named() {
    let dir = bundle("path");
    change_proof(&dir, 3, |proof| {
        proof["inclusionPath"][0] = serde_json::json!(HexHash(&[7; 32]).to_string());
    });
    let (code, said) = check(&dir);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.starts_with("FAILED: proofs.jsonl line 3 (messageId m-6): the line is not the leaf 6 of the checkpoint's tree"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_proof_in_another_checkpoint_of_the_log_is_named_and_checked_against_it() {
    // The log's own checkpoint of 9 leaves, signed by its key, in place of checkpoint.txt's.
    let dir = bundle("other");
    let other = std::fs::read_to_string(dir.join(checkpoint_file(9))).unwrap();
    change_proof(&dir, 2, |proof| {
        proof["checkpoint"] = serde_json::json!(other);
    });
    let (code, said) = check(&dir);
    assert_eq!(code, Some(1), "{said}");
    assert_eq!(
        said,
        "FAILED: proofs.jsonl line 2: its checkpoint is not checkpoint.txt\n\
         FAILED: proofs.jsonl line 2 (messageId m-5): the proof says treeSize 12 but its checkpoint is of size 9\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
