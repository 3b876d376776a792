//! The witness against the archive bucket's in-memory twin: a log built by the model (tree edge,
//! tiles, checkpoints signed with a local ECDSA P-256 key), then what a run cosigns or refuses.

use super::*;
use audit_aws::s3::MemoryBucket;
use audit_model::note::{SignedNote, checkpoint_key, ecdsa_key_id, origin};
use audit_model::tlog::{TreeEdge, leaf_hash};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair};
use bytes::Bytes;
use chrono::TimeZone as _;

use crate::archive::S3Archive;
use crate::tlog::check_cosignature;

/// A log in the twin bucket, written as the sealer writes it: tiles, then the checkpoint.
struct TestLog {
    archive: S3Archive<MemoryBucket>,
    edge: TreeEdge,
    pair: EcdsaKeyPair,
    der: Vec<u8>,
    origin: String,
}

fn ecdsa_pair() -> (EcdsaKeyPair, Vec<u8>) {
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

impl TestLog {
    fn new(bucket: &str) -> Self {
        let (pair, der) = ecdsa_pair();
        Self {
            archive: S3Archive::over(MemoryBucket::new(), bucket, "memory"),
            edge: TreeEdge::default(),
            pair,
            der,
            origin: origin(bucket),
        }
    }

    fn put(&self, key: &str, body: Vec<u8>) {
        self.archive.overwrite(key, Bytes::from(body));
    }

    /// The signed note of (size, root) by `pair`, under this log's origin.
    fn note(&self, size: u64, root: Hash, pair: &EcdsaKeyPair, der: &[u8]) -> String {
        let body = Checkpoint {
            origin: self.origin.clone(),
            size,
            root,
        }
        .body();
        let signature = pair
            .sign(&SystemRandom::new(), body.as_bytes())
            .unwrap()
            .as_ref()
            .to_vec();
        SignedNote {
            body,
            signatures: vec![NoteSignature {
                name: self.origin.clone(),
                key_id: ecdsa_key_id(der),
                signature,
            }],
        }
        .text()
    }

    /// Appends `n` leaves: their full tiles, the partial tiles of the new size, its checkpoint.
    fn append(&mut self, n: usize) -> u64 {
        for _ in 0..n {
            let mut full = Vec::new();
            let line = format!(r#"{{"messageId":"m-{}"}}"#, self.edge.size);
            self.edge.push(leaf_hash(line.as_bytes()), &mut full);
            for (tile, bytes) in full {
                self.put(&tile.key(), bytes);
            }
        }
        for (tile, bytes) in self.edge.partial_tiles() {
            self.put(&tile.key(), bytes);
        }
        let note = self.note(self.edge.size, self.edge.root(), &self.pair, &self.der);
        self.put(&checkpoint_key(self.edge.size), note.into_bytes());
        self.edge.size
    }

    fn log_key(&self) -> LogKey {
        LogKey::from_der(&self.der).unwrap()
    }

    fn reader(&self) -> LogReader<'_, S3Archive<MemoryBucket>> {
        LogReader {
            archive: &self.archive,
        }
    }

    fn cosignature_keys(&self) -> Vec<String> {
        self.archive.keys("log/cosignatures/")
    }

    async fn witness(
        &self,
        signer: &WitnessSigner,
        state: Option<&WitnessState>,
    ) -> Result<Run, WitnessError> {
        run(
            &self.reader(),
            &self.log_key(),
            &origin(self.archive.name()),
            signer,
            state,
            now(),
        )
        .await
    }
}

fn now() -> chrono::DateTime<chrono::Utc> {
    chrono::Utc.timestamp_opt(1_795_000_000, 0).unwrap()
}

fn refusal(result: Result<Run, WitnessError>) -> Refusal {
    match result {
        Err(WitnessError::Refused(refusal)) => refusal,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn a_key_file_reads_back_and_signs_what_its_vkey_checks() {
    let signer = WitnessSigner::generate("witness.example/w1").unwrap();
    let text = signer.key_file();
    assert!(text.starts_with("PRIVATE+KEY+witness.example/w1+"));
    let read = WitnessSigner::parse(&text).unwrap();
    assert_eq!(read.key, signer.key);
    let vkey = WitnessKey::parse(&signer.key.vkey()).unwrap();
    let body = "origin\n1\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";
    let note = SignedNote {
        body: body.to_owned(),
        signatures: vec![read.cosign(body, 42)],
    };
    assert_eq!(check_cosignature(&note, &vkey), Ok(42));

    let wrong_id = text.replacen(&hex(&signer.key.key_id()), "00000000", 1);
    assert!(
        WitnessSigner::parse(&wrong_id)
            .unwrap_err()
            .contains("key id")
    );
    assert!(
        WitnessSigner::parse(&signer.key.vkey())
            .unwrap_err()
            .contains("PRIVATE+KEY+")
    );
    // Base64 holds '+': a key file and a vkey whose key has one read back too.
    let plus = (0u8..=255)
        .map(|b| WitnessSigner::from_seed("w", [b; 32]).unwrap())
        .find(|s| s.key_file().matches('+').count() > 4 && s.key.vkey().matches('+').count() > 2)
        .unwrap();
    assert_eq!(
        WitnessSigner::parse(&plus.key_file()).unwrap().key,
        plus.key
    );
    assert_eq!(WitnessKey::parse(&plus.key.vkey()).unwrap(), plus.key);
    assert!(WitnessSigner::generate("two words").is_err());
    assert!(WitnessSigner::generate("a+b").is_err());
}

#[tokio::test]
async fn the_first_run_trusts_the_first_checkpoint_and_cosigns_every_one() {
    let mut log = TestLog::new("archive");
    log.append(3);
    log.append(300);
    let signer = WitnessSigner::generate("witness.example/w1").unwrap();

    let run = log.witness(&signer, None).await.unwrap();

    assert_eq!(run.trusted, Some(3));
    assert_eq!(
        run.cosigned,
        vec![
            Cosigned {
                size: 3,
                already: false
            },
            Cosigned {
                size: 303,
                already: false
            }
        ]
    );
    let state = run.state.unwrap();
    assert_eq!(
        (state.size, state.origin.as_str()),
        (303, "audit-receiver/archive")
    );
    assert_eq!(state.root, HexHash(&log.edge.root()).to_string());
    assert_eq!(state.accepted, "2026-11-18T11:06:40Z");
    // Each stored cosignature holds on its checkpoint, for the witness's public key.
    let vkey = WitnessKey::parse(&signer.key.vkey()).unwrap();
    for size in [3, 303] {
        let note = log
            .reader()
            .cosigned_checkpoint(size, std::slice::from_ref(&vkey))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(check_cosignature(&note, &vkey), Ok(1_795_000_000));
    }
    assert_eq!(log.cosignature_keys().len(), 2);
}

#[tokio::test]
async fn a_later_run_cosigns_new_checkpoints_that_extend_the_accepted_one() {
    let mut log = TestLog::new("archive");
    log.append(5);
    let signer = WitnessSigner::generate("w").unwrap();
    let first = log.witness(&signer, None).await.unwrap().state.unwrap();

    let again = log.witness(&signer, Some(&first)).await.unwrap();
    assert!(again.cosigned.is_empty(), "nothing new");
    assert_eq!(again.state.as_ref(), Some(&first));

    log.append(251); // 256: one full tile
    log.append(1_000);
    let run = log.witness(&signer, Some(&first)).await.unwrap();
    assert_eq!(run.trusted, None);
    let sizes: Vec<u64> = run.cosigned.iter().map(|c| c.size).collect();
    assert_eq!(sizes, vec![256, 1_256]);
    assert_eq!(run.state.unwrap().size, 1_256);
    assert_eq!(log.cosignature_keys().len(), 3);

    // A run whose state was not saved meets its own cosignatures: fine.
    let rerun = log.witness(&signer, Some(&first)).await.unwrap();
    assert!(rerun.cosigned.iter().all(|c| c.already));
}

#[tokio::test]
async fn a_fork_at_the_accepted_size_is_refused_and_nothing_is_written() {
    let mut log = TestLog::new("archive");
    let size = log.append(10);
    let signer = WitnessSigner::generate("w").unwrap();
    let state = log.witness(&signer, None).await.unwrap().state.unwrap();
    log.append(20);
    // The log's key signs another root for the size the witness accepted.
    let forged = log.note(size, [9; 32], &log.pair, &log.der);
    log.put(&checkpoint_key(size), forged.into_bytes());
    let before = log.cosignature_keys();

    let refused = refusal(log.witness(&signer, Some(&state)).await);

    assert!(
        matches!(refused, Refusal::Fork { size: 10, .. }),
        "{refused}"
    );
    assert!(refused.to_string().starts_with("fork: "));
    assert_eq!(log.cosignature_keys(), before);
}

#[tokio::test]
async fn a_rollback_is_refused() {
    let mut log = TestLog::new("archive");
    log.append(10);
    let signer = WitnessSigner::generate("w").unwrap();
    let mut state = log.witness(&signer, None).await.unwrap().state.unwrap();
    // The witness accepted a bigger tree than this bucket's newest.
    state.size = 50;
    let before = log.cosignature_keys();

    let refused = refusal(log.witness(&signer, Some(&state)).await);

    assert_eq!(
        refused,
        Refusal::Rollback {
            accepted: 50,
            newest: 10
        }
    );
    assert_eq!(log.cosignature_keys(), before);

    // Another bucket (another log, a smaller tree) is refused too.
    let mut other = TestLog::new("archive");
    other.pair = log.pair;
    other.der = log.der.clone();
    other.append(3);
    state.size = 10;
    assert!(matches!(
        refusal(other.witness(&signer, Some(&state)).await),
        Refusal::Rollback { newest: 3, .. }
    ));
    assert!(other.cosignature_keys().is_empty());
}

#[tokio::test]
async fn a_checkpoint_the_log_did_not_sign_is_passed_over_and_reported_never_cosigned() {
    let mut log = TestLog::new("archive");
    log.append(4);
    let signer = WitnessSigner::generate("w").unwrap();
    let state = log.witness(&signer, None).await.unwrap().state.unwrap();
    let size = log.append(4);
    // The new checkpoint signed by another key under the log's key id, and junk at a size the
    // log never had: what anyone able to write under log/checkpoints/ could plant.
    let (stranger, _) = ecdsa_pair();
    let forged = log.note(size, log.edge.root(), &stranger, &log.der);
    log.put(&checkpoint_key(size), forged.into_bytes());
    log.put(&checkpoint_key(99), b"junk".to_vec());

    let run = log.witness(&signer, Some(&state)).await.unwrap();
    assert_eq!(
        run.passed_over.iter().map(|p| p.size).collect::<Vec<_>>(),
        [8, 99]
    );
    assert!(run.passed_over[0].why.contains("does not hold"), "{run:?}");
    assert!(run.cosigned.is_empty());
    assert_eq!(run.state.as_ref(), Some(&state), "nothing new accepted");
    assert_eq!(log.cosignature_keys().len(), 1, "only the first run's");

    // The log goes on: its next checkpoint, signed, extends the accepted one and is cosigned.
    let next = log.append(4);
    let run = log.witness(&signer, Some(&state)).await.unwrap();
    assert_eq!(
        run.cosigned,
        [Cosigned {
            size: next,
            already: false
        }]
    );
    assert_eq!(run.passed_over.len(), 2);

    // A first run passes over a first object whose signature does not hold, and trusts the
    // first checkpoint the log signed.
    let mut fresh = TestLog::new("archive");
    fresh.append(2);
    let mut first = fresh
        .archive
        .current(&checkpoint_key(2))
        .unwrap()
        .body
        .to_vec();
    first[0] ^= 1;
    fresh.put(&checkpoint_key(2), first);
    let run = fresh.witness(&signer, None).await.unwrap();
    assert_eq!((run.trusted, run.state), (None, None));
    assert_eq!(run.passed_over[0].size, 2);
    assert!(fresh.cosignature_keys().is_empty());
    let size = fresh.append(3);
    let run = fresh.witness(&signer, None).await.unwrap();
    assert_eq!(run.trusted, Some(size));
    assert_eq!(fresh.cosignature_keys().len(), 1);
}

#[tokio::test]
async fn a_signed_checkpoint_copied_to_another_sizes_name_is_passed_over_not_a_refusal() {
    let mut log = TestLog::new("archive");
    log.append(3);
    let signer = WitnessSigner::generate("w").unwrap();
    let state = log.witness(&signer, None).await.unwrap().state.unwrap();
    // The log's own checkpoint of size 3, its signature valid, copied to the name of a size the
    // log never signed (no digest names it): before, the witness refused on it for good.
    let copy = log
        .archive
        .current(&checkpoint_key(3))
        .unwrap()
        .body
        .to_vec();
    log.put(&checkpoint_key(6), copy.clone());
    let next = log.append(4);

    let run = log.witness(&signer, Some(&state)).await.unwrap();
    assert_eq!(run.passed_over.len(), 1, "{run:?}");
    assert_eq!(run.passed_over[0].size, 6);
    assert!(run.passed_over[0].why.contains("says size 3"), "{run:?}");
    assert_eq!(
        run.cosigned,
        [Cosigned {
            size: next,
            already: false
        }]
    );
    assert_eq!(run.state.as_ref().map(|s| s.size), Some(next));

    // A first run passes it over too, when it is the first name listed.
    let mut fresh = TestLog::new("archive");
    fresh.put(&checkpoint_key(1), copy);
    let size = fresh.append(2);
    let run = fresh.witness(&signer, None).await.unwrap();
    assert_eq!(run.passed_over[0].size, 1);
    assert_eq!(run.trusted, Some(size));
}

#[tokio::test]
async fn a_tree_that_does_not_extend_the_accepted_one_is_refused() {
    let mut log = TestLog::new("archive");
    log.append(7);
    let signer = WitnessSigner::generate("w").unwrap();
    let state = log.witness(&signer, None).await.unwrap().state.unwrap();
    log.append(300);
    // A checkpoint of a bigger tree, signed by the log's key, whose root the tiles do not lead
    // to from the accepted tree.
    let forged = log.note(400, [5; 32], &log.pair, &log.der);
    log.put(&checkpoint_key(400), forged.into_bytes());

    let refused = refusal(log.witness(&signer, Some(&state)).await);

    assert!(
        matches!(
            refused,
            Refusal::NotExtending {
                old: 307,
                new: 400,
                ..
            }
        ),
        "{refused}"
    );
    assert_eq!(
        log.cosignature_keys().len(),
        1,
        "nothing cosigned, not even 307"
    );

    // Another history: the tree of 307 rebuilt from other leaves, its tiles and checkpoint.
    let mut other = TestLog::new("archive");
    other.pair = log.pair;
    other.der = log.der.clone();
    for i in 0..7 {
        let mut full = Vec::new();
        other
            .edge
            .push(leaf_hash(format!("other {i}").as_bytes()), &mut full);
    }
    other.append(0);
    other.append(10);
    let refused = refusal(other.witness(&signer, Some(&state)).await);
    assert!(
        matches!(refused, Refusal::Fork { size: 7, .. }),
        "{refused}"
    );
}

#[tokio::test]
async fn another_origin_is_refused() {
    let mut log = TestLog::new("archive");
    log.append(3);
    let signer = WitnessSigner::generate("w").unwrap();
    let mut state = log.witness(&signer, None).await.unwrap().state.unwrap();
    state.origin = "audit-receiver/elsewhere".to_owned();
    assert!(matches!(
        refusal(log.witness(&signer, Some(&state)).await),
        Refusal::OtherOrigin { .. }
    ));
}

#[tokio::test]
async fn the_origin_is_the_configured_one_never_the_first_checkpoints() {
    // The log's key signed a checkpoint of another log into this bucket: a first run, which has
    // no state to take an origin from, refuses it rather than follow it.
    let mut log = TestLog::new("archive");
    log.origin = "audit-receiver/elsewhere".to_owned();
    log.append(3);
    let signer = WitnessSigner::generate("w").unwrap();
    assert_eq!(
        refusal(log.witness(&signer, None).await),
        Refusal::OtherOrigin {
            size: 3,
            origin: "audit-receiver/elsewhere".to_owned(),
            accepted: "audit-receiver/archive".to_owned(),
        }
    );
    assert!(log.cosignature_keys().is_empty());
}

#[tokio::test]
async fn the_checkpoint_is_cosigned_as_read_extension_lines_included() {
    let mut log = TestLog::new("archive");
    let size = log.append(3);
    // The log signs a body with an extension line (c2sp.org/tlog-checkpoint allows them).
    let body = format!(
        "{}extension line\n",
        Checkpoint {
            origin: log.origin.clone(),
            size,
            root: log.edge.root(),
        }
        .body()
    );
    let note = SignedNote {
        signatures: vec![NoteSignature {
            name: log.origin.clone(),
            key_id: ecdsa_key_id(&log.der),
            signature: log
                .pair
                .sign(&SystemRandom::new(), body.as_bytes())
                .unwrap()
                .as_ref()
                .to_vec(),
        }],
        body,
    };
    log.put(&checkpoint_key(size), note.text().into_bytes());
    let signer = WitnessSigner::generate("w").unwrap();
    log.witness(&signer, None).await.unwrap();
    let vkey = WitnessKey::parse(&signer.key.vkey()).unwrap();
    let cosigned = log
        .reader()
        .cosigned_checkpoint(size, std::slice::from_ref(&vkey))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(check_cosignature(&cosigned, &vkey), Ok(1_795_000_000));
}

#[tokio::test]
async fn an_empty_log_is_nothing_to_cosign() {
    let log = TestLog::new("archive");
    let signer = WitnessSigner::generate("w").unwrap();
    let run = log.witness(&signer, None).await.unwrap();
    assert_eq!(
        (run.trusted, run.cosigned.len(), run.state),
        (None, 0, None)
    );
}

#[tokio::test]
async fn a_slot_taken_by_anything_but_its_own_cosignature_is_refused_and_the_state_stays() {
    let signer = WitnessSigner::generate("witness.example/w1").unwrap();
    let other = WitnessSigner::generate("witness.example/w1").unwrap();
    // What someone with s3:PutObject under log/cosignatures/ can put in this witness's slot
    // first, given the checkpoint's body: junk, a line bearing its name and key id that another
    // key signed, its own cosignature of another checkpoint, another witness's valid cosignature,
    // two lines.
    let squat = |body: &str| -> Vec<String> {
        let forged = NoteSignature {
            key_id: signer.key.key_id(),
            ..other.cosign(body, 1)
        };
        vec![
            "junk".to_owned(),
            format!("{}\n", forged.line()),
            format!(
                "{}\n",
                signer
                    .cosign(&body.replace("archive", "elsewhere"), 1)
                    .line()
            ),
            format!("{}\n", other.cosign(body, 1).line()),
            format!(
                "{}\n{}\n",
                signer.cosign(body, 1).line(),
                signer.cosign(body, 2).line()
            ),
        ]
    };
    for case in 0..5 {
        let mut log = TestLog::new("archive");
        log.append(4);
        let first = log.witness(&signer, None).await.unwrap().state.unwrap();
        let size = log.append(4);
        let body = Checkpoint {
            origin: log.origin.clone(),
            size,
            root: log.edge.root(),
        }
        .body();
        let squatted = squat(&body).swap_remove(case);
        let slot = cosignature_key(size, signer.key.key_id());
        log.put(&slot, squatted.clone().into_bytes());

        let refused = refusal(log.witness(&signer, Some(&first)).await);
        let Refusal::SlotTaken { size: at, key, .. } = &refused else {
            panic!("{squatted:?}: {refused:?}")
        };
        assert_eq!((*at, key.as_str()), (size, slot.as_str()), "{squatted:?}");
        assert!(
            refused.to_string().starts_with(&format!(
                "slot taken: {slot} was already written, and it is not this witness's cosignature"
            )),
            "{refused}"
        );
        // Left as it was found.
        assert_eq!(
            log.reader().get(&slot).await.unwrap(),
            Some(squatted.into_bytes()),
            "{case}"
        );
    }
}
