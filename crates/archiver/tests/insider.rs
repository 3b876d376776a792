//! The archiver's write path against someone who can write to the bucket, and against writes that
//! land late: a name taken ahead of time, planted markers, an object that lands after its
//! marker's writeBy, a bisected half that Lambda gives up on, a retry with more records than the
//! attempt before it. What counts is what the sealer lists as the trail: an object whose oldest
//! version names a marker that attests its SHA-256, and that no void marker names.

mod support;

use std::time::Duration;

use audit_archiver::Handler;
use audit_archiver::batch::Settings;
use audit_archiver::budget::Budget;
use audit_archiver::clock::ManualClock;
use audit_archiver::encode::gzip_lines;
use audit_archiver::event::{StreamEvent, StreamRecord, read_records};
use audit_archiver::marker::{MarkedObject, Marker, RunEntry, marker_key};
use audit_archiver::objects::encode;
use audit_archiver::report::{BatchReport, Failure};
use audit_aws::error::{AwsError, ErrorKind};
use audit_aws::s3::memory::{Effect, Fault, MemoryBucket, Operation};
use audit_aws::s3::{Bucket, Created, NewObject};
use audit_model::archive::{MARKER_METADATA, ObjectKey, ObjectKind, PeriodLength, void_key};
use audit_model::digest::{hex, sha256};
use audit_model::line::item_line;
use bytes::Bytes;
use serde_json::Value;
use support::*;

fn run_entry(seq: u64) -> RunEntry {
    RunEntry(sequence_number(seq), event_id(seq))
}

/// The key of the trail object attempt `attempt` writes at `now` for a run whose first event to
/// write is `seq`.
fn trail_key(now: &str, seq: u64, attempt: u32) -> String {
    ObjectKey::new(
        ObjectKind::Trail,
        at(now),
        PeriodLength::default(),
        &sequence_number(seq),
        attempt,
    )
    .expect("a key")
    .to_string()
}

/// Puts `body` at `key` as anyone with s3:PutObject could (S3 checks the SHA-256 it is given).
async fn plant(
    bucket: &MemoryBucket,
    key: &str,
    body: Vec<u8>,
    metadata: Vec<(&'static str, String)>,
) {
    let created = bucket
        .put_if_absent(NewObject {
            key: key.to_owned(),
            sha256: sha256(&body),
            body: Bytes::from(body),
            content_type: "application/octet-stream",
            metadata,
        })
        .await
        .expect("planted");
    assert!(matches!(created, Created::New { .. }));
}

/// The messageIds of every trail line the sealer would list as the trail, sorted (duplicates
/// kept): objects whose oldest version names a marker whose oldest version attests its bytes,
/// and that no void marker names.
fn attested_ids(bucket: &MemoryBucket) -> Vec<String> {
    let mut ids = Vec::new();
    for key in bucket.keys("trail/") {
        let Some(oldest) = bucket.versions(&key).into_iter().next() else {
            continue;
        };
        let Some((_, named)) = oldest.metadata.iter().find(|(n, _)| *n == MARKER_METADATA) else {
            continue;
        };
        let Some(marker) = bucket
            .versions(named)
            .into_iter()
            .next()
            .and_then(|v| Marker::from_json(&v.body).ok())
        else {
            continue;
        };
        if !marker.attests(&key, &hex(&sha256(&oldest.body)))
            || !bucket.keys(&void_key(&key)).is_empty()
        {
            continue;
        }
        for line in gunzip_lines(&oldest.body) {
            let value: Value = serde_json::from_str(&line).expect("a JSON line");
            ids.push(value["messageId"].as_str().unwrap_or_default().to_owned());
        }
    }
    ids.sort();
    ids
}

fn conflict_keys(report: &BatchReport) -> Vec<&str> {
    report.conflicts.iter().map(|c| c.key.as_str()).collect()
}

#[tokio::test]
async fn every_object_names_the_marker_written_before_it_which_lists_its_sha256() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let mut records = inserts(1..5);
    records.push(modify(5, "m-1"));
    let report = archive(&bucket, &clock, records).await;
    assert_eq!(report.failed_from, None, "{:?}", report.failure);
    let run_marker = marker_key(&run_entry(1), 0).unwrap();
    let marker = Marker::from_json(&bucket.current(&run_marker).unwrap().body).unwrap();
    for prefix in ["trail/", "tamper/"] {
        let key = &bucket.keys(prefix)[0];
        let object = bucket.current(key).unwrap();
        assert!(
            object
                .metadata
                .contains(&(MARKER_METADATA, run_marker.clone())),
            "{key}: {:?}",
            object.metadata
        );
        assert!(marker.attests(key, &hex(&sha256(&object.body))));
    }
    assert_eq!(attested_ids(&bucket), ids(1..5));
}

#[tokio::test]
async fn a_name_taken_by_other_bytes_is_an_archive_conflict_and_the_retry_archives_under_another() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let squatted = trail_key(TEN, 1, 0);
    let mut forged = item("m-1");
    forged.insert(
        "auditText".into(),
        serde_json::json!({"S": "nothing happened"}),
    );
    plant(
        &bucket,
        &squatted,
        gzip_lines([item_line(&forged).as_str()]).unwrap(),
        Vec::new(),
    )
    .await;

    let first = archive(&bucket, &clock, inserts(1..6)).await;
    assert_eq!(first.failed_from, Some(0), "the records fail, not archived");
    assert_eq!(
        first.failure,
        Some(Failure::ArchiveConflict(squatted.clone()))
    );
    assert!(conflict_keys(&first).contains(&squatted.as_str()));
    assert_eq!(first.archived, 0);

    let retry = archive(&bucket, &clock, inserts(1..6)).await;
    assert_eq!(retry.failed_from, None, "{:?}", retry.failure);
    assert_eq!(
        attested_ids(&bucket),
        ids(1..6),
        "each event once, none forged"
    );
    assert!(
        bucket.keys("trail/").contains(&trail_key(TEN, 1, 1)),
        "the next attempt number: another name"
    );
}

#[tokio::test]
async fn a_retry_with_more_records_than_the_object_at_its_name_fails_the_extra_records() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    // An earlier attempt's object of three of the records (its own lines) holds the name a retry
    // of six would write.
    let three: Vec<String> = (1..4)
        .map(|s| item_line(&item(&format!("m-{s}"))))
        .collect();
    let taken = trail_key(TEN, 1, 0);
    plant(
        &bucket,
        &taken,
        gzip_lines(three.iter().map(String::as_str)).unwrap(),
        Vec::new(),
    )
    .await;
    let report = archive(&bucket, &clock, inserts(1..7)).await;
    assert_eq!(
        report.failed_from,
        Some(0),
        "4-6 are in no object: {report:?}"
    );
    assert_eq!(report.archived, 0);
    let retry = archive(&bucket, &clock, inserts(1..7)).await;
    assert_eq!(retry.failed_from, None, "{:?}", retry.failure);
    assert_eq!(attested_ids(&bucket), ids(1..7));
}

/// Plants `marker` as attempt 0 of the run starting at record 1, and `object` (with metadata
/// naming that marker) at `object_key`, then archives records 1-5 and a MODIFY.
async fn with_planted(
    marker: Vec<u8>,
    object: Option<(String, Vec<u8>)>,
) -> (MemoryBucket, BatchReport) {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let key = marker_key(&run_entry(1), 0).unwrap();
    plant(&bucket, &key, marker, Vec::new()).await;
    if let Some((object_key, body)) = object {
        plant(
            &bucket,
            &object_key,
            body,
            vec![(MARKER_METADATA, key.clone())],
        )
        .await;
    }
    let mut records = inserts(1..6);
    records.push(modify(6, "m-1"));
    let report = archive(&bucket, &clock, records).await;
    (bucket, report)
}

fn planted_marker(version: u32, object_key: &str, sha256: &str) -> Vec<u8> {
    let marker = Marker {
        version,
        run: (1..7).map(run_entry).collect(),
        objects: vec![MarkedObject {
            key: object_key.to_owned(),
            events: (0..6).collect(),
            sha256: sha256.to_owned(),
        }],
        write_by: 0,
        repair: false,
    };
    marker.to_json()
}

fn assert_all_archived(bucket: &MemoryBucket, report: &BatchReport) {
    assert_eq!(report.failed_from, None, "{:?}", report.failure);
    assert_eq!(report.already_archived, 0, "nothing skipped");
    assert_eq!(report.tampered.len(), 1, "the MODIFY alarms");
    // A planted object attested by a planted marker is the bucket policy's to refuse; here its
    // lines hold no event, and every real event is in the archiver's objects once.
    let real: Vec<String> = attested_ids(bucket)
        .into_iter()
        .filter(|id| !id.is_empty())
        .collect();
    assert_eq!(real, ids(1..6));
    assert_eq!(lines(bucket, "tamper/").len(), 1);
}

#[tokio::test]
async fn a_planted_marker_of_version_1_makes_nothing_skipped() {
    let object_key = "trail/dt=2026-11-22/hour=09/p1795338000-planted-a0.jsonl.gz".to_owned();
    let body = gzip_lines(["{}"]).unwrap();
    let (bucket, report) =
        with_planted(planted_marker(1, &object_key, ""), Some((object_key, body))).await;
    assert_all_archived(&bucket, &report);
}

#[tokio::test]
async fn a_planted_marker_listing_an_object_with_other_bytes_makes_nothing_skipped() {
    let object_key = trail_key("2026-11-22T09:00:00Z", 1, 0);
    let body = gzip_lines(["{}"]).unwrap();
    let (bucket, report) = with_planted(
        planted_marker(2, &object_key, &hex(&[7u8; 32])),
        Some((object_key.clone(), body)),
    )
    .await;
    assert_all_archived(&bucket, &report);
    assert!(conflict_keys(&report).contains(&object_key.as_str()));
}

#[tokio::test]
async fn a_planted_marker_and_object_whose_sha256_it_names_make_nothing_skipped() {
    // The planted object's bytes match the planted marker, and its metadata names that marker:
    // only its lines tell it from the archiver's.
    let object_key = trail_key("2026-11-22T09:00:00Z", 1, 0);
    let body = gzip_lines(["{}", "{}", "{}", "{}", "{}", "{}"]).unwrap();
    let sha = hex(&sha256(&body));
    let (bucket, report) = with_planted(
        planted_marker(2, &object_key, &sha),
        Some((object_key.clone(), body)),
    )
    .await;
    assert_all_archived(&bucket, &report);
    assert!(conflict_keys(&report).contains(&object_key.as_str()));
}

#[tokio::test]
async fn a_marker_that_does_not_parse_is_a_conflict_and_the_run_goes_on_with_the_next_attempt() {
    let (bucket, report) = with_planted(b"not a marker".to_vec(), None).await;
    assert_all_archived(&bucket, &report);
    let foreign = marker_key(&run_entry(1), 0).unwrap();
    assert_eq!(conflict_keys(&report), vec![foreign.as_str()]);
    assert!(bucket.keys("trail/").contains(&trail_key(TEN, 1, 1)));
}

#[tokio::test]
async fn an_object_that_lands_after_its_writeby_is_void_and_its_events_are_archived_once() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    // The first attempt's object write times out; S3 lands it later, after the retry.
    time_out_next_put(&bucket, "trail/");
    let first = archive(&bucket, &clock, inserts(1..6)).await;
    assert_eq!(first.failed_from, Some(0));
    let late_key = trail_key(TEN, 1, 0);
    assert!(bucket.keys("trail/").is_empty());

    clock.advance(Duration::from_secs(60));
    let retry = archive(&bucket, &clock, inserts(1..6)).await;
    assert_eq!(retry.failed_from, None, "{:?}", retry.failure);
    assert_eq!(retry.voided, vec![late_key.clone()]);
    assert!(
        bucket.current(&void_key(&late_key)).is_some(),
        "void before the events are archived anew"
    );

    // The late write lands: the bytes and metadata the first attempt sent.
    let reads = read_records(StreamEvent {
        records: inserts(1..6),
    });
    let records: Vec<&StreamRecord> = reads
        .iter()
        .filter_map(|r| r.record.as_ref().ok())
        .collect();
    let encoded = encode(&records).unwrap();
    let request = encoded[0].request(late_key.clone(), &marker_key(&run_entry(1), 0).unwrap());
    assert!(matches!(
        bucket.put_if_absent(request).await,
        Ok(Created::New { .. })
    ));
    assert_eq!(bucket.keys("trail/").len(), 2, "both objects exist");
    assert_eq!(attested_ids(&bucket), ids(1..6), "each event counts once");

    // A later retry of the same run does not count the late object either.
    let again = archive(&bucket, &clock, inserts(1..6)).await;
    assert_eq!(again.failed_from, None);
    assert_eq!((again.archived, again.already_archived), (0, 5));
    assert_eq!(attested_ids(&bucket), ids(1..6));
}

#[tokio::test]
async fn an_object_the_sealer_voided_as_late_counts_for_a_retry_which_writes_no_third_copy() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    // The first attempt's object write times out and is given up on by the function...
    time_out_next_put(&bucket, "trail/");
    let first = archive(&bucket, &clock, inserts(1..6)).await;
    assert_eq!(first.failed_from, Some(0));
    // ...S3 lands it after its period was sealed, and the sealer, finding it late, voids it and
    // archives its lines again in an open period (seal.rs) before the stream's retry comes.
    let late_key = trail_key(TEN, 1, 0);
    let reads = read_records(StreamEvent {
        records: inserts(1..6),
    });
    let records: Vec<&StreamRecord> = reads
        .iter()
        .filter_map(|r| r.record.as_ref().ok())
        .collect();
    let encoded = encode(&records).unwrap();
    let request = encoded[0].request(late_key.clone(), &marker_key(&run_entry(1), 0).unwrap());
    assert!(matches!(
        bucket.put_if_absent(request).await,
        Ok(Created::New { .. })
    ));
    let void = br#"{"version":1,"voidedAt":"2026-11-22T11:00:40.000Z","by":"seal"}"#.to_vec();
    assert!(matches!(
        bucket
            .put_if_absent(NewObject {
                key: void_key(&late_key),
                sha256: sha256(&void),
                body: Bytes::from(void),
                content_type: "application/json",
                metadata: Vec::new(),
            })
            .await,
        Ok(Created::New { .. })
    ));

    clock.advance(Duration::from_secs(3600));
    let retry = archive(&bucket, &clock, inserts(1..6)).await;
    assert_eq!(retry.failed_from, None, "{:?}", retry.failure);
    assert_eq!(
        (retry.archived, retry.already_archived),
        (0, 5),
        "the sealer's copy holds them: a retry writing them again would make a third"
    );
    assert!(retry.voided.is_empty());
    assert_eq!(bucket.keys("trail/"), vec![late_key]);
}

#[tokio::test]
async fn a_bisected_first_half_given_up_leaves_the_second_half_what_the_first_attempt_wrote() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let handler = Handler::new(&bucket, Settings::default()).with_clock(&clock);
    let records = inserts(1..11);
    // The first attempt writes everything, then dies: Lambda bisects.
    let _lost = handler.handle(event(records.clone())).await;
    assert_eq!(archived_ids(&bucket), ids(1..11));
    // The first half fails on every try (its markers cannot be read) and is given up.
    bucket.inject(Fault {
        operation: Operation::Get,
        prefix: "state/".into(),
        times: None,
        effect: Effect::Fail(AwsError::from_answer(503, "SlowDown", "reduce your rate")),
    });
    for _ in 0..3 {
        let response = handler.handle(event(records[..5].to_vec())).await.unwrap();
        assert_eq!(failed(&response).len(), 5);
    }
    bucket.heal();
    // Lambda goes on at the record after the half: it finds the first attempt's objects.
    clock.advance(Duration::from_secs(3600));
    let response = handler.handle(event(records[5..].to_vec())).await.unwrap();
    assert!(failed(&response).is_empty(), "{response:?}");
    assert_eq!(bucket.keys("trail/").len(), 1, "nothing written again");
    assert_eq!(attested_ids(&bucket), ids(1..11), "each event once");
    // The carried marker lists the object with its SHA-256.
    let carried = Marker::from_json(
        &bucket
            .current(&marker_key(&run_entry(6), 0).unwrap())
            .unwrap()
            .body,
    )
    .unwrap();
    let key = &bucket.keys("trail/")[0];
    assert!(carried.attests(key, &hex(&sha256(&bucket.current(key).unwrap().body))));
}

#[tokio::test]
async fn a_given_up_quarter_leaves_the_next_quarter_what_the_first_attempt_wrote() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let handler = Handler::new(&bucket, Settings::default()).with_clock(&clock);
    let records = inserts(1..13);
    let _lost = handler.handle(event(records.clone())).await;
    // The first half (1-6) runs, finds everything archived, and dies before Lambda sees it; its
    // first half (1-3) is given up.
    let _lost = handler.handle(event(records[..6].to_vec())).await;
    bucket.inject(Fault {
        operation: Operation::Get,
        prefix: "state/".into(),
        times: None,
        effect: Effect::Fail(AwsError::from_answer(503, "SlowDown", "reduce your rate")),
    });
    let response = handler.handle(event(records[..3].to_vec())).await.unwrap();
    assert_eq!(failed(&response).len(), 3);
    bucket.heal();
    for part in [3..6, 6..12] {
        let response = handler.handle(event(records[part].to_vec())).await.unwrap();
        assert!(failed(&response).is_empty(), "{response:?}");
    }
    assert_eq!(bucket.keys("trail/").len(), 1, "nothing written again");
    assert_eq!(attested_ids(&bucket), ids(1..13));
}

#[tokio::test]
async fn a_failed_write_is_carried_to_where_lambda_resumes_and_counted_once_it_lands() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    // A TTL deletion first: the trail object's first event is record 2, where Lambda resumes.
    let mut records = vec![ttl_remove(1, "m-0")];
    records.extend(inserts(2..6));
    bucket.inject(Fault {
        operation: Operation::Put,
        prefix: "trail/".into(),
        times: Some(1),
        effect: Effect::LoseAnswer(AwsError::without_answer(ErrorKind::TimedOut, "timed out")),
    });
    let first = archive(&bucket, &clock, records).await;
    assert_eq!(first.failed_from, Some(1), "resumes at record 2");
    // Lambda delivers from record 2 on, with more records: the object written under the name the
    // retry would use holds 2-5 only.
    let report = archive(&bucket, &clock, inserts(2..9)).await;
    assert_eq!(report.failed_from, None, "{:?}", report.failure);
    assert_eq!(report.already_archived, 4);
    assert_eq!(attested_ids(&bucket), ids(2..9));
}

#[tokio::test]
async fn a_planted_marker_whose_writeby_is_far_ahead_does_not_hold_the_run_up() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let key = marker_key(&run_entry(1), 0).unwrap();
    let mut marker = Marker::from_json(&planted_marker(
        2,
        &trail_key("2026-11-22T09:00:00Z", 1, 0),
        &hex(&[7u8; 32]),
    ))
    .unwrap();
    marker.write_by = at("2027-01-01T00:00:00Z").timestamp_millis();
    plant(&bucket, &key, marker.to_json(), Vec::new()).await;
    let mut records = inserts(1..6);
    records.push(modify(6, "m-1"));
    let budget = Budget {
        deadline: Some(tokio::time::Instant::now() + Duration::from_secs(60)),
        margin: Duration::from_secs(1),
    };
    let report = archive_within(&bucket, &clock, records, budget).await;
    assert_all_archived(&bucket, &report);
    assert_eq!(conflict_keys(&report), vec![key.as_str()]);
}
