//! `prove`'s search and proofs, and `consistency`, against the archive in memory
//! (`audit_aws::s3`'s twin): a log built here as the sealer builds it (archive objects, leaves
//! appended with `TreeEdge`, full and partial tiles, the period's index, the digest with its tree,
//! the checkpoint signed by a P-256 key as KMS signs), then read as the commands read it.

use audit_aws::kms::MemoryKey;
use audit_aws::s3::MemoryBucket;
use audit_model::archive::{ObjectKey, ObjectKind, Period, PeriodLength};
use audit_model::digest::{Digest, ListedObject, TreeHead, digest_key, hex, sha256};
use audit_model::note::{
    Checkpoint, IndexRow, NoteSignature, SignedNote, WitnessKey, checkpoint_key, cosignature_key,
    cosigned_message, ecdsa_key_id, index_key, origin,
};
use audit_model::tlog::{HexHash, TreeEdge, leaf_hash, parse_hex_hash, verify_consistency};
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use bytes::Bytes;
use chrono::DateTime;

use super::*;
use crate::archive::S3Archive;

const BUCKET: &str = "archive";
const SECONDS: u32 = 60;

fn length() -> PeriodLength {
    PeriodLength::new(SECONDS).unwrap()
}

/// A log in memory, sealed period by period as the sealer seals it.
struct Log {
    archive: S3Archive<Counted<MemoryBucket>>,
    key: MemoryKey,
    edge: TreeEdge,
    sequence: u64,
    /// The first period's start.
    t0: i64,
}

fn gzip(lines: &[String]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    for line in lines {
        encoder.write_all(line.as_bytes()).unwrap();
        encoder.write_all(b"\n").unwrap();
    }
    encoder.finish().unwrap()
}

fn line(id: &str, at: &str) -> String {
    format!(r#"{{"auditTime":"{at}","messageId":"{id}","action":"invoice.pay"}}"#)
}

fn at(seconds: i64) -> String {
    DateTime::from_timestamp(seconds, 0)
        .unwrap()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl Log {
    fn new() -> Self {
        Self {
            archive: S3Archive::over(Counted::new(MemoryBucket::new()), BUCKET, "memory"),
            key: MemoryKey::new("arn:aws:kms:us-east-1:000000000000:key/log"),
            edge: TreeEdge::default(),
            sequence: 100,
            t0: 1_795_000_020 / i64::from(SECONDS) * i64::from(SECONDS),
        }
    }

    fn bucket(&self) -> &MemoryBucket {
        self.archive.inner()
    }

    fn reader(&self) -> LogReader<'_, S3Archive<Counted<MemoryBucket>>> {
        LogReader {
            archive: &self.archive,
        }
    }

    fn log_key(&self) -> LogKey {
        LogKey::from_der(&self.key.public_key().der).unwrap()
    }

    fn period(&self, n: i64) -> Period {
        length().period_of(DateTime::from_timestamp(self.t0 + n * i64::from(SECONDS), 0).unwrap())
    }

    fn put(&self, key: &str, body: Vec<u8>) {
        self.bucket().overwrite_with(key, Bytes::from(body), vec![]);
    }

    /// An archive object in period `n` holding `lines`; its key.
    fn object(&mut self, n: i64, lines: &[String]) -> String {
        self.sequence += 10;
        let when = DateTime::from_timestamp(self.period(n).start + 1, 0).unwrap();
        let key = ObjectKey::new(
            ObjectKind::Trail,
            when,
            length(),
            &self.sequence.to_string(),
            0,
        )
        .unwrap()
        .to_string();
        self.put(&key, gzip(lines));
        key
    }

    /// The checkpoint of the tree as it is, signed by the log's key.
    fn checkpoint(&self) -> SignedNote {
        let body = Checkpoint {
            origin: origin(BUCKET),
            size: self.edge.size,
            root: self.edge.root(),
        }
        .body();
        let signature = self.key.sign(body.as_bytes()).unwrap();
        SignedNote {
            body,
            signatures: vec![NoteSignature {
                name: origin(BUCKET),
                key_id: ecdsa_key_id(&self.key.public_key().der),
                signature,
            }],
        }
    }

    /// Seals period `n` whose objects are `objects`: leaves appended, digest, tiles, index,
    /// checkpoint (left out when `checkpoint` is false: a run that stopped after its digest).
    fn seal(&mut self, n: i64, objects: &[String], checkpoint: bool) {
        let period = self.period(n);
        let mut listed = Vec::new();
        let mut rows = Vec::new();
        let mut full = Vec::new();
        for key in objects {
            let body = self.bucket().current(key).unwrap().body;
            let text = gunzip(&body).unwrap();
            for (number, line) in object_lines(&text).into_iter().enumerate() {
                let fields: serde_json::Value = serde_json::from_slice(line).unwrap();
                rows.push(IndexRow {
                    message_id: fields["messageId"].as_str().unwrap().to_owned(),
                    audit_time: fields["auditTime"].as_str().unwrap().to_owned(),
                    leaf_index: self.edge.size,
                    object: key.clone(),
                    line_number: number as u64,
                });
                self.edge.push(leaf_hash(line), &mut full);
            }
            listed.push(ListedObject {
                key: key.clone(),
                version_id: "v".to_owned(),
                sha256: hex(&sha256(&body)),
                events: object_lines(&text).len() as u64,
                size: body.len() as u64,
                marker: String::new(),
            });
        }
        let mut digest = Digest::new(
            BUCKET,
            period,
            DateTime::from_timestamp(period.sealable_at(), 0).unwrap(),
            listed,
            None,
            self.key.arn(),
        );
        digest.tree = Some(TreeHead {
            size: self.edge.size,
            root: HexHash(&self.edge.root()).to_string(),
            checkpoint: checkpoint_key(self.edge.size),
        });
        self.put(&digest_key(period), digest.to_bytes());
        for (tile, bytes) in full.into_iter().chain(self.edge.partial_tiles()) {
            self.put(&tile.key(), bytes);
        }
        if !rows.is_empty() {
            let lines: Vec<String> = rows
                .iter()
                .map(|r| r.line().trim_end().to_owned())
                .collect();
            self.put(&index_key(period), gzip(&lines));
        }
        if checkpoint
            && self
                .bucket()
                .current(&checkpoint_key(self.edge.size))
                .is_none()
        {
            self.put(
                &checkpoint_key(self.edge.size),
                self.checkpoint().text().into_bytes(),
            );
        }
    }

    /// A period sealed before the log began: a digest without a tree.
    fn seal_before_log(&self, n: i64) {
        let period = self.period(n);
        let digest = Digest::new(
            BUCKET,
            period,
            DateTime::from_timestamp(period.sealable_at(), 0).unwrap(),
            vec![],
            None,
            self.key.arn(),
        );
        self.put(&digest_key(period), digest.to_bytes());
    }

    /// `count` events of period `n` in one object, sealed; their (messageId, auditTime).
    fn events(&mut self, n: i64, count: usize) -> Vec<(String, String)> {
        let period = self.period(n);
        let events: Vec<(String, String)> = (0..count)
            .map(|i| (format!("e-{n}-{i}"), at(period.start + (i % 50) as i64)))
            .collect();
        let lines: Vec<String> = events.iter().map(|(id, t)| line(id, t)).collect();
        let key = self.object(n, &lines);
        self.seal(n, &[key], true);
        events
    }

    fn wanted(&self, id: &str, time: &str, first: i64, last: i64) -> Wanted {
        Wanted {
            message_id: id.to_owned(),
            audit_time: time.to_owned(),
            first: self.period(first),
            last: self.period(last),
            own: self.period(first),
        }
    }

    /// A time long after every period: each is due.
    fn late(&self) -> i64 {
        self.t0 + 86_400
    }
}

fn prove_error(result: Result<impl std::fmt::Debug, Error>) -> ProveError {
    match result {
        Err(Error::Prove(error)) => error,
        other => panic!("not a prove error: {other:?}"),
    }
}

#[tokio::test]
async fn an_event_found_in_its_first_period_is_proven_and_the_proof_checks() {
    let mut log = Log::new();
    let first = log.events(0, 300);
    log.events(1, 40);
    let (id, time) = &first[257];
    let reader = log.reader();
    let found = reader
        .locate(&log.wanted(id, time, 0, 3), log.late())
        .await
        .unwrap();
    assert_eq!((found.row.leaf_index, found.searched), (257, 1));
    assert_eq!(found.period, log.period(0));
    let before = log.archive.count();
    let proof = reader
        .prove(&found, &log.log_key(), &origin(BUCKET), &[], None)
        .await
        .unwrap();
    // The newest checkpoint (no witness yet): the tree after both periods.
    assert_eq!(proof.tree_size, 340);
    assert_eq!(proof.leaf_index, 257);
    assert_eq!(proof.line, line(id, time));
    let verdict = check_proof(&proof, &log.log_key(), &[]).unwrap();
    assert_eq!(verdict.origin, origin(BUCKET));
    // The one object, the checkpoint and a few tiles: never the period's other objects.
    let read = log.archive.count();
    assert!(
        read.objects - before.objects <= 8,
        "{read:?} after {before:?}"
    );
}

#[tokio::test]
async fn an_event_archived_in_the_next_period_is_found_in_its_index() {
    let mut log = Log::new();
    log.events(0, 3);
    // Received in period 0 but archived late, in period 1's object.
    let late = line("late-1", &at(log.period(0).start + 59));
    let mut lines: Vec<String> = (0..4)
        .map(|i| line(&format!("p1-{i}"), &at(log.period(1).start + i)))
        .collect();
    lines.insert(2, late.clone());
    let key = log.object(1, &lines);
    log.seal(1, std::slice::from_ref(&key), true);
    let reader = log.reader();
    let found = reader
        .locate(
            &log.wanted("late-1", &at(log.period(0).start + 59), 0, 5),
            log.late(),
        )
        .await
        .unwrap();
    assert_eq!(found.period, log.period(1));
    assert_eq!(found.searched, 2);
    assert_eq!(
        (
            found.row.object.as_str(),
            found.row.line_number,
            found.row.leaf_index
        ),
        (key.as_str(), 2, 5)
    );
    let proof = reader
        .prove(&found, &log.log_key(), &origin(BUCKET), &[], None)
        .await
        .unwrap();
    assert_eq!(proof.line, late);
    // The same instant written with another offset is the same auditTime.
    let other = DateTime::parse_from_rfc3339(&at(log.period(0).start + 59))
        .unwrap()
        .with_timezone(&chrono::FixedOffset::east_opt(3600).unwrap())
        .to_rfc3339();
    assert!(
        reader
            .locate(&log.wanted("late-1", &other, 0, 5), log.late())
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_period_not_sealed_yet_stops_the_search_and_says_the_events_period_and_when_it_is_sealed()
{
    let mut log = Log::new();
    log.events(0, 3);
    let reader = log.reader();
    // Period 1 has no digest; now is just after it ended.
    let now = log.period(1).end() + 5;
    let error = prove_error(
        reader
            .locate(&log.wanted("missing", &at(log.period(0).start), 0, 5), now)
            .await,
    );
    // The period named, and its end, the seal delay, then the schedule or one period.
    let pending = |p: Period| {
        format!(
            "the period {} to {} of messageId missing is not sealed yet; the archiver seals it by {}",
            time(p.start),
            time(p.end()),
            time(
                p.sealable_at()
                    + crate::verify::SEAL_SCHEDULE_SECONDS.min(i64::from(p.length.seconds()))
            )
        )
    };
    assert_eq!(error.to_string(), pending(log.period(1)));
    // The event's own period comes after the first one not sealed: it is the one named, the
    // one period it can be proven in, and when it is sealed (the periods are sealed in order).
    let own = Wanted {
        own: log.period(3),
        ..log.wanted("missing", &at(log.period(3).start), 0, 5)
    };
    let error = prove_error(reader.locate(&own, now).await);
    assert_eq!(error.to_string(), pending(log.period(3)));
    // Long after: not "wait", but "look why".
    let error = prove_error(
        reader
            .locate(
                &log.wanted("missing", &at(log.period(0).start), 0, 5),
                log.late(),
            )
            .await,
    );
    assert!(matches!(error, ProveError::Overdue { .. }), "{error}");
}

#[tokio::test]
async fn a_digest_whose_checkpoint_is_not_written_yet_says_the_next_run_writes_it() {
    let mut log = Log::new();
    log.events(0, 3);
    let key = log.object(1, &[line("x", &at(log.period(1).start))]);
    log.seal(1, &[key], false);
    log.bucket().delete(&index_key(log.period(1)));
    let error = prove_error(
        log.reader()
            .locate(&log.wanted("x", &at(log.period(1).start), 1, 2), log.late())
            .await,
    );
    assert!(matches!(error, ProveError::LogPending { .. }), "{error}");
}

#[tokio::test]
async fn an_event_in_no_index_of_its_periods_is_not_found_and_the_periods_are_named() {
    let mut log = Log::new();
    log.seal_before_log(0);
    log.events(1, 3);
    // Period 2 is sealed with no trail event: no index, a digest with the tree.
    log.seal(2, &[], true);
    log.events(3, 2);
    let reader = log.reader();
    let error = prove_error(
        reader
            .locate(
                &log.wanted("nowhere", &at(log.period(1).start), 0, 3),
                log.late(),
            )
            .await,
    );
    let ProveError::NotFound {
        first,
        last,
        before_log,
        no_digest,
        ..
    } = &error
    else {
        panic!("{error}");
    };
    assert_eq!(first, &time(log.period(0).start));
    assert_eq!(last, &time(log.period(3).end()));
    assert_eq!((*before_log, *no_digest), (1, 0), "{error}");
    // An id found with another auditTime is not the event asked for.
    let error = prove_error(
        reader
            .locate(
                &log.wanted("e-1-0", &at(log.period(1).start + 1), 1, 3),
                log.late(),
            )
            .await,
    );
    assert!(matches!(error, ProveError::NotFound { .. }), "{error}");
    // What is read: the indexes of periods 1 and 3, the first alternate name of period 1's
    // index (it lacks the event: docs/archive.md "Planted log objects"), and for period 2 its
    // absent index, its digest and its checkpoint; never an archive object.
    let before = log.archive.count();
    reader
        .locate(
            &log.wanted("e-3-1", &at(log.period(3).start + 1), 1, 3),
            log.late(),
        )
        .await
        .unwrap();
    let read = log.archive.count();
    assert_eq!(read.objects - before.objects, 6, "{read:?} {before:?}");
}

#[tokio::test]
async fn the_tree_size_is_the_largest_a_witness_key_verifies_then_the_newest_or_the_one_given() {
    let mut log = Log::new();
    let events = log.events(0, 10);
    log.events(1, 10);
    let cosigned_at = log.edge.size; // 20
    log.events(2, 10);
    // A witness cosigns the checkpoint of 20.
    let pair = Ed25519KeyPair::generate().unwrap();
    let witness = WitnessKey {
        name: "witness.example/w1".to_owned(),
        public: pair.public_key().as_ref().try_into().unwrap(),
    };
    let stored = log.bucket().current(&checkpoint_key(cosigned_at)).unwrap();
    let body = SignedNote::parse(std::str::from_utf8(&stored.body).unwrap())
        .unwrap()
        .body;
    let stamp = 1_795_000_000u64;
    let mut signature = stamp.to_be_bytes().to_vec();
    signature.extend_from_slice(
        pair.sign(cosigned_message(stamp, &body).as_bytes())
            .as_ref(),
    );
    let cosignature = NoteSignature {
        name: witness.name.clone(),
        key_id: witness.key_id(),
        signature,
    };
    log.put(
        &cosignature_key(cosigned_at, witness.key_id()),
        cosignature.line().into_bytes(),
    );
    let reader = log.reader();
    let (id, time) = &events[3];
    let found = reader
        .locate(&log.wanted(id, time, 0, 0), log.late())
        .await
        .unwrap();
    let key = log.log_key();
    let witnesses = std::slice::from_ref(&witness);
    let proof = reader
        .prove(&found, &key, &origin(BUCKET), witnesses, None)
        .await
        .unwrap();
    assert_eq!(proof.tree_size, cosigned_at);
    // With no witness key to check a cosignature with, the newest checkpoint.
    let unwitnessed = reader
        .prove(&found, &key, &origin(BUCKET), &[], None)
        .await
        .unwrap();
    assert_eq!(unwitnessed.tree_size, 30);
    let verdict = check_proof(&proof, &key, std::slice::from_ref(&witness)).unwrap();
    assert_eq!(verdict.cosigned, vec![(witness.name.clone(), stamp)]);
    let given = reader
        .prove(&found, &key, &origin(BUCKET), &[], Some(10))
        .await
        .unwrap();
    assert_eq!(given.tree_size, 10);
    check_proof(&given, &key, &[]).unwrap();
    assert!(matches!(
        prove_error(
            reader
                .prove(&found, &key, &origin(BUCKET), &[], Some(3))
                .await
        ),
        ProveError::TooSmall { size: 3, leaf: 3 }
    ));
    assert!(matches!(
        prove_error(
            reader
                .prove(&found, &key, &origin(BUCKET), &[], Some(15))
                .await
        ),
        ProveError::NoCheckpointOf { size: 15, .. }
    ));
    // An event of period 2, after the cosigned size: the newest checkpoint.
    let found = reader
        .locate(
            &log.wanted("e-2-4", &at(log.period(2).start + 4), 2, 2),
            log.late(),
        )
        .await
        .unwrap();
    let proof = reader
        .prove(&found, &key, &origin(BUCKET), witnesses, None)
        .await
        .unwrap();
    assert_eq!(proof.tree_size, 30);
}

#[tokio::test]
async fn a_changed_line_or_tile_or_another_key_makes_no_proof() {
    let mut log = Log::new();
    let events = log.events(0, 5);
    let reader = log.reader();
    let (id, time) = &events[1];
    let found = reader
        .locate(&log.wanted(id, time, 0, 0), log.late())
        .await
        .unwrap();
    // The log's key is another: the checkpoint's signature is not by it.
    let other = LogKey::from_der(&MemoryKey::new("other").public_key().der).unwrap();
    let error = prove_error(
        reader
            .prove(&found, &other, &origin(BUCKET), &[], None)
            .await,
    );
    assert!(
        error.to_string().contains("no signature by the log's key"),
        "{error}"
    );
    // The object written over with one byte of the line changed.
    let lines: Vec<String> = events
        .iter()
        .map(|(i, t)| {
            line(i, t).replace(
                "invoice.pay",
                if i == id {
                    "invoice.pax"
                } else {
                    "invoice.pay"
                },
            )
        })
        .collect();
    log.put(&found.row.object, gzip(&lines));
    let error = prove_error(
        reader
            .prove(&found, &log.log_key(), &origin(BUCKET), &[], None)
            .await,
    );
    assert!(matches!(error, ProveError::Broken { .. }), "{error}");
    assert!(error.to_string().contains("does not hold"), "{error}");
    let ProveError::Broken { period, .. } = &error else {
        panic!("{error}");
    };
    assert_eq!(period.as_deref(), Some(period_text(found.period).as_str()));
}

#[tokio::test]
async fn with_no_checkpoint_at_all_the_log_has_not_begun() {
    let log = Log::new();
    let error = prove_error(log.reader().proof_size(0, None, &[]).await);
    assert_eq!(error, ProveError::NoCheckpoint);
    let error = prove_error(
        log.reader()
            .consistency(0, None, &log.log_key(), &origin(BUCKET))
            .await,
    );
    assert_eq!(error, ProveError::NoCheckpoint);
}

#[tokio::test]
async fn a_consistency_proof_between_two_sizes_holds_and_names_its_roots() {
    let mut log = Log::new();
    log.events(0, 200);
    let old_root = log.edge.root();
    log.events(1, 100);
    log.events(2, 3);
    let reader = log.reader();
    let key = log.log_key();
    let proof = reader
        .consistency(200, None, &key, &origin(BUCKET))
        .await
        .unwrap();
    assert_eq!((proof.old_size, proof.new_size), (200, 303));
    assert_eq!(proof.old_root, HexHash(&old_root).to_string());
    assert_eq!(proof.new_root, HexHash(&log.edge.root()).to_string());
    let hashes: Vec<Hash> = proof
        .proof
        .iter()
        .map(|h| parse_hex_hash(h).unwrap())
        .collect();
    verify_consistency(
        200,
        303,
        &parse_hex_hash(&proof.old_root).unwrap(),
        &parse_hex_hash(&proof.new_root).unwrap(),
        &hashes,
    )
    .unwrap();
    assert!(proof.old_checkpoint.is_some());
    assert_eq!(
        Checkpoint::parse(&SignedNote::parse(&proof.checkpoint).unwrap().body)
            .unwrap()
            .size,
        303
    );
    // A size with no checkpoint of its own: proven from the tiles alone.
    let between = reader
        .consistency(150, Some(300), &key, &origin(BUCKET))
        .await
        .unwrap();
    assert_eq!(between.old_checkpoint, None);
    let hashes: Vec<Hash> = between
        .proof
        .iter()
        .map(|h| parse_hex_hash(h).unwrap())
        .collect();
    verify_consistency(
        150,
        300,
        &parse_hex_hash(&between.old_root).unwrap(),
        &parse_hex_hash(&between.new_root).unwrap(),
        &hashes,
    )
    .unwrap();
    assert!(matches!(
        prove_error(
            reader
                .consistency(301, Some(300), &key, &origin(BUCKET))
                .await
        ),
        ProveError::SizesOutOfOrder { .. }
    ));
}

#[tokio::test]
async fn a_checkpoint_that_disagrees_with_the_tiles_is_inconsistent() {
    let mut log = Log::new();
    log.events(0, 5);
    log.events(1, 5);
    // A checkpoint of size 5 signed by the log's key over another root (a fork).
    let forged = Checkpoint {
        origin: origin(BUCKET),
        size: 5,
        root: [9; 32],
    }
    .body();
    let note = SignedNote {
        signatures: vec![NoteSignature {
            name: origin(BUCKET),
            key_id: ecdsa_key_id(&log.key.public_key().der),
            signature: log.key.sign(forged.as_bytes()).unwrap(),
        }],
        body: forged,
    };
    log.put(&checkpoint_key(5), note.text().into_bytes());
    let error = prove_error(
        log.reader()
            .consistency(5, None, &log.log_key(), &origin(BUCKET))
            .await,
    );
    assert!(matches!(error, ProveError::Inconsistent(_)), "{error}");
    assert!(
        error.to_string().starts_with("checkpoint inconsistent"),
        "{error}"
    );
    // A tile changed: the tiles no longer give the newest checkpoint's root.
    let tile = audit_model::tlog::TileRef {
        level: 0,
        index: 0,
        width: 10,
    };
    let mut bytes = log.bucket().current(&tile.key()).unwrap().body.to_vec();
    bytes[0] ^= 1;
    log.put(&tile.key(), bytes);
    let error = prove_error(
        log.reader()
            .consistency(3, None, &log.log_key(), &origin(BUCKET))
            .await,
    );
    assert!(matches!(error, ProveError::Inconsistent(_)), "{error}");
}

#[test]
fn a_proof_in_a_tree_of_ten_million_reads_at_most_six_tiles() {
    // docs/auditctl.md's bound: at most two tiles per level, three levels to 16.7 million.
    let size = 10_000_000u64;
    let most = [
        0, 1, 255, 256, 65_535, 65_536, 5_000_000, 9_999_743, 9_999_744, 9_999_999,
    ]
    .into_iter()
    .chain((0..size).step_by(99_991))
    .map(|index| inclusion_tiles(index, size).unwrap().len())
    .max()
    .unwrap();
    assert!(most <= 6, "{most}");
}

#[tokio::test]
async fn periods_before_the_trail_began_are_passed_over() {
    // The trail's first period is 2: periods 0 and 1 (within the clock skew of the first event's
    // receivedAt) have no digest, and a later period has one.
    let mut log = Log::new();
    let events = log.events(2, 4);
    let (id, time) = &events[1];
    let reader = log.reader();
    let now = log.period(2).sealable_at() + 1;
    let found = reader
        .locate(&log.wanted(id, time, 0, 4), now)
        .await
        .unwrap();
    assert_eq!((found.period, found.searched), (log.period(2), 1));
    let error = prove_error(reader.locate(&log.wanted("nowhere", time, 0, 2), now).await);
    assert!(
        matches!(
            error,
            ProveError::NotFound {
                before_log: 0,
                no_digest: 2,
                ..
            }
        ),
        "{error}"
    );
    // Period 3 comes next, not sealed yet: the search stops there.
    let error = prove_error(reader.locate(&log.wanted("nowhere", time, 0, 4), now).await);
    assert!(matches!(error, ProveError::NotSealed { .. }), "{error}");
}

/// `witness` (its key pair `pair`) cosigns the checkpoint of `size` as stored, at its own key.
fn cosign(log: &Log, size: u64, pair: &Ed25519KeyPair, witness: &WitnessKey) {
    let stored = log.bucket().current(&checkpoint_key(size)).unwrap();
    let body = SignedNote::parse(std::str::from_utf8(&stored.body).unwrap())
        .unwrap()
        .body;
    let stamp = 1_795_000_000u64;
    let mut signature = stamp.to_be_bytes().to_vec();
    signature.extend_from_slice(
        pair.sign(cosigned_message(stamp, &body).as_bytes())
            .as_ref(),
    );
    let line = NoteSignature {
        name: witness.name.clone(),
        key_id: witness.key_id(),
        signature,
    };
    log.put(
        &cosignature_key(size, witness.key_id()),
        line.line().into_bytes(),
    );
}

#[tokio::test]
async fn planted_cosignature_objects_neither_steer_the_tree_size_nor_enter_the_checkpoint() {
    let mut log = Log::new();
    let events = log.events(0, 10);
    log.events(1, 10);
    log.events(2, 10);
    let pair = Ed25519KeyPair::generate().unwrap();
    let witness = WitnessKey {
        name: "witness.example/w1".to_owned(),
        public: pair.public_key().as_ref().try_into().unwrap(),
    };
    cosign(&log, 20, &pair, &witness);
    // Someone with s3:PutObject under log/cosignatures/: a size no checkpoint has, a line
    // bearing the log's own name and key id, a line under another object's key id, an object
    // too large to read, and a line claiming the witness's name at a larger size.
    let log_id = ecdsa_key_id(&log.key.public_key().der);
    let forged = |name: &str, key_id: [u8; 4]| {
        NoteSignature {
            name: name.to_owned(),
            key_id,
            signature: vec![7; 72],
        }
        .line()
        .into_bytes()
    };
    log.put(
        &cosignature_key(u64::MAX, witness.key_id()),
        forged(&witness.name, witness.key_id()),
    );
    log.put(
        &cosignature_key(30, log_id),
        forged(&origin(BUCKET), log_id),
    );
    log.put(
        &cosignature_key(30, [1, 2, 3, 4]),
        forged("other", [9, 9, 9, 9]),
    );
    log.put(&cosignature_key(30, [5, 5, 5, 5]), vec![b'x'; 4096]);
    log.put(
        &cosignature_key(30, witness.key_id()),
        forged(&witness.name, witness.key_id()),
    );
    let reader = log.reader();
    let (id, time) = &events[3];
    let found = reader
        .locate(&log.wanted(id, time, 0, 0), log.late())
        .await
        .unwrap();
    let key = log.log_key();
    let witnesses = std::slice::from_ref(&witness);
    // The size the witness's own valid cosignature names, not the largest key.
    let proof = reader
        .prove(&found, &key, &origin(BUCKET), witnesses, None)
        .await
        .unwrap();
    assert_eq!(proof.tree_size, 20);
    check_proof(&proof, &key, witnesses).unwrap();
    // Without a witness key: the newest checkpoint, its log signature intact (the line bearing
    // the log's name was not merged), none of the planted lines in it.
    let proof = reader
        .prove(&found, &key, &origin(BUCKET), &[], None)
        .await
        .unwrap();
    assert_eq!(proof.tree_size, 30);
    check_proof(&proof, &key, &[]).unwrap();
    let note = SignedNote::parse(&proof.checkpoint).unwrap();
    assert_eq!(
        note.by(&origin(BUCKET), log_id).count(),
        1,
        "{}",
        proof.checkpoint
    );
    assert!(
        note.signatures.iter().all(|s| s.name != "other"),
        "{}",
        proof.checkpoint
    );
    // The witness's slot at 30 holds a line that does not verify: kept for a verifier to
    // refuse, never a size chosen from it.
    assert!(check_proof(&proof, &key, witnesses).is_err());
    // The object too large is never read whole.
    let before = log.archive.count();
    reader.cosignatures(30, &[]).await.unwrap();
    let read = log.archive.count();
    assert!(read.bytes - before.bytes < 4096, "{read:?} {before:?}");
    // At most MAX_COSIGNATURES objects beyond the witnesses' own are read for one size.
    for n in 0..40u32 {
        log.put(
            &cosignature_key(30, (n + 100).to_be_bytes()),
            forged(&format!("w{n}"), (n + 100).to_be_bytes()),
        );
    }
    let lines = reader.cosignatures(30, witnesses).await.unwrap();
    assert!(
        lines.len() <= 1 + crate::tlog::MAX_COSIGNATURES,
        "{}",
        lines.len()
    );
}

#[tokio::test]
async fn a_wrong_row_in_an_index_planted_at_the_name_falls_through_to_the_sealers_index() {
    // docs/archive.md "Planted log objects": someone wrote an index at the period's name first,
    // so the sealer wrote the real one under `.1`; the planted one holds a row for the event
    // that points at another leaf and line.
    let mut log = Log::new();
    let events = log.events(0, 20);
    let period = log.period(0);
    let name = index_key(period);
    let real = log.bucket().current(&name).unwrap().body.to_vec();
    let (id, time) = &events[7];
    let wrong = IndexRow {
        message_id: id.clone(),
        audit_time: time.clone(),
        leaf_index: 3,
        object: log.bucket().keys("trail/").pop().unwrap(),
        line_number: 3,
    };
    log.put(&name, gzip(&[wrong.line().trim_end().to_owned()]));
    let reader = log.reader();
    let found = reader
        .locate(&log.wanted(id, time, 0, 1), log.late())
        .await
        .unwrap();
    assert_eq!(
        (found.row.leaf_index, found.name),
        (3, 0),
        "the planted row first"
    );
    // Without the sealer's index at an alternate, the wrong row is no proof.
    let failed = prove_error(
        reader
            .prove(&found, &log.log_key(), &origin(BUCKET), &[], None)
            .await,
    );
    assert!(matches!(failed, ProveError::Broken { .. }), "{failed:?}");

    log.put(&format!("{name}.1"), real);
    let reader = log.reader();
    let proof = reader
        .prove(&found, &log.log_key(), &origin(BUCKET), &[], None)
        .await
        .unwrap();
    assert_eq!((proof.leaf_index, proof.line_number), (7, 7));
    assert_eq!(proof.line, line(id, time));
    check_proof(&proof, &log.log_key(), &[]).unwrap();
}

#[tokio::test]
async fn events_are_read_back_by_time_through_the_index_of_a_sealed_period_and_by_listing_the_others()
 {
    let mut log = Log::new();
    let first = log.events(1, 4);
    log.events(2, 3);
    // Period 3 is not sealed: an event of period 0's time received late, and one of its own.
    let late = line("late", &at(log.period(0).start + 5));
    let own = line("own", &at(log.period(3).start + 1));
    log.object(3, &[late.clone(), own]);
    let (from, to) = (at(log.period(0).start), at(log.period(1).end() - 1));
    let keep = |time: &str| from.as_str() <= time && time <= to.as_str();
    let all = |_: &str| true;
    let read = log
        .reader()
        .archived(log.period(1), log.period(3), &keep, &all)
        .await
        .unwrap();
    let mut expected: Vec<String> = first.iter().map(|(id, t)| line(id, t)).collect();
    expected.push(late.clone());
    assert_eq!(read.lines, expected);
    // A line the caller's filter drops is not kept, read through the index or listed.
    let not_e_1_1 = |line: &str| !line.contains("e-1-1");
    let read = log
        .reader()
        .archived(log.period(1), log.period(3), &keep, &not_e_1_1)
        .await
        .unwrap();
    assert_eq!(read.lines.len(), expected.len() - 1);
    assert!(read.lines.contains(&late));
    // Period 2's object holds no time asked for: its index says so, and it is not read.
    assert_eq!(
        (read.periods, read.indexed, read.objects, read.unreadable),
        (3, 2, 2, 0)
    );

    // An object of the unsealed period that is not gzip is counted, not read.
    let planted = ObjectKey::new(
        ObjectKind::Trail,
        DateTime::from_timestamp(log.period(3).start + 2, 0).unwrap(),
        length(),
        "1",
        0,
    )
    .unwrap()
    .to_string();
    log.put(&planted, b"not gzip".to_vec());
    let read = log
        .reader()
        .archived(log.period(3), log.period(3), &keep, &all)
        .await
        .unwrap();
    assert_eq!((read.lines.len(), read.objects, read.unreadable), (1, 2, 1));
}

#[tokio::test]
async fn the_first_trail_period_is_the_oldest_archivers_object_and_planted_keys_are_passed_over() {
    let mut log = Log::new();
    assert_eq!(
        log.reader().first_trail_period(length()).await.unwrap(),
        None
    );
    // More keys than a listing page, none the archiver's, before its first: passed over.
    for n in 0..150 {
        log.put(
            &format!("trail/dt=2000-01-01/hour=00/planted-{n:03}.jsonl.gz"),
            gzip(&[]),
        );
    }
    assert_eq!(
        log.reader().first_trail_period(length()).await.unwrap(),
        None
    );
    log.events(2, 1);
    log.events(5, 1);
    assert_eq!(
        log.reader().first_trail_period(length()).await.unwrap(),
        Some(log.period(2))
    );
}
