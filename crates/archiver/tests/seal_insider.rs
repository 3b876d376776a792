//! Sealing against someone who can write to the bucket: whatever is planted in a period's place
//! is listed as unattested with its reason and never stops sealing; a taken digest name moves the
//! digest to an alternate name that the next digest links to; a digest the key did not sign is
//! never chained on, however it is named; an object that lands after its period was sealed is
//! archived again once, in the open period, and listed as late.

mod planted;
mod support;

use audit_archiver::seal::{LATE_PREFIX, SealReport};
use audit_archiver::signer::memory::MemorySigner;
use audit_archiver::telemetry::seal_metrics_document;
use audit_aws::error::AwsError;
use audit_aws::s3::memory::{Effect, Fault, MemoryBucket, Operation};
use audit_model::archive::{MARKER_METADATA, void_key};
use audit_model::digest::{
    Digest, SealedDigest, digest_key, digest_key_alternate, hex, parse_any_digest_key, sha256,
    signing_string_of,
};
use bytes::Bytes;
use planted::{Marking, plant, plant_attested, void};
use support::at;
use support::seal::{KEY_ARN, minute, period, seal, stored_digest};

/// The digest at `key` (its original version) and its link.
fn stored(bucket: &MemoryBucket, key: &str) -> (Digest, SealedDigest) {
    let version = bucket.versions(key).into_iter().next().expect("a digest");
    stored_digest(key, &version)
}

/// The chain as `verify` walks it: from the newest digest back along each `previous.key`, each
/// signature the key's and each link holding. Oldest first: (key, digest).
fn chain_from(bucket: &MemoryBucket, signer: &MemorySigner, head: &str) -> Vec<(String, Digest)> {
    let mut out = Vec::new();
    let mut key = Some(head.to_owned());
    while let Some(current) = key.take() {
        let (digest, sealed) = stored(bucket, &current);
        let string = signing_string_of(&digest, &current, &sealed.sha256);
        assert!(
            signer.verifies(string.as_bytes(), &sealed.signature),
            "{current} is signed by the key"
        );
        if let Some(link) = &digest.previous {
            let (_, before) = stored(bucket, &link.key);
            assert_eq!(
                link,
                &before.as_previous(),
                "{current} links to {}",
                link.key
            );
            let (p, _) = parse_any_digest_key(&link.key, minute()).unwrap();
            assert_eq!(Some(p.next()), digest.period(), "consecutive periods");
            key = Some(link.key.clone());
        }
        out.push((current, digest));
    }
    out.reverse();
    out
}

fn head(report: &SealReport) -> String {
    report.head.as_ref().expect("a head").0.clone()
}

#[tokio::test]
async fn whatever_is_planted_before_sealing_is_listed_unattested_with_its_reason() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let written = at("2026-11-22T10:15:10Z");
    let ours = plant(&bucket, written, minute(), 1, 3, Marking::Attested);
    let unmarked = plant(&bucket, written, minute(), 10, 2, Marking::NoMarker);
    let forged = plant(&bucket, written, minute(), 20, 2, Marking::OtherBytes);
    let old_marker = plant(&bucket, written, minute(), 30, 2, Marking::VersionOne);
    let voided = plant(&bucket, written, minute(), 40, 2, Marking::Attested);
    void(&bucket, &voided.key, "state/x/a1.json");
    // A stray that is neither gzip nor carries an events count, at an archive object's name.
    let stray = "trail/dt=2026-11-22/hour=10/p1795342500-0000000000000000000000000000000000000050-a0.jsonl.gz";
    bucket.overwrite(stray, Bytes::from_static(b"not gzip at all"));
    // A name that is not an archive object's, in the period's place.
    let odd = "trail/dt=2026-11-22/hour=10/p1795342500-odd.jsonl.gz";
    bucket.overwrite_with(
        odd,
        planted::trail_body(60, 1).1,
        vec![
            ("events", "1".into()),
            (MARKER_METADATA, ours.marker.clone()),
        ],
    );

    let report = seal(&bucket, &signer, "2026-11-22T10:16:40Z").await;
    assert_eq!(report.failure, None);
    assert_eq!(report.sealed.len(), 1);
    assert_eq!(report.unattested(), 6);
    let doc = seal_metrics_document(
        &report,
        std::time::Duration::ZERO,
        at("2026-11-22T10:16:40Z"),
        None,
    );
    assert_eq!(doc["Unattested"], 6);
    let (digest, _) = stored(&bucket, &digest_key(period("2026-11-22T10:15:00Z")));
    assert_eq!(
        digest
            .objects
            .iter()
            .map(|o| (o.key.as_str(), o.marker.as_str(), o.events))
            .collect::<Vec<_>>(),
        [(ours.key.as_str(), ours.marker.as_str(), 3)]
    );
    assert_eq!(digest.events, 3, "only attested events count");
    let reasons: Vec<(&str, &str)> = digest
        .unattested
        .iter()
        .map(|u| (u.key.as_str(), u.reason.as_str()))
        .collect();
    let voided_reason = format!(
        "voided: {} says its events were archived anew",
        void_key(&voided.key)
    );
    let forged_reason = format!(
        "its marker {} does not list it with this SHA-256",
        forged.marker
    );
    let old_reason = format!(
        "its marker {} does not list it with this SHA-256",
        old_marker.marker
    );
    let mut expected = vec![
        (unmarked.key.as_str(), "no marker names it"),
        (forged.key.as_str(), forged_reason.as_str()),
        (old_marker.key.as_str(), old_reason.as_str()),
        (voided.key.as_str(), voided_reason.as_str()),
        (stray, "neither gzip nor carrying an events count"),
        (odd, "its key is not an archive object key of this period"),
    ];
    expected.sort();
    assert_eq!(reasons, expected);
    let forged_entry = digest
        .unattested
        .iter()
        .find(|u| u.key == forged.key)
        .unwrap();
    assert_eq!(forged_entry.sha256, hex(&sha256(&forged.body)));
    assert_eq!(forged_entry.version_id, forged.version_id);
}

#[tokio::test]
async fn an_object_the_sealer_may_not_read_is_listed_unattested_and_sealing_goes_on() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let ours = plant_attested(&bucket, at("2026-11-22T10:15:10Z"), minute(), 1, 3);
    let locked = plant(
        &bucket,
        at("2026-11-22T10:15:20Z"),
        minute(),
        10,
        2,
        Marking::Attested,
    );
    bucket.inject(Fault {
        operation: Operation::Head,
        prefix: locked.key.clone(),
        times: None,
        effect: Effect::Fail(AwsError::from_answer(403, "AccessDenied", "denied")),
    });
    let report = seal(&bucket, &signer, "2026-11-22T10:17:40Z").await;
    assert_eq!(report.failure, None);
    assert_eq!(report.sealed.len(), 2, "10:15 and 10:16");
    let (digest, _) = stored(&bucket, &digest_key(period("2026-11-22T10:15:00Z")));
    assert_eq!(digest.objects.len(), 1);
    assert_eq!(digest.objects[0].key, ours);
    assert_eq!(digest.unattested.len(), 1);
    assert_eq!(digest.unattested[0].key, locked.key);
    assert_eq!(digest.unattested[0].reason, "not readable: AccessDenied");
}

#[tokio::test]
async fn a_taken_digest_name_moves_the_digest_to_an_alternate_that_the_next_links_to() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    seal(&bucket, &signer, "2026-11-22T10:01:40Z").await;
    // Before the sealer gets there: junk at 10:01's name, a digest signed by another key at its
    // first alternate.
    let p = period("2026-11-22T10:01:00Z");
    bucket.overwrite(&digest_key(p), Bytes::from_static(b"squatted"));
    let foreign = MemorySigner::new(KEY_ARN);
    let forged_body = Bytes::from_static(br#"{"format":"audit-receiver-digest/1"}"#);
    let signature = foreign.sign(b"anything").unwrap();
    bucket.overwrite_with(
        &digest_key_alternate(p, 1),
        forged_body,
        vec![("signature", hex(&signature))],
    );

    let report = seal(&bucket, &signer, "2026-11-22T10:03:40Z").await;
    assert_eq!(report.failure, None);
    let keys: Vec<&str> = report.sealed.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            digest_key_alternate(p, 2).as_str(),
            digest_key(p.next()).as_str()
        ]
    );
    let chain = chain_from(&bucket, &signer, &head(&report));
    assert_eq!(chain.len(), 3, "10:00, 10:01 at its alternate, 10:02");
    assert_eq!(
        chain[2].1.previous.as_ref().unwrap().key,
        digest_key_alternate(p, 2)
    );
    // The next run goes on from the chain, not from anything at the names it passed over.
    let later = seal(&bucket, &signer, "2026-11-22T10:04:40Z").await;
    assert_eq!(later.failure, None);
    assert_eq!(later.sealed.len(), 1);
    assert_eq!(chain_from(&bucket, &signer, &head(&later)).len(), 4);
}

#[tokio::test]
async fn a_head_the_key_did_not_sign_is_not_chained_on_and_its_periods_are_sealed_again() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    seal(&bucket, &signer, "2026-11-22T10:01:40Z").await;
    seal(&bucket, &signer, "2026-11-22T10:02:40Z").await;
    // The newest digest's only version is replaced by one signed with another key (as if the
    // bucket had no Object Lock): a well-formed digest, chained on the one before.
    let p = period("2026-11-22T10:01:00Z");
    let key = digest_key(p);
    let (digest, _) = stored(&bucket, &key);
    let original = bucket.versions(&key)[0].version_id.clone();
    bucket.remove_version(&key, &original);
    let foreign = MemorySigner::new(KEY_ARN);
    let body = digest.to_bytes();
    let signature = foreign
        .sign(signing_string_of(&digest, &key, &sha256(&body)).as_bytes())
        .unwrap();
    bucket.overwrite_with(
        &key,
        Bytes::from(body),
        vec![("signature", hex(&signature))],
    );

    let report = seal(&bucket, &signer, "2026-11-22T10:03:40Z").await;
    assert_eq!(report.failure, None, "sealing does not stop on it");
    let keys: Vec<&str> = report.sealed.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            digest_key_alternate(p, 1).as_str(),
            digest_key(p.next()).as_str()
        ]
    );
    let chain = chain_from(&bucket, &signer, &head(&report));
    assert_eq!(chain.len(), 3);
    assert_eq!(chain[0].0, digest_key(period("2026-11-22T10:00:00Z")));
}

#[tokio::test]
async fn planted_digest_keys_never_move_the_chain_or_its_start_however_many() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    // More stray keys than a listing page before the archive's first objects, and an unmarked
    // object in an earlier period: neither is where the chain starts.
    for i in 0..120 {
        bucket.overwrite(
            &format!("trail/dt=2026-11-22/hour=09/stray-{i:03}.jsonl.gz"),
            Bytes::from_static(b"x"),
        );
    }
    plant(
        &bucket,
        at("2026-11-22T10:05:10Z"),
        minute(),
        90,
        1,
        Marking::NoMarker,
    );
    plant_attested(&bucket, at("2026-11-22T10:15:10Z"), minute(), 1, 3);
    // A digest key earlier than everything, and one at a period to be sealed: not signed.
    let early = digest_key(period("2026-11-22T09:00:00Z"));
    bucket.overwrite(&early, Bytes::from_static(b"{}"));
    let planted_later = digest_key(period("2026-11-22T10:18:00Z"));
    bucket.overwrite(&planted_later, Bytes::from_static(b"{}"));

    let report = seal(&bucket, &signer, "2026-11-22T10:20:00Z").await;
    assert_eq!(report.failure, None);
    let chain = chain_from(&bucket, &signer, &head(&report));
    assert_eq!(
        chain[0].0,
        digest_key(period("2026-11-22T10:15:00Z")),
        "the oldest attested object's period"
    );
    assert_eq!(chain.len(), 4, "10:15 to 10:18");
    assert_eq!(
        chain[3].0,
        digest_key_alternate(period("2026-11-22T10:18:00Z"), 1)
    );

    // More than a page (1000) of planted digest names newer than the head: passed over, page by
    // page, down to the head the key signed.
    for minute_of in 19..=59 {
        let p = period(&format!("2026-11-22T10:{minute_of:02}:00Z"));
        for alternate in 1..=9 {
            bucket.overwrite(
                &digest_key_alternate(p, alternate),
                Bytes::from_static(b"{}"),
            );
        }
    }
    for hour in 11..=12 {
        for minute_of in 0..=59 {
            let p = period(&format!("2026-11-22T{hour}:{minute_of:02}:00Z"));
            for alternate in 1..=9 {
                bucket.overwrite(
                    &digest_key_alternate(p, alternate),
                    Bytes::from_static(b"{}"),
                );
            }
        }
    }
    assert!(bucket.keys("digest/").len() > 1000);
    let later = seal(&bucket, &signer, "2026-11-22T13:00:40Z").await;
    assert_eq!(later.failure, None);
    assert_eq!(
        later.sealed.len(),
        41 + 120,
        "10:19 to 12:59, each at its own name"
    );
    assert_eq!(
        later.sealed[0].key,
        digest_key(period("2026-11-22T10:19:00Z"))
    );
    let chain = chain_from(&bucket, &signer, &head(&later));
    assert_eq!(chain.len(), 4 + 161);
}

#[tokio::test]
async fn an_object_landing_after_its_period_was_sealed_is_archived_again_once() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    plant_attested(&bucket, at("2026-11-22T10:15:10Z"), minute(), 1, 3);
    let first = seal(&bucket, &signer, "2026-11-22T10:16:40Z").await;
    assert_eq!(first.late(), 0);
    // A write of 10:15, attested by its marker, lands after 10:15 was sealed.
    let late = plant(
        &bucket,
        at("2026-11-22T10:15:20Z"),
        minute(),
        10,
        2,
        Marking::Attested,
    );

    let report = seal(&bucket, &signer, "2026-11-22T10:17:40Z").await;
    assert_eq!(report.failure, None);
    assert_eq!(report.late(), 1);
    let doc = seal_metrics_document(
        &report,
        std::time::Duration::ZERO,
        at("2026-11-22T10:17:40Z"),
        None,
    );
    assert_eq!(doc["LateObject"], 1);
    let (digest, _) = stored(&bucket, &report.sealed[0].key);
    assert_eq!(digest.late.len(), 1);
    let entry = &digest.late[0];
    assert_eq!(entry.key, late.key);
    assert_eq!(entry.version_id, late.version_id);
    assert_eq!(entry.sha256, hex(&sha256(&late.body)));
    assert_eq!(entry.events, 2);
    // Voided by the sealer, its lines archived again in the open period (10:17), attested.
    let void_body = bucket
        .current(&void_key(&late.key))
        .expect("a void marker")
        .body;
    assert!(
        std::str::from_utf8(&void_body)
            .unwrap()
            .contains(r#""by":"seal""#)
    );
    let again = bucket.current(&entry.archived_as).expect("archived again");
    assert!(
        entry
            .archived_as
            .starts_with("trail/dt=2026-11-22/hour=10/p1795342620-"),
        "{}",
        entry.archived_as
    );
    assert_eq!(
        again.body, late.body,
        "the same lines, encoded as the archiver encodes them"
    );
    let marker = again
        .metadata
        .iter()
        .find(|(n, _)| *n == MARKER_METADATA)
        .map(|(_, v)| v.clone())
        .unwrap();
    assert!(marker.starts_with(LATE_PREFIX), "{marker}");

    // Sealing 10:17 lists the new object as the trail; nothing is archived a second time.
    let next = seal(&bucket, &signer, "2026-11-22T10:18:40Z").await;
    assert_eq!(next.failure, None);
    assert_eq!(next.late(), 0);
    let (digest, _) = stored(&bucket, &next.sealed[0].key);
    assert_eq!(
        digest
            .objects
            .iter()
            .map(|o| (o.key.as_str(), o.marker.as_str(), o.events))
            .collect::<Vec<_>>(),
        [(entry.archived_as.as_str(), marker.as_str(), 2)]
    );
    for now in ["2026-11-22T10:19:40Z", "2026-11-22T10:25:40Z"] {
        let later = seal(&bucket, &signer, now).await;
        assert_eq!(later.failure, None);
        assert_eq!(later.late(), 0, "{now}");
    }
    assert_eq!(
        bucket.keys("trail/").len(),
        3,
        "ours, the late one, and its events once again"
    );
    chain_from(
        &bucket,
        &signer,
        &digest_key(period("2026-11-22T10:24:00Z")),
    );
}

#[tokio::test]
async fn a_late_object_voided_by_the_archiver_is_recorded_and_an_unmarked_one_left_alone() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    plant_attested(&bucket, at("2026-11-22T10:15:10Z"), minute(), 1, 3);
    seal(&bucket, &signer, "2026-11-22T10:16:40Z").await;
    let voided = plant(
        &bucket,
        at("2026-11-22T10:15:20Z"),
        minute(),
        10,
        2,
        Marking::Attested,
    );
    void(
        &bucket,
        &voided.key,
        "state/0000000000000000000000000000000000000010-x/a1.json",
    );
    let unmarked = plant(
        &bucket,
        at("2026-11-22T10:15:30Z"),
        minute(),
        20,
        2,
        Marking::NoMarker,
    );

    let report = seal(&bucket, &signer, "2026-11-22T10:17:40Z").await;
    assert_eq!(report.failure, None);
    let (digest, _) = stored(&bucket, &report.sealed[0].key);
    assert_eq!(
        digest
            .late
            .iter()
            .map(|l| (l.key.as_str(), l.archived_as.as_str()))
            .collect::<Vec<_>>(),
        [(voided.key.as_str(), "")]
    );
    assert!(!digest.late.iter().any(|l| l.key == unmarked.key));
    assert_eq!(bucket.keys("trail/").len(), 3, "nothing archived again");
    assert!(bucket.keys(LATE_PREFIX).is_empty());
}

#[tokio::test]
async fn a_late_object_voided_by_a_sealer_that_stopped_is_archived_again_by_the_next() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    plant_attested(&bucket, at("2026-11-22T10:15:10Z"), minute(), 1, 3);
    seal(&bucket, &signer, "2026-11-22T10:16:40Z").await;
    let late = plant(
        &bucket,
        at("2026-11-22T10:15:20Z"),
        minute(),
        10,
        2,
        Marking::Attested,
    );
    // A run voided it, then stopped before archiving it again.
    void(&bucket, &late.key, "seal");

    let report = seal(&bucket, &signer, "2026-11-22T10:17:40Z").await;
    assert_eq!(report.failure, None);
    let (digest, _) = stored(&bucket, &report.sealed[0].key);
    assert_eq!(digest.late.len(), 1);
    assert!(!digest.late[0].archived_as.is_empty());
    assert_eq!(
        bucket.current(&digest.late[0].archived_as).unwrap().body,
        late.body
    );
}
