//! `auditctl check-proof` as a third party runs it: the binary with an empty environment (no AWS
//! configuration, no endpoint, nothing to reach), given a proof, the log's PEM key and witness
//! keys in files; its verdict, words and exit status. And docs/operations.md's Python script,
//! run as printed, on the same proofs. The proof is made here as the sealer and `prove` make it:
//! the leaves' tree, its tiles, the checkpoint signed with a P-256 key (ECDSA over SHA-256 of the
//! note's text, as KMS signs it) and cosigned by an Ed25519 witness.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use audit_model::note::{
    Checkpoint, NoteSignature, PROOF_FORMAT, Proof, SignedNote, WitnessKey, cosigned_message,
    ecdsa_key_id,
};
use audit_model::tlog::{HexHash, Tiles, TreeEdge, inclusion_proof, leaf_hash};
use aws_lc_rs::encoding::{AsDer, PublicKeyX509Der};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// A log's key, a witness and a proof of line `index` of `n` lines, in files of a fresh
/// directory.
struct Case {
    dir: PathBuf,
    proof: Proof,
    witness: WitnessKey,
}

fn log_pair() -> (EcdsaKeyPair, Vec<u8>) {
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &SystemRandom::new())
        .unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref()).unwrap();
    let der = AsDer::<PublicKeyX509Der>::as_der(pair.public_key())
        .unwrap()
        .as_ref()
        .to_vec();
    (pair, der)
}

fn pem(der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        lines.join("\n")
    )
}

impl Case {
    fn new(name: &str, n: usize, index: usize) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "auditctl-check-proof-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let lines: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    r#"{{"auditTime":"2026-11-24T10:{:02}:{:02}.000Z","messageId":"m-{i}","auditText":"café {i}"}}"#,
                    i / 60 % 60,
                    i % 60
                )
            })
            .collect();
        let mut edge = TreeEdge::default();
        let mut tiles = Tiles::default();
        for line in &lines {
            let mut full = Vec::new();
            edge.push(leaf_hash(line.as_bytes()), &mut full);
            tiles.tiles.extend(full);
        }
        tiles.tiles.extend(edge.partial_tiles());
        tiles.size = edge.size;
        let path = inclusion_proof(index as u64, edge.size, &mut tiles).unwrap();
        let (log, der) = log_pair();
        let origin = "audit-receiver/audit-archive-test".to_owned();
        let body = Checkpoint {
            origin: origin.clone(),
            size: edge.size,
            root: edge.root(),
        }
        .body();
        let mut note = SignedNote {
            body: body.clone(),
            signatures: vec![NoteSignature {
                name: origin,
                key_id: ecdsa_key_id(&der),
                signature: log
                    .sign(&SystemRandom::new(), body.as_bytes())
                    .unwrap()
                    .as_ref()
                    .to_vec(),
            }],
        };
        let pair = Ed25519KeyPair::generate().unwrap();
        let witness = WitnessKey {
            name: "witness.example/w1".to_owned(),
            public: pair.public_key().as_ref().try_into().unwrap(),
        };
        let stamp = 1_795_000_000u64;
        let mut signature = stamp.to_be_bytes().to_vec();
        signature.extend_from_slice(
            pair.sign(cosigned_message(stamp, &body).as_bytes())
                .as_ref(),
        );
        note.add(NoteSignature {
            name: witness.name.clone(),
            key_id: witness.key_id(),
            signature,
        });
        let proof = Proof {
            format: PROOF_FORMAT.to_owned(),
            message_id: format!("m-{index}"),
            audit_time: format!(
                "2026-11-24T10:{:02}:{:02}.000Z",
                index / 60 % 60,
                index % 60
            ),
            line: lines[index].clone(),
            object: "trail/dt=2026-11-24/hour=10/x.jsonl.gz".to_owned(),
            line_number: index as u64,
            leaf_index: index as u64,
            tree_size: edge.size,
            inclusion_path: path.iter().map(|h| HexHash(h).to_string()).collect(),
            checkpoint: note.text(),
        };
        std::fs::write(dir.join("key.pem"), pem(&der)).unwrap();
        std::fs::write(dir.join("witness.vkey"), format!("{}\n", witness.vkey())).unwrap();
        let case = Self {
            dir,
            proof,
            witness,
        };
        case.write("proof.json", &case.proof);
        case
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    /// Writes `proof` to `name`, pretty, as `prove` prints it; its path.
    fn write(&self, name: &str, proof: &Proof) -> String {
        let mut text = serde_json::to_string_pretty(proof).unwrap();
        text.push('\n');
        std::fs::write(self.dir.join(name), text).unwrap();
        self.path(name)
    }

    /// The proof with one byte of its line changed.
    fn changed_line(&self) -> String {
        let mut proof = self.proof.clone();
        proof.line = proof.line.replacen("café", "cafe", 1);
        assert_ne!(proof.line, self.proof.line);
        self.write("changed.json", &proof)
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The origin of the log the cases' proofs are of.
const ORIGIN: &str = "audit-receiver/audit-archive-test";

/// `auditctl check-proof ARGS --origin ORIGIN` with an empty environment: no AWS variable, no
/// HOME, no PATH.
fn check_proof(args: &[&str], stdin: Option<&str>) -> Output {
    check_proof_as_given(&[args, &["--origin", ORIGIN]].concat(), stdin)
}

/// `auditctl check-proof ARGS`, nothing added.
fn check_proof_as_given(args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_auditctl"));
    command.env_clear().arg("check-proof").args(args);
    match stdin {
        Some(text) => {
            use std::io::Write;
            command
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = command.spawn().unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            child.wait_with_output().unwrap()
        }
        None => command.output().unwrap(),
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn exit(output: &Output) -> i32 {
    output.status.code().unwrap_or(-1)
}

#[test]
fn a_proof_holds_offline_with_its_witness_and_any_changed_byte_fails_with_its_reason() {
    let case = Case::new("holds", 300, 257);
    let (proof, pem) = (case.path("proof.json"), case.path("key.pem"));
    let vkey = case.witness.vkey();

    let ok = check_proof(
        &[&proof, "--public-key", &pem, "--witness-key", &vkey],
        None,
    );
    assert_eq!(exit(&ok), 0, "{}", text(&ok));
    let out = String::from_utf8_lossy(&ok.stdout).into_owned();
    assert!(out.starts_with("OK: messageId m-257 is leaf 257 of the tree of size 300 of audit-receiver/audit-archive-test"), "{out}");
    assert!(out.contains("witness.example/w1 (at 2026-"), "{out}");

    // From stdin, the witness key from a file.
    let stdin = std::fs::read_to_string(&proof).unwrap();
    let from_stdin = check_proof(
        &[
            "-",
            "--public-key",
            &pem,
            "--witness-key",
            &case.path("witness.vkey"),
        ],
        Some(&stdin),
    );
    assert_eq!(exit(&from_stdin), 0, "{}", text(&from_stdin));

    // One byte of the line.
    let changed = check_proof(&[&case.changed_line(), "--public-key", &pem], None);
    assert_eq!(exit(&changed), 1, "{}", text(&changed));
    assert!(
        String::from_utf8_lossy(&changed.stdout)
            .starts_with("FAILED: the line is not the leaf 257"),
        "{}",
        text(&changed)
    );

    // Another log's key.
    let other = Case::new("other", 3, 0);
    let wrong_key = check_proof(&[&proof, "--public-key", &other.path("key.pem")], None);
    assert_eq!(exit(&wrong_key), 1, "{}", text(&wrong_key));
    assert!(text(&wrong_key).contains("FAILED: the checkpoint has no signature by the log's key"));
    assert!(
        text(&wrong_key).ends_with(": it was not signed by this key; is --public-key the key of the stack that made the proof? `auditctl key --pem > digest-key.pem`, run with that stack's DIGEST_KEY_ID, writes its key\n"),
        "{}",
        text(&wrong_key)
    );

    // A witness that did not cosign.
    let stranger = check_proof(
        &[
            &proof,
            "--public-key",
            &pem,
            "--witness-key",
            &other.witness.vkey(),
        ],
        None,
    );
    assert_eq!(exit(&stranger), 1, "{}", text(&stranger));
    assert!(text(&stranger).contains("FAILED: no cosignature by the witness witness.example/w1"));

    // Not a proof at all.
    std::fs::write(case.dir.join("nonsense.json"), "{\"hello\": 1}").unwrap();
    let nonsense = check_proof(&[&case.path("nonsense.json"), "--public-key", &pem], None);
    assert_eq!(exit(&nonsense), 1, "{}", text(&nonsense));
    assert!(
        text(&nonsense).starts_with("FAILED: not a proof"),
        "{}",
        text(&nonsense)
    );
}

#[test]
fn bad_usage_exits_2_with_what_is_wrong() {
    let case = Case::new("usage", 5, 2);
    let (proof, pem) = (case.path("proof.json"), case.path("key.pem"));

    let missing = check_proof(&[&case.path("absent.json"), "--public-key", &pem], None);
    assert_eq!(exit(&missing), 2, "{}", text(&missing));
    assert!(
        text(&missing).contains("cannot read the proof"),
        "{}",
        text(&missing)
    );

    let no_pem = check_proof(&[&proof, "--public-key", &case.path("absent.pem")], None);
    assert_eq!(exit(&no_pem), 2, "{}", text(&no_pem));
    assert!(
        text(&no_pem).contains("`auditctl key --pem > digest-key.pem` writes the stack's"),
        "{}",
        text(&no_pem)
    );
    let no_key = check_proof(&[&proof], None);
    assert_eq!(exit(&no_key), 2, "{}", text(&no_key));
    assert_eq!(
        text(&no_key),
        "error: --public-key <PEM> not provided: the log's public key, the digest key's; `auditctl key --pem > digest-key.pem` writes the stack's (it reads DIGEST_KEY_ID or --key-id from KMS; `auditctl key` prints the --origin too; docs/auditctl.md \"key\")\n"
    );
    assert!(text(&no_pem).contains("cannot read the public key"));

    std::fs::write(case.dir.join("not.pem"), "hello\n").unwrap();
    let not_pem = check_proof(&[&proof, "--public-key", &case.path("not.pem")], None);
    assert_eq!(exit(&not_pem), 2, "{}", text(&not_pem));
    assert!(
        text(&not_pem).contains("not a PEM public key"),
        "{}",
        text(&not_pem)
    );

    let bad_witness = check_proof(
        &[
            &proof,
            "--public-key",
            &pem,
            "--witness-key",
            "nobody+00+AAAA",
        ],
        None,
    );
    assert_eq!(exit(&bad_witness), 2, "{}", text(&bad_witness));
    assert!(
        text(&bad_witness).contains("--witness-key"),
        "{}",
        text(&bad_witness)
    );

    let no_key = check_proof(&[&proof], None);
    assert_eq!(exit(&no_key), 2, "{}", text(&no_key));

    let no_origin = check_proof_as_given(&[&proof, "--public-key", &pem], None);
    assert_eq!(exit(&no_origin), 2, "{}", text(&no_origin));
    assert!(
        text(&no_origin).contains("--origin"),
        "{}",
        text(&no_origin)
    );
}

#[test]
fn a_proof_of_another_log_signed_by_the_same_key_fails() {
    let case = Case::new("origin", 5, 2);
    let (proof, pem) = (case.path("proof.json"), case.path("key.pem"));
    let ours = check_proof_as_given(&[&proof, "--public-key", &pem, "--origin", ORIGIN], None);
    assert_eq!(exit(&ours), 0, "{}", text(&ours));
    let other = check_proof_as_given(
        &[
            &proof,
            "--public-key",
            &pem,
            "--origin",
            "audit-receiver/another-bucket",
        ],
        None,
    );
    assert_eq!(exit(&other), 1, "{}", text(&other));
    assert!(
        String::from_utf8_lossy(&other.stdout).starts_with(
            "FAILED: the checkpoint is of the log \"audit-receiver/audit-archive-test\", not of \"audit-receiver/another-bucket\" (--origin)"
        ),
        "{}",
        text(&other)
    );
    let script = run_documented_script_of(
        &case.dir,
        &proof,
        &pem,
        "audit-receiver/another-bucket",
        &[],
    );
    assert_eq!(exit(&script), 1, "{}", text(&script));
    assert!(
        text(&script)
            .contains("FAILED: the checkpoint is of the log audit-receiver/audit-archive-test"),
        "{}",
        text(&script)
    );
}

/// The Python beside moto's server (the project's venv, which has `cryptography`), as the moto
/// tests find it.
pub(crate) fn python() -> PathBuf {
    let moto = std::env::var_os("MOTO_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/moto_server")
        });
    let python = moto.with_file_name("python");
    assert!(
        python.exists(),
        "no Python beside moto_server at {}: run the tests with `make test` (it installs .venv, with cryptography)",
        moto.display()
    );
    python
}

/// docs/operations.md's Python check, exactly as printed there.
pub(crate) fn documented_script() -> String {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md"),
    )
    .unwrap();
    let marker = "<!-- proving-the-trail:python -->\n```python\n";
    let start = doc
        .find(marker)
        .expect("docs/operations.md lost its Python check (marker proving-the-trail:python)")
        + marker.len();
    let end = doc[start..].find("\n```").unwrap() + start;
    format!("{}\n", &doc[start..end])
}

/// Runs the documented script on `proof` with `pem`, the cases' origin and the witness keys.
pub(crate) fn run_documented_script(dir: &Path, proof: &str, pem: &str, vkeys: &[&str]) -> Output {
    run_documented_script_of(dir, proof, pem, ORIGIN, vkeys)
}

/// Runs the documented script on `proof` with `pem`, `origin` and the witness keys.
fn run_documented_script_of(
    dir: &Path,
    proof: &str,
    pem: &str,
    origin: &str,
    vkeys: &[&str],
) -> Output {
    let script = dir.join("check_proof.py");
    std::fs::write(&script, documented_script()).unwrap();
    Command::new(python())
        .env_clear()
        .arg(&script)
        .arg(proof)
        .arg(pem)
        .arg(origin)
        .args(vkeys)
        .output()
        .unwrap()
}

#[test]
fn the_documented_python_check_holds_on_a_proof_and_refuses_one_byte_changed() {
    let case = Case::new("python", 1000, 700);
    let (proof, pem) = (case.path("proof.json"), case.path("key.pem"));
    let vkey = case.witness.vkey();
    let good = run_documented_script(&case.dir, &proof, &pem, &[&vkey]);
    assert_eq!(exit(&good), 0, "{}", text(&good));
    let out = String::from_utf8_lossy(&good.stdout).into_owned();
    assert!(
        out.contains("cosigned by witness.example/w1 at 1795000000"),
        "{out}"
    );
    assert!(
        out.contains("OK: m-700 is leaf 700 of the tree of 1000"),
        "{out}"
    );

    let changed = run_documented_script(&case.dir, &case.changed_line(), &pem, &[]);
    assert_eq!(exit(&changed), 1, "{}", text(&changed));
    assert!(
        text(&changed).contains("FAILED: the line is not the proof's leaf"),
        "{}",
        text(&changed)
    );

    let other = Case::new("python-other", 2, 1);
    let stranger = run_documented_script(&case.dir, &proof, &pem, &[&other.witness.vkey()]);
    assert_eq!(exit(&stranger), 1, "{}", text(&stranger));
    assert!(
        text(&stranger).contains("FAILED: no cosignature"),
        "{}",
        text(&stranger)
    );
    let wrong_key = run_documented_script(&case.dir, &proof, &other.path("key.pem"), &[]);
    assert_eq!(exit(&wrong_key), 1, "{}", text(&wrong_key));
    assert!(text(&wrong_key).contains("FAILED: no signature by the log's key"));

    // Leaves at the edges of small trees: the script walks the path as RFC 9162 does.
    for (n, index) in [(1, 0), (2, 1), (7, 6), (8, 5), (257, 256)] {
        let small = Case::new(&format!("python-{n}-{index}"), n, index);
        let checked = run_documented_script(
            &small.dir,
            &small.path("proof.json"),
            &small.path("key.pem"),
            &[],
        );
        assert_eq!(exit(&checked), 0, "{n} {index}: {}", text(&checked));
    }
}
