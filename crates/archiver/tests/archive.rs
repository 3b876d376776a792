//! The archiver against its in-memory bucket: what lands under trail/ and tamper/, what is
//! counted, what Lambda is told to deliver again, and that no event is archived twice or lost
//! through retries, bisections, crashes, failures and the deadline.

mod support;

use std::time::Duration;

use audit_archiver::batch::{Ports, Settings, archive_batch};
use audit_archiver::budget::Budget;
use audit_archiver::clock::{Clock, ManualClock};
use audit_archiver::event::{StreamEvent, read_records};
use audit_archiver::report::Failure;
use audit_archiver::{Handler, handler::HandlerError};
use audit_aws::error::AwsError;
use audit_aws::s3::memory::{Effect, Fault, MemoryBucket, Operation};
use audit_model::archive::{ObjectKey, ObjectKind, PeriodLength};
use audit_model::line::item_line;
use serde_json::{Value, json};
use support::*;

#[tokio::test]
async fn a_trail_line_is_the_items_jsonl_line_and_keeps_every_type() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let mut image = item("m-types");
    image.insert(
        "types".into(),
        json!({"M": {"n": {"N": "-0.000100"}, "b": {"B": "AAEC/w=="}, "ss": {"SS": ["x", "y"]},
                     "ns": {"NS": ["1", "2.50"]}, "bs": {"BS": ["aGk="]}, "t": {"BOOL": true},
                     "z": {"NULL": true}, "l": {"L": [{"S": "a"}, {"N": "1e3"}]}}}),
    );
    let report = archive(
        &bucket,
        &clock,
        vec![insert_of(1, "m-types", image.clone())],
    )
    .await;
    assert_eq!(report.failed_from, None, "{:?}", report.failure);
    assert_eq!(report.archived, 1);
    let lines = lines(&bucket, "trail/");
    assert_eq!(lines, vec![item_line(&image)]);
    assert!(lines[0].contains(r#""n":-0.000100"#), "{}", lines[0]);
    assert!(lines[0].contains(r#""b":"AAEC/w==""#), "{}", lines[0]);
    assert!(
        lines[0].contains(r#""big":123456789012345678901234567890"#),
        "{}",
        lines[0]
    );
}

#[tokio::test]
async fn a_user_remove_is_tampering_and_a_ttl_remove_is_only_counted() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let report = archive(
        &bucket,
        &clock,
        vec![ttl_remove(1, "m-old"), user_remove(2, "m-1")],
    )
    .await;
    assert_eq!(report.failed_from, None, "{:?}", report.failure);
    assert_eq!(report.expired, 1);
    assert_eq!(report.tampered.len(), 1);
    assert_eq!(report.tampered[0].event_name, "REMOVE");
    assert_eq!(
        report.tampered[0].keys,
        r#"{"auditTime":"2026-11-22T10:00:00.000Z","messageId":"m-1"}"#
    );
    assert!(bucket.keys("trail/").is_empty());
    let tamper = lines(&bucket, "tamper/");
    assert_eq!(tamper.len(), 1, "only the user's removal: {tamper:?}");
    let line: Value = serde_json::from_str(&tamper[0]).unwrap();
    assert_eq!(line["eventName"], "REMOVE");
    assert_eq!(line["sequenceNumber"], sequence_number(2));
    assert_eq!(line["eventID"], event_id(2));
    assert_eq!(line["keys"]["messageId"], "m-1");
    assert_eq!(
        line["oldImage"]["auditText"],
        "user alice read invoice 4711 (m-1)"
    );
    assert_eq!(line["newImage"], Value::Null);
    assert_eq!(line["userIdentity"], Value::Null);
    assert_eq!(
        line["approximateCreationDateTime"],
        "2026-11-22T10:00:00.000Z"
    );
}

#[tokio::test]
async fn a_modify_is_archived_with_its_old_and_new_images() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let report = archive(&bucket, &clock, vec![modify(7, "m-1")]).await;
    assert_eq!(report.tampered.len(), 1);
    assert_eq!(report.archived, 1);
    let tamper = lines(&bucket, "tamper/");
    let line: Value = serde_json::from_str(&tamper[0]).unwrap();
    assert_eq!(line["eventName"], "MODIFY");
    assert_eq!(
        line["oldImage"]["auditText"],
        "user alice read invoice 4711 (m-1)"
    );
    assert_eq!(line["newImage"]["auditText"], "nothing happened");
    assert_eq!(line["oldImage"]["extra"]["amount"].to_string(), "12.50");
}

#[tokio::test]
async fn a_batch_of_all_three_writes_one_trail_and_one_tamper_object_in_stream_order() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let records = vec![
        insert(1),
        modify(2, "m-1"),
        insert(3),
        ttl_remove(4, "m-0"),
        user_remove(5, "m-3"),
        insert(6),
    ];
    let report = archive(&bucket, &clock, records).await;
    assert_eq!(report.failed_from, None, "{:?}", report.failure);
    assert_eq!(
        (report.archived, report.expired, report.tampered.len()),
        (5, 1, 2)
    );
    let trail = bucket.keys("trail/");
    let tamper = bucket.keys("tamper/");
    assert_eq!((trail.len(), tamper.len()), (1, 1));
    let trail_ids: Vec<Value> = lines(&bucket, "trail/")
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["messageId"].clone())
        .collect();
    assert_eq!(trail_ids, vec![json!("m-1"), json!("m-3"), json!("m-6")]);
    let tamper_names: Vec<Value> = lines(&bucket, "tamper/")
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["eventName"].clone())
        .collect();
    assert_eq!(tamper_names, vec![json!("MODIFY"), json!("REMOVE")]);
    // Each key names its hour, its period and its first event's sequence number.
    let key = ObjectKey::parse(&trail[0]).expect("a canonical key");
    assert_eq!(key.kind, ObjectKind::Trail);
    assert_eq!(key.written_hour, at("2026-11-22T10:00:00Z"));
    assert_eq!(key.period_start, at("2026-11-22T10:00:00Z").timestamp());
    assert_eq!(key.first_sequence, format!("{:0>40}", sequence_number(1)));
    let tamper_key = ObjectKey::parse(&tamper[0]).unwrap();
    assert_eq!(
        tamper_key.first_sequence,
        format!("{:0>40}", sequence_number(2))
    );
    // The object says how many events it holds, for the digest.
    let version = bucket.current(&trail[0]).unwrap();
    assert!(version.metadata.contains(&("events", "3".to_owned())));
}

#[tokio::test]
async fn objects_are_named_by_the_hour_and_the_period_they_are_written_in() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at("2026-11-22T10:59:59.900Z"));
    let event = StreamEvent {
        records: vec![insert(1)],
    };
    let settings = Settings {
        period: PeriodLength::new(60).unwrap(),
        ..Settings::default()
    };
    archive_batch(
        Ports {
            bucket: &bucket,
            clock: &clock,
        },
        &settings,
        &read_records(event),
        Budget::unlimited(),
    )
    .await;
    let key = ObjectKey::parse(&bucket.keys("trail/")[0]).unwrap();
    assert_eq!(key.written_hour, at("2026-11-22T10:00:00Z"));
    assert_eq!(key.period_start, at("2026-11-22T10:59:00Z").timestamp());
}

#[tokio::test]
async fn a_retried_batch_writes_nothing_new() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let batch = || {
        let mut records = inserts(1..21);
        records.push(modify(21, "m-1"));
        records
    };
    let first = archive(&bucket, &clock, batch()).await;
    assert_eq!(first.archived, 21);
    let puts = bucket.puts();
    let objects = bucket.keys("");
    clock.advance(Duration::from_secs(3600));
    let again = archive(&bucket, &clock, batch()).await;
    assert_eq!(again.failed_from, None, "{:?}", again.failure);
    assert_eq!((again.archived, again.already_archived), (0, 21));
    assert!(again.tampered.is_empty(), "already archived and alarmed");
    assert_eq!(bucket.puts(), puts, "not one PUT");
    assert_eq!(bucket.keys(""), objects);
}

#[tokio::test]
async fn a_crash_after_the_writes_then_bisected_halves_in_another_hour_archive_each_event_once() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let handler = Handler::new(&bucket, Settings::default()).with_clock(&clock);
    let mut records = inserts(1..101);
    records[40] = modify(41, "m-3");
    records[70] = user_remove(71, "m-4");
    // The invocation writes everything, then dies before Lambda sees its answer.
    let _lost = handler.handle(event(records.clone())).await;
    assert_eq!(lines(&bucket, "trail/").len(), 98);
    // Lambda bisects: the first half, then the second, an hour later; then the halves' halves.
    clock.advance(Duration::from_secs(3600));
    for range in [0..50, 50..100, 50..75, 75..100] {
        let response = handler
            .handle(event(records[range.clone()].to_vec()))
            .await
            .unwrap();
        assert!(failed(&response).is_empty(), "{range:?}: {response:?}");
    }
    let expected: Vec<u64> = (1..101).filter(|s| ![41, 71].contains(s)).collect();
    assert_eq!(archived_ids(&bucket), ids(expected));
    assert_eq!(lines(&bucket, "tamper/").len(), 2);
    assert_eq!(bucket.keys("trail/").len(), 1, "no second trail object");
}

#[tokio::test]
async fn a_crash_between_the_tamper_and_the_trail_object_then_halves_later_archive_each_event_once()
{
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let handler = Handler::new(&bucket, Settings::default()).with_clock(&clock);
    let mut records = inserts(1..11);
    records[1] = modify(2, "m-1");
    records[7] = modify(8, "m-1");
    // The tamper object is written; the trail object's write dies with the invocation.
    time_out_next_put(&bucket, "trail/");
    let _lost = handler.handle(event(records.clone())).await;
    assert_eq!(lines(&bucket, "tamper/").len(), 2);
    assert!(bucket.keys("trail/").is_empty());
    clock.advance(Duration::from_secs(2 * 3600));
    for range in [0..5, 5..10] {
        let response = handler
            .handle(event(records[range.clone()].to_vec()))
            .await
            .unwrap();
        assert!(failed(&response).is_empty(), "{range:?}: {response:?}");
    }
    assert_eq!(
        archived_ids(&bucket),
        ids([1, 3, 4, 5, 6, 7, 9, 10]),
        "every insert once"
    );
    assert_eq!(lines(&bucket, "tamper/").len(), 2, "the tamper events once");
    // The trail events went into objects of the hour they were written in.
    for key in bucket.keys("trail/") {
        let key = ObjectKey::parse(&key).unwrap();
        assert_eq!(key.written_hour, at("2026-11-22T12:00:00Z"));
    }
}

#[tokio::test]
async fn a_crash_after_the_marker_waits_until_the_lost_write_cannot_land_then_writes_once() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    time_out_next_put(&bucket, "trail/");
    let crashed = archive(&bucket, &clock, inserts(1..11)).await;
    assert_eq!(crashed.failed_from, Some(0));
    let run_markers = || {
        bucket
            .keys("state/")
            .into_iter()
            .filter(|k| k.contains(&event_id(1)))
            .count()
    };
    assert_eq!(run_markers(), 1, "the marker was written");
    let before = clock.now();
    let retry = archive(&bucket, &clock, inserts(1..11)).await;
    assert_eq!(retry.failed_from, None, "{:?}", retry.failure);
    assert!(
        clock.now() - before >= chrono::Duration::seconds(29),
        "waited for the marker's writeBy"
    );
    assert_eq!(archived_ids(&bucket), ids(1..11));
    assert_eq!(run_markers(), 2, "a second attempt");
}

#[tokio::test]
async fn a_failing_write_fails_every_record_and_marks_nothing_done() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let handler = Handler::new(&bucket, Settings::default()).with_clock(&clock);
    bucket.set_missing(true);
    let records = inserts(1..6);
    let response = handler.handle(event(records.clone())).await.unwrap();
    let all: Vec<String> = (1..6).map(sequence_number).collect();
    assert_eq!(failed(&response), all);
    bucket.set_missing(false);
    assert!(bucket.keys("").is_empty(), "no object, no marker");
    let response = handler.handle(event(records)).await.unwrap();
    assert!(failed(&response).is_empty());
    assert_eq!(archived_ids(&bucket), ids(1..6));
}

#[tokio::test]
async fn a_failed_tamper_write_fails_from_the_first_tamper_record_and_resumes_there_once() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let handler = Handler::new(&bucket, Settings::default()).with_clock(&clock);
    let mut records = inserts(1..9);
    records[3] = modify(4, "m-1");
    bucket.inject(Fault {
        operation: Operation::Put,
        prefix: "tamper/".into(),
        times: Some(1),
        effect: Effect::Fail(AwsError::from_answer(
            503,
            "SlowDown",
            "Please reduce your request rate.",
        )),
    });
    let response = handler.handle(event(records.clone())).await.unwrap();
    // Records 1-3 are archived; Lambda resumes at 4, the first one not archived.
    let from_four: Vec<String> = (4..9).map(sequence_number).collect();
    assert_eq!(failed(&response), from_four);
    assert_eq!(
        archived_ids(&bucket),
        ids(1..9)
            .into_iter()
            .filter(|id| id != "m-4")
            .collect::<Vec<_>>()
    );
    // Lambda delivers 4.. again (with a new record after them): only what is missing is written.
    let mut resumed = records[3..].to_vec();
    resumed.push(insert(9));
    let response = handler.handle(event(resumed)).await.unwrap();
    assert!(failed(&response).is_empty(), "{response:?}");
    let expected: Vec<u64> = (1..10).filter(|s| *s != 4).collect();
    assert_eq!(archived_ids(&bucket), ids(expected));
    assert_eq!(lines(&bucket, "tamper/").len(), 1);
}

#[tokio::test]
async fn a_record_that_cannot_be_archived_fails_it_and_those_after_it() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let handler = Handler::new(&bucket, Settings::default()).with_clock(&clock);
    let mut records = inserts(1..6);
    records[2]["dynamodb"]
        .as_object_mut()
        .unwrap()
        .remove("NewImage");
    let response = handler.handle(event(records)).await.unwrap();
    let from_three: Vec<String> = (3..6).map(sequence_number).collect();
    assert_eq!(failed(&response), from_three);
    assert_eq!(archived_ids(&bucket), ids([1, 2]));
}

#[tokio::test]
async fn a_record_without_a_sequence_number_fails_the_invocation() {
    let bucket = MemoryBucket::new();
    let handler = Handler::new(&bucket, Settings::default());
    let mut records = inserts(1..3);
    records[1]["dynamodb"]
        .as_object_mut()
        .unwrap()
        .remove("SequenceNumber");
    let result = handler.handle(event(records)).await;
    assert!(matches!(
        result,
        Err(HandlerError::MissingSequenceNumber { index: 1 })
    ));
    assert!(bucket.keys("").is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_deadline_cuts_a_hanging_write_and_the_batch_answers_in_time() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    let handler = Handler::new(&bucket, Settings::default()).with_clock(&clock);
    bucket.inject(Fault {
        operation: Operation::Put,
        prefix: "trail/".into(),
        times: None,
        effect: Effect::Hang,
    });
    let mut event = event(inserts(1..4));
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    event.context.deadline = now_ms + 3_000;
    let started = tokio::time::Instant::now();
    let response = handler.handle(event).await.unwrap();
    let took = started.elapsed();
    assert!(
        took <= Duration::from_millis(2_100),
        "answered {took:?} after the start, within the deadline less the margin"
    );
    let all: Vec<String> = (1..4).map(sequence_number).collect();
    assert_eq!(failed(&response), all);
    // The retry, once the lost write can no longer land, archives each event once.
    bucket.heal();
    let retry = archive(&bucket, &clock, inserts(1..4)).await;
    assert_eq!(retry.failed_from, None, "{:?}", retry.failure);
    assert_eq!(archived_ids(&bucket), ids(1..4));
}

#[tokio::test]
async fn a_previous_write_still_in_flight_fails_the_batch_when_the_deadline_is_nearer() {
    let bucket = MemoryBucket::new();
    let clock = ManualClock::new(at(TEN));
    time_out_next_put(&bucket, "trail/");
    archive(&bucket, &clock, inserts(1..3)).await;
    let budget = Budget {
        deadline: Some(tokio::time::Instant::now() + Duration::from_secs(10)),
        margin: Duration::from_secs(1),
    };
    let report = archive_within(&bucket, &clock, inserts(1..3), budget).await;
    assert_eq!(report.failed_from, Some(0));
    assert!(matches!(
        report.failure,
        Some(Failure::PreviousWriteInFlight(_))
    ));
    assert!(bucket.keys("trail/").is_empty());
}
