//! `auditctl witness` against a real local endpoint (moto's S3 with versioning and Object Lock, its
//! KMS): given a log written as the sealer writes it (tiles, then checkpoints signed with KMS Sign,
//! RAW, ECDSA_SHA_256 over the note's text), when the binary runs, then it cosigns what extends the
//! accepted tree and refuses a fork with exit 1, `REFUSED:` and nothing written.

use std::path::{Path, PathBuf};

use audit_model::note::{SignedNote, WitnessKey, checkpoint_key};
use audit_model::tlog::{Hash, TreeEdge, leaf_hash};
use audit_proof::tlog::check_cosignature;
use audit_testkit::endpoint::create_locked_bucket;
use base64::Engine as _;

use crate::harness::*;
use crate::support::*;

const BUCKET: &str = "audit-archive-witness";

struct Log {
    moto: Moto,
    s3: aws_sdk_s3::Client,
    kms: aws_sdk_kms::Client,
    key: String,
    edge: TreeEdge,
    dir: PathBuf,
}

impl Log {
    async fn new() -> Self {
        let moto = Moto::start();
        let s3 = s3(&moto);
        create_locked_bucket(&s3, BUCKET).await;
        let kms = kms(&moto);
        let key = create_key(&kms).await;
        let dir = std::env::temp_dir().join(format!(
            "auditctl-witness-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self {
            moto,
            s3,
            kms,
            key,
            edge: TreeEdge::default(),
            dir,
        }
    }

    async fn put(&self, key: &str, body: Vec<u8>) {
        put_checked(&self.s3, BUCKET, key, body).await;
    }

    async fn der(&self) -> Vec<u8> {
        public_key(&self.kms, &self.key).await
    }

    /// The checkpoint of (size, root), signed by the digest key in KMS.
    async fn note(&self, size: u64, root: Hash) -> String {
        let der = self.der().await;
        signed_checkpoint(&self.kms, &self.key, &der, BUCKET, size, root).await
    }

    async fn append(&mut self, n: usize) -> u64 {
        for _ in 0..n {
            let mut full = Vec::new();
            let line = format!(r#"{{"messageId":"m-{}"}}"#, self.edge.size);
            self.edge.push(leaf_hash(line.as_bytes()), &mut full);
            for (tile, bytes) in full {
                self.put(&tile.key(), bytes).await;
            }
        }
        for (tile, bytes) in self.edge.partial_tiles() {
            self.put(&tile.key(), bytes).await;
        }
        let note = self.note(self.edge.size, self.edge.root()).await;
        self.put(&checkpoint_key(self.edge.size), note.into_bytes())
            .await;
        self.edge.size
    }

    async fn cosignature_keys(&self) -> Vec<String> {
        self.s3
            .list_objects_v2()
            .bucket(BUCKET)
            .prefix("log/cosignatures/")
            .send()
            .await
            .unwrap()
            .contents()
            .iter()
            .filter_map(|o| o.key().map(str::to_owned))
            .collect()
    }

    async fn get(&self, key: &str) -> String {
        String::from_utf8(get_body(&self.s3, BUCKET, key).await).unwrap()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn witness(&self, args: &[&str]) -> std::process::Output {
        let mut all = vec!["witness"];
        all.extend(args);
        auditctl(
            &self.moto.endpoint,
            &all,
            &[("ARCHIVE_BUCKET", BUCKET), ("DIGEST_KEY_ID", &self.key)],
        )
    }

    fn run(&self) -> std::process::Output {
        self.witness(&[
            "--state",
            self.path("state.json").to_str().unwrap(),
            "--key",
            self.path("key").to_str().unwrap(),
        ])
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread")]
async fn witness_init_writes_a_private_key_once_and_prints_its_public_key() {
    let log = Log::new().await;
    let key = log.path("keys/key");
    let made = log.witness(&[
        "--init",
        "--key",
        key.to_str().unwrap(),
        "--name",
        "witness.test/w1",
    ]);
    let vkey = ok(made);
    let witness = WitnessKey::parse(vkey.trim()).unwrap();
    assert_eq!(witness.name, "witness.test/w1");
    assert_eq!(mode(&key), 0o600);
    let text = std::fs::read_to_string(&key).unwrap();
    assert!(text.starts_with("PRIVATE+KEY+witness.test/w1+"), "{text}");
    assert_eq!(
        std::fs::read_to_string(log.path("keys/key.pub")).unwrap(),
        vkey
    );

    let again = log.witness(&["--init", "--key", key.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("never overwritten"),
        "{}",
        stderr(&again)
    );
    assert_eq!(std::fs::read_to_string(&key).unwrap(), text);
}

#[tokio::test(flavor = "multi_thread")]
async fn witness_cosigns_what_extends_the_accepted_tree_and_refuses_a_fork() {
    let mut log = Log::new().await;
    let vkey = ok(log.witness(&[
        "--init",
        "--key",
        log.path("key").to_str().unwrap(),
        "--name",
        "witness.test/w1",
    ]));
    let witness = WitnessKey::parse(vkey.trim()).unwrap();
    let first = log.append(10).await;

    let out = ok(log.run());
    assert!(
        out.contains("First run: trusting the checkpoint of size 10"),
        "{out}"
    );
    let keys = log.cosignature_keys().await;
    assert_eq!(keys.len(), 1);
    let mut note = SignedNote::parse(&log.get(&checkpoint_key(first)).await).unwrap();
    let line = log.get(&keys[0]).await;
    note.add(
        SignedNote::parse(&format!("x\n\n{line}"))
            .unwrap()
            .signatures
            .remove(0),
    );
    check_cosignature(&note, &witness).unwrap();

    let out = ok(log.run());
    assert!(out.contains("No new checkpoint after size 10"), "{out}");

    log.append(300).await;
    let out = ok(log.run());
    assert!(out.contains("cosigned checkpoint 310"), "{out}");
    let state = std::fs::read_to_string(log.path("state.json")).unwrap();
    assert!(state.contains("\"size\": 310"), "{state}");

    // With the log's key as a PEM file instead of KMS.
    let pem = format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(log.der().await)
    );
    std::fs::write(log.path("log.pem"), pem).unwrap();
    log.append(5).await;
    ok(log.witness(&[
        "--state",
        log.path("state.json").to_str().unwrap(),
        "--key",
        log.path("key").to_str().unwrap(),
        "--public-key",
        log.path("log.pem").to_str().unwrap(),
    ]));

    // A fork: the log's key signs another root for the size the witness accepted.
    let forged = log.note(315, [7; 32]).await;
    log.put(&checkpoint_key(315), forged.into_bytes()).await;
    log.append(1).await;
    let before = (
        log.cosignature_keys().await,
        std::fs::read_to_string(log.path("state.json")).unwrap(),
    );
    let refused = log.run();
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).starts_with("REFUSED: fork: the checkpoint of size 315"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(
        (
            log.cosignature_keys().await,
            std::fs::read_to_string(log.path("state.json")).unwrap()
        ),
        before
    );
}
