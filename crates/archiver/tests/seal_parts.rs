//! Sealing in parts (docs/archive.md "Sealing in parts"): a period longer than one run is sealed
//! over several runs into the digest, tree and checkpoint one run makes of it; a run stopped after
//! each kind of step is resumed with nothing written twice; a part planted under `state/seal/` is
//! passed over.

mod planted;
mod support;

use std::time::Duration;

use audit_archiver::budget::Budget;
use audit_archiver::seal::{
    PART_OBJECTS, SealError, Sealer, part_key, part_signing_string, parts_prefix,
};
use audit_archiver::signer::memory::MemorySigner;
use audit_aws::s3::memory::{Effect, Fault, MemoryBucket, Operation};
use audit_aws::s3::{Bucket, NewObject};
use audit_model::archive::{Period, SEAL_DELAY};
use audit_model::digest::{Digest, digest_key, hex, sha256};
use audit_model::note::{CHECKPOINTS_PREFIX, SignedNote};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use planted::plant_attested;
use support::seal::{BUCKET, KEY_ARN, minute, seal_at};
use support::{at, timed_out};

/// The chain's first period (one object), sealed before the busy one after it.
fn first() -> Period {
    minute().period_of(at("2026-11-22T10:14:00Z"))
}

fn busy() -> Period {
    first().next()
}

/// The first instant `period` is due (the one after it is not yet).
fn due(period: Period) -> DateTime<Utc> {
    DateTime::from_timestamp(period.end(), 0).unwrap()
        + chrono::Duration::from_std(SEAL_DELAY).unwrap()
        + chrono::Duration::seconds(1)
}

/// Given: the first period's object, sealed, and `objects` objects of 5 events in the busy
/// period (a part's fill at least one tile), not sealed yet (the same keys and versions in every bucket made so).
async fn archive(bucket: &MemoryBucket, signer: &MemorySigner, objects: u64) {
    plant_attested(bucket, at("2026-11-22T10:14:10Z"), minute(), 1, 3);
    for i in 0..objects {
        plant_attested(bucket, at("2026-11-22T10:15:10Z"), minute(), 10 + 5 * i, 5);
    }
    assert_eq!(seal_at(bucket, signer, due(first())).await.failure, None);
}

/// What sealing the busy period left that a reader sees: its digest (its link to the digest
/// before aside: ECDSA signs differently each time), and every log object's bytes (of each
/// checkpoint, its body).
fn sealed(bucket: &MemoryBucket) -> (Digest, Vec<(String, Vec<u8>)>) {
    let stored = bucket
        .current(&digest_key(busy()))
        .expect("the busy period's digest");
    let mut digest = Digest::parse(&stored.body).expect("a digest");
    digest.previous = None;
    let log = bucket
        .keys("log/")
        .into_iter()
        .map(|key| {
            let body = bucket.current(&key).expect("a log object").body.to_vec();
            let body = match key.starts_with(CHECKPOINTS_PREFIX) {
                true => SignedNote::parse(std::str::from_utf8(&body).unwrap())
                    .expect("a note")
                    .body
                    .into_bytes(),
                false => body,
            };
            (key, body)
        })
        .collect();
    (digest, log)
}

/// The busy period sealed in one run with no deadline, in a bucket of its own.
async fn sealed_in_one_run(
    signer: &MemorySigner,
    objects: u64,
) -> (Digest, Vec<(String, Vec<u8>)>) {
    let bucket = MemoryBucket::new();
    archive(&bucket, signer, objects).await;
    let report = seal_at(&bucket, signer, due(busy())).await;
    assert_eq!(report.failure, None);
    assert_eq!(report.sealed.len(), 1);
    sealed(&bucket)
}

/// Every key the sealer writes (parts, digests, log) holds one version: nothing written twice.
fn assert_written_once(bucket: &MemoryBucket) {
    for prefix in ["state/seal/", "digest/", "log/"] {
        for key in bucket.keys(prefix) {
            assert_eq!(bucket.versions(&key).len(), 1, "{key} written twice");
        }
    }
}

/// The busy period's part names taken (not its parts' rows).
fn part_names(bucket: &MemoryBucket) -> Vec<String> {
    let mut names = bucket.keys(&parts_prefix(busy()));
    names.retain(|key| key.ends_with(".json"));
    names
}

fn busy_parts(bucket: &MemoryBucket) -> usize {
    part_names(bucket).len()
}

fn parts(objects: u64) -> usize {
    usize::try_from(objects).unwrap().div_ceil(PART_OBJECTS)
}

#[tokio::test(start_paused = true)]
async fn a_period_longer_than_a_run_is_sealed_over_runs_as_one_run_seals_it() {
    let objects = 10 * PART_OBJECTS as u64;
    let signer = MemorySigner::new(KEY_ARN);
    let bucket = MemoryBucket::new();
    archive(&bucket, &signer, objects).await;
    // Every request takes 100 ms of tokio's paused clock: time moves by the requests alone.
    bucket.set_latency(Duration::from_millis(100));

    // When: runs of 14 s each (the sealer keeps 10 s in hand for a period, 5 s for a part).
    let mut runs = 0;
    loop {
        runs += 1;
        assert!(runs <= 20, "not sealed in 20 runs");
        let budget = Budget {
            deadline: Some(tokio::time::Instant::now() + Duration::from_secs(14)),
            margin: Duration::ZERO,
        };
        let report = Sealer {
            bucket: &bucket,
            signer: &signer,
            bucket_name: BUCKET,
            period: minute(),
        }
        .run(due(busy()), budget)
        .await;
        if report.failure.is_none() {
            assert_eq!(report.sealed.len(), 1);
            break;
        }
        assert_eq!(report.failure, Some(SealError::Deadline));
        assert!(bucket.current(&digest_key(busy())).is_none());
    }

    // Then: more than one run, each part once, and what one run makes of the period.
    assert!(
        runs > 2,
        "sealed in {runs} runs: the budget was not too small"
    );
    assert_eq!(busy_parts(&bucket), parts(objects));
    assert_written_once(&bucket);
    let (digest, log) = sealed(&bucket);
    let (alone, alone_log) = sealed_in_one_run(&signer, objects).await;
    assert_eq!(digest.objects.len(), usize::try_from(objects).unwrap());
    assert_eq!(digest, alone);
    assert_eq!(log, alone_log);
}

/// The next PUT under `prefix` is carried out but its answer is lost (a crash right after it).
fn lose_next_answer(bucket: &MemoryBucket, prefix: &str) {
    bucket.inject(Fault {
        operation: Operation::Put,
        prefix: prefix.into(),
        times: Some(1),
        effect: Effect::LoseAnswer(timed_out()),
    });
}

/// The next PUT under `prefix` fails: the run stops just before it.
fn stop_before_next_put(bucket: &MemoryBucket, prefix: &str) {
    bucket.inject(Fault {
        operation: Operation::Put,
        prefix: prefix.into(),
        times: Some(1),
        effect: Effect::Fail(timed_out()),
    });
}

#[tokio::test]
async fn a_run_stopped_after_each_kind_of_step_is_resumed_with_nothing_written_twice() {
    let objects = 4 * PART_OBJECTS as u64;
    let signer = MemorySigner::new(KEY_ARN);
    let bucket = MemoryBucket::new();
    archive(&bucket, &signer, objects).await;
    let run = || seal_at(&bucket, &signer, due(busy()));

    // Stopped after part 0, before its tiles.
    stop_before_next_put(&bucket, "log/tile/");
    assert!(run().await.failure.is_some());
    assert_eq!(busy_parts(&bucket), 1);
    // Stopped by a crash right after part 1 was written (its answer lost).
    lose_next_answer(&bucket, &part_key(busy(), 1, 0));
    assert!(run().await.failure.is_some());
    assert_eq!(busy_parts(&bucket), 2);
    // Stopped after part 1's tiles and rows, before part 2.
    stop_before_next_put(&bucket, &part_key(busy(), 2, 0));
    assert!(run().await.failure.is_some());
    assert_eq!(busy_parts(&bucket), 2);
    // Stopped after every part, before the digest.
    stop_before_next_put(&bucket, "digest/");
    assert!(run().await.failure.is_some());
    assert_eq!(busy_parts(&bucket), parts(objects));
    assert!(bucket.current(&digest_key(busy())).is_none());
    // Stopped after the digest, before its checkpoint.
    stop_before_next_put(&bucket, CHECKPOINTS_PREFIX);
    let report = run().await;
    assert!(report.failure.is_some());
    assert_eq!(report.sealed.len(), 1);
    // Resumed to the end.
    let report = run().await;
    assert_eq!(report.failure, None);
    assert_eq!(report.sealed, []);

    assert_written_once(&bucket);
    assert_eq!(sealed(&bucket), sealed_in_one_run(&signer, objects).await);
}

/// An object put at `key` by someone else than the sealer.
async fn put(
    bucket: &MemoryBucket,
    key: String,
    body: &[u8],
    metadata: Vec<(&'static str, String)>,
) {
    let object = NewObject {
        key,
        body: Bytes::copy_from_slice(body),
        content_type: "application/json",
        sha256: sha256(body),
        metadata,
    };
    bucket.put_if_absent(object).await.unwrap();
}

#[tokio::test]
async fn parts_planted_under_state_seal_are_passed_over() {
    let objects = 2 * PART_OBJECTS as u64;
    let signer = MemorySigner::new(KEY_ARN);
    let bucket = MemoryBucket::new();
    archive(&bucket, &signer, objects).await;
    // Given: at part 0's name, a body that no key signed; at part 1's, a part signed by another
    // key.
    let zero = part_key(busy(), 0, 0);
    put(
        &bucket,
        zero.clone(),
        br#"{"format":"audit-receiver/seal-part/1"}"#,
        vec![],
    )
    .await;
    let one = part_key(busy(), 1, 0);
    let other = MemorySigner::new(KEY_ARN);
    let body = br#"{"format":"audit-receiver/seal-part/1","number":1}"#;
    let signature = other
        .sign(part_signing_string(&one, &sha256(body)).as_bytes())
        .unwrap();
    put(
        &bucket,
        one.clone(),
        body,
        vec![("signature", hex(&signature))],
    )
    .await;

    // When: sealed.
    let report = seal_at(&bucket, &signer, due(busy())).await;

    // Then: sealed whole at the alternate names, as without them.
    assert_eq!(report.failure, None);
    assert_eq!(report.sealed.len(), 1);
    assert_eq!(
        part_names(&bucket),
        [part_key(busy(), 0, 1), zero, part_key(busy(), 1, 1), one]
    );
    assert_eq!(sealed(&bucket), sealed_in_one_run(&signer, objects).await);
}
