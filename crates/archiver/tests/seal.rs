//! Sealing against the in-memory bucket and key: which periods get a digest and when, what each
//! lists, that the digests form one chain whose signatures the key's public key checks, and that
//! a pause, a second sealer, an overwrite before sealing, a refused key and the deadline all leave
//! one chain with no gap.

mod planted;
mod support;

use std::time::Duration;

use audit_archiver::budget::Budget;
use audit_archiver::clock::{Clock, ManualClock};
use audit_archiver::seal::{SealError, Sealer, newest_sealable};
use audit_archiver::signer::memory::MemorySigner;
use audit_archiver::{Handler, handler::HandlerError};
use audit_aws::s3::memory::MemoryBucket;
use audit_model::archive::{Period, SEAL_DELAY};
use audit_model::digest::{
    Digest, SealedDigest, chain_break, digest_key, parse_digest_key, sha256, signing_string_of,
};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use lambda_runtime::{Context, LambdaEvent};
use planted::plant_attested;
use serde_json::json;
use support::at;
use support::seal::{BUCKET, KEY_ARN, minute, scheduled, seal_at, settings, stored_digest};

fn period(start: DateTime<Utc>) -> Period {
    minute().period_of(start)
}

/// What the archiver writes for records `first..first + count` at the clock's time: its marker
/// (version 2, naming the object with its SHA-256), then the trail object naming the marker in its
/// metadata `marker` (written here as the archiver writes them, so that sealing is tested on its
/// own). The object's key.
async fn archive(bucket: &MemoryBucket, clock: &ManualClock, first: u64, count: u64) -> String {
    plant_attested(bucket, clock.now(), minute(), first, count)
}

/// Every digest in the bucket, in period order, with its bytes' hash and its signature.
fn digests(bucket: &MemoryBucket) -> Vec<(Digest, SealedDigest)> {
    bucket
        .keys("digest/")
        .into_iter()
        .map(|key| stored_digest(&key, &bucket.current(&key).unwrap()))
        .collect()
}

/// The checks `auditctl verify` makes of the chain alone: consecutive periods, each linked to the
/// one before, each signature the key's.
fn assert_one_signed_chain(bucket: &MemoryBucket, signer: &MemorySigner) -> Vec<Digest> {
    let all = digests(bucket);
    let mut before: Option<&SealedDigest> = None;
    for (i, (digest, sealed)) in all.iter().enumerate() {
        let p = parse_digest_key(&sealed.key, minute()).expect("a digest key");
        assert_eq!(digest.period(), Some(p));
        if i > 0 {
            let prev = parse_digest_key(&all[i - 1].1.key, minute()).unwrap();
            assert_eq!(prev.next(), p, "a gap before {}", sealed.key);
        } else {
            assert!(digest.previous.is_none(), "the chain's first digest");
        }
        assert_eq!(chain_break(digest, &sealed.key, before), None);
        let string = signing_string_of(digest, &sealed.key, &sealed.sha256);
        assert!(
            signer.verifies(string.as_bytes(), &sealed.signature),
            "{}'s signature",
            sealed.key
        );
        assert_eq!(digest.key_id, KEY_ARN);
        assert_eq!(digest.bucket, BUCKET);
        before = Some(sealed);
    }
    all.into_iter().map(|(d, _)| d).collect()
}

#[tokio::test]
async fn a_period_is_sealed_only_once_its_writes_cannot_be_in_flight() {
    let start = at("2026-11-22T10:15:00Z");
    let p = period(start);
    // At end + SEAL_DELAY - 1 s the period is not due; at end + SEAL_DELAY it is.
    let end = DateTime::from_timestamp(p.end(), 0).unwrap();
    let delay = chrono::Duration::from_std(SEAL_DELAY).unwrap();
    assert_eq!(
        newest_sealable(end + delay - chrono::Duration::seconds(1), minute()),
        Period {
            start: p.start - 60,
            length: minute()
        }
    );
    assert_eq!(newest_sealable(end + delay, minute()), p);
}

#[tokio::test]
async fn an_empty_archive_starts_its_chain_at_the_newest_due_period() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let now = at("2026-11-22T10:16:40Z");
    let report = seal_at(&bucket, &signer, now).await;
    assert_eq!(report.failure, None);
    assert_eq!(
        bucket.keys("digest/"),
        [digest_key(period(at("2026-11-22T10:15:00Z")))]
    );
    let chain = assert_one_signed_chain(&bucket, &signer);
    assert_eq!(chain[0].objects, []);
    assert_eq!(chain[0].events, 0);
    assert_eq!(report.lag_seconds(now), 40);
}

#[tokio::test]
async fn every_period_from_the_first_object_on_gets_a_digest_empty_ones_included() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let clock = ManualClock::new(at("2026-11-22T10:15:10Z"));
    archive(&bucket, &clock, 1, 5).await;
    clock.set(at("2026-11-22T10:15:50Z"));
    archive(&bucket, &clock, 6, 3).await;
    // Two idle minutes, then more.
    clock.set(at("2026-11-22T10:18:05Z"));
    archive(&bucket, &clock, 9, 2).await;

    let report = seal_at(&bucket, &signer, at("2026-11-22T10:20:00Z")).await;
    assert_eq!(report.failure, None);
    assert_eq!(report.sealed.len(), 4, "10:15 to 10:18");
    let chain = assert_one_signed_chain(&bucket, &signer);
    let events: Vec<u64> = chain.iter().map(|d| d.events).collect();
    assert_eq!(events, [8, 0, 0, 2]);
    assert_eq!(chain[0].objects.len(), 2);
    for listed in chain.iter().flat_map(|d| &d.objects) {
        let version = bucket.current(&listed.key).unwrap();
        assert_eq!(listed.version_id, version.version_id);
        assert_eq!(
            listed.sha256,
            audit_model::digest::hex(&sha256(&version.body))
        );
        assert_eq!(listed.size, version.body.len() as u64);
    }
    // The 10:19 period is not due until 10:20:30; nothing is sealed twice.
    let again = seal_at(&bucket, &signer, at("2026-11-22T10:20:29Z")).await;
    assert_eq!(again.sealed, []);
    let later = seal_at(&bucket, &signer, at("2026-11-22T10:20:30Z")).await;
    assert_eq!(later.sealed.len(), 1);
    assert_one_signed_chain(&bucket, &signer);
}

#[tokio::test]
async fn a_pause_of_the_schedule_is_caught_up_in_order() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    seal_at(&bucket, &signer, at("2026-11-22T10:00:40Z")).await;
    // The schedule stops for five hours (more than the head window of 48 periods).
    let report = seal_at(&bucket, &signer, at("2026-11-22T15:00:40Z")).await;
    assert_eq!(report.failure, None);
    assert_eq!(report.sealed.len(), 300);
    let chain = assert_one_signed_chain(&bucket, &signer);
    assert_eq!(chain.len(), 301);
    assert_eq!(report.lag_seconds(at("2026-11-22T15:00:40Z")), 40);
}

#[tokio::test]
async fn a_second_sealer_does_not_fork_the_chain() {
    let bucket = MemoryBucket::new();
    // Two invocations at once, both with the digest key.
    let one = MemorySigner::new(KEY_ARN);
    seal_at(&bucket, &one, at("2026-11-22T10:00:40Z")).await;
    let now = at("2026-11-22T10:03:40Z");
    let (a, b) = tokio::join!(seal_at(&bucket, &one, now), seal_at(&bucket, &one, now));
    assert_eq!(a.failure, None);
    assert_eq!(b.failure, None);
    assert_eq!(bucket.keys("digest/").len(), 4);
    for key in bucket.keys("digest/") {
        assert_eq!(bucket.versions(&key).len(), 1, "{key} written once");
    }
    // Each digest verifies with the key of whichever sealer wrote it; the links hold.
    let all = digests(&bucket);
    for window in all.windows(2) {
        assert_eq!(
            chain_break(&window[1].0, &window[1].1.key, Some(&window[0].1)),
            None
        );
    }
}

#[tokio::test]
async fn a_digest_lists_the_version_the_archiver_wrote_not_a_later_overwrite() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let clock = ManualClock::new(at("2026-11-22T10:15:10Z"));
    archive(&bucket, &clock, 1, 3).await;
    let key = bucket.keys("trail/")[0].clone();
    let original = bucket.current(&key).unwrap();
    bucket.overwrite(&key, Bytes::from_static(b"forged"));
    // A key that is not the archiver's in the period's place, and a deleted one.
    bucket.overwrite(
        "trail/dt=2026-11-22/hour=10/p1795342500-x-a0.jsonl.gz",
        Bytes::from_static(b"x"),
    );
    seal_at(&bucket, &signer, at("2026-11-22T10:16:30Z")).await;
    let chain = assert_one_signed_chain(&bucket, &signer);
    assert_eq!(chain[0].objects.len(), 1);
    assert_eq!(chain[0].objects[0].version_id, original.version_id);
    assert_eq!(chain[0].events, 3);
    // The key that is not the archiver's is on record, never part of the trail.
    assert_eq!(
        chain[0]
            .unattested
            .iter()
            .map(|u| (u.key.as_str(), u.reason.as_str()))
            .collect::<Vec<_>>(),
        [(
            "trail/dt=2026-11-22/hour=10/p1795342500-x-a0.jsonl.gz",
            "neither gzip nor carrying an events count"
        )]
    );
}

#[tokio::test]
async fn a_refused_key_seals_nothing_and_the_next_run_goes_on_from_the_chain() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    seal_at(&bucket, &signer, at("2026-11-22T10:00:40Z")).await;
    signer.refuse(1);
    let now = at("2026-11-22T10:05:40Z");
    let refused = seal_at(&bucket, &signer, now).await;
    assert!(matches!(refused.failure, Some(SealError::Sign(_))));
    assert_eq!(refused.sealed, []);
    assert_eq!(refused.left, 5);
    assert_eq!(
        refused.lag_seconds(now),
        340,
        "from the newest digest's end"
    );
    let later = seal_at(&bucket, &signer, now).await;
    assert_eq!(later.failure, None);
    assert_eq!(later.sealed.len(), 5);
    assert_one_signed_chain(&bucket, &signer);
}

#[tokio::test]
async fn the_deadline_stops_sealing_between_periods() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    seal_at(&bucket, &signer, at("2026-11-22T10:00:40Z")).await;
    let budget = Budget {
        deadline: Some(tokio::time::Instant::now() + Duration::from_secs(5)),
        margin: Duration::ZERO,
    };
    let report = Sealer {
        bucket: &bucket,
        signer: &signer,
        bucket_name: BUCKET,
        period: minute(),
    }
    .run(at("2026-11-22T10:05:40Z"), budget)
    .await;
    assert_eq!(report.failure, Some(SealError::Deadline));
    assert_eq!(report.sealed, []);
    assert_eq!(report.left, 5);
    assert_eq!(bucket.keys("digest/").len(), 1);
}

#[tokio::test]
async fn the_handler_seals_on_a_scheduled_event_and_refuses_unknown_events() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let clock = ManualClock::new(at("2026-11-22T10:16:40Z"));
    let settings = settings();
    let handler = Handler::new(&bucket, settings)
        .with_clock(&clock)
        .with_digests(BUCKET, &signer);
    let scheduled = scheduled();
    let answer = handler
        .handle_any(LambdaEvent::new(scheduled.clone(), Context::default()))
        .await
        .unwrap();
    let key = digest_key(period(at("2026-11-22T10:15:00Z")));
    assert_eq!(answer["sealed"], json!([key]));
    assert_eq!(answer["head"], json!(key));
    assert_eq!(answer["lagSeconds"], 40);
    assert_eq!(answer["failure"], json!(null));
    assert!(matches!(
        handler
            .handle_any(LambdaEvent::new(json!({"detail": {}}), Context::default()))
            .await,
        Err(HandlerError::UnknownEvent)
    ));
    // Without a key: a scheduled run fails and says which variable to set.
    let keyless = Handler::new(&bucket, settings).with_clock(&clock);
    clock.set(at("2026-11-22T10:17:40Z"));
    let answer = keyless
        .handle_any(LambdaEvent::new(scheduled, Context::default()))
        .await
        .unwrap();
    assert!(
        answer["failure"]
            .as_str()
            .unwrap()
            .contains("DIGEST_KEY_ID"),
        "{answer}"
    );
    let _ = clock.now();
}

#[tokio::test]
async fn a_run_with_nothing_due_since_the_processs_last_run_reads_nothing() {
    // docs/archive.md "Digests": an idle run (nothing due since this process's last run sealed
    // up to its head) makes no request. Shown by a bucket that refuses every request: the idle
    // run answers as before; the next run with a period due reads and fails.
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let clock = ManualClock::new(at("2026-11-22T10:16:40Z"));
    let handler = Handler::new(&bucket, settings())
        .with_clock(&clock)
        .with_digests(BUCKET, &signer);
    let run = || handler.handle_any(LambdaEvent::new(scheduled(), Context::default()));
    let sealed = run().await.unwrap();
    let key = digest_key(period(at("2026-11-22T10:15:00Z")));
    assert_eq!(sealed["sealed"], json!([key]));

    bucket.set_missing(true);
    clock.set(at("2026-11-22T10:17:20Z"));
    let idle = run().await.unwrap();
    assert_eq!(idle["failure"], json!(null), "{idle}");
    assert_eq!(idle["sealed"], json!([]));
    assert_eq!(idle["head"], json!(key));
    assert_eq!(idle["treeSize"], sealed["treeSize"]);
    assert_eq!(idle["left"], 0);
    assert_eq!(idle["lagSeconds"], 80);

    // 10:17:40: the period of 10:16 is due; the run reads the bucket (here refused) and says so,
    // and the run after it reads again rather than trusting a head it could not confirm.
    clock.set(at("2026-11-22T10:17:40Z"));
    let due = run().await.unwrap();
    assert!(due["failure"].is_string(), "{due}");
    clock.set(at("2026-11-22T10:17:50Z"));
    bucket.set_missing(false);
    let after = run().await.unwrap();
    assert_eq!(after["failure"], json!(null), "{after}");
    assert_eq!(
        after["sealed"],
        json!([digest_key(period(at("2026-11-22T10:16:00Z")))])
    );
}

#[tokio::test]
async fn the_chain_goes_on_from_the_digest_as_sealed_not_from_a_version_put_over_it() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    seal_at(&bucket, &signer, at("2026-11-22T10:01:40Z")).await;
    let head = bucket.keys("digest/").pop().unwrap();
    let sealed = digests(&bucket).pop().unwrap().1;
    // Someone writes a newer version over the newest digest, keeping its signature metadata.
    let original = bucket.current(&head).unwrap();
    bucket.overwrite_with(
        &head,
        Bytes::from_static(b"{\"forged\":true}"),
        original.metadata.clone(),
    );
    let report = seal_at(&bucket, &signer, at("2026-11-22T10:02:40Z")).await;
    assert_eq!(report.failure, None);
    assert_eq!(report.sealed.len(), 1);
    let next = Digest::parse(&bucket.current(&report.sealed[0].key).unwrap().body).unwrap();
    assert_eq!(
        chain_break(&next, &report.sealed[0].key, Some(&sealed)),
        None,
        "linked to the digest as sealed"
    );
}

#[tokio::test]
async fn a_digest_hidden_by_a_delete_marker_is_chained_on_not_sealed_twice() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    seal_at(&bucket, &signer, at("2026-11-22T10:01:40Z")).await;
    seal_at(&bucket, &signer, at("2026-11-22T10:02:40Z")).await;
    let keys = bucket.keys("digest/");
    assert_eq!(keys.len(), 2);
    let hidden = keys[1].clone();
    let hidden_sealed = digests(&bucket).pop().unwrap().1;
    bucket.delete(&hidden);
    assert_eq!(
        audit_aws::s3::Bucket::list_keys(&bucket, "digest/", None, 1000)
            .await
            .unwrap()
            .len(),
        1,
        "hidden from a plain listing"
    );
    let report = seal_at(&bucket, &signer, at("2026-11-22T10:03:40Z")).await;
    assert_eq!(report.failure, None);
    assert_eq!(report.found, std::slice::from_ref(&hidden));
    assert_eq!(report.sealed.len(), 1);
    assert_eq!(
        bucket.versions(&hidden).len(),
        2,
        "its version and the marker, no second digest"
    );
    let next = Digest::parse(&bucket.current(&report.sealed[0].key).unwrap().body).unwrap();
    assert_eq!(
        chain_break(&next, &report.sealed[0].key, Some(&hidden_sealed)),
        None
    );
}
