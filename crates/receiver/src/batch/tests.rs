//! The batch's behaviour, through `process_batch` with the in-memory ports.

use super::*;
use crate::deadletter::{FAILURE_CONTEXT, FailureAttributes, FailureContext, SendError};
use audit_aws::dynamodb::MemoryStore;
use audit_aws::sqs::MemoryDeadLetterQueue;

fn ports(store: &MemoryStore) -> Ports<'_, MemoryStore, MemoryDeadLetterQueue> {
    Ports {
        store,
        dead_letters: None,
        attester: None,
    }
}

const QUEUE: &str = "arn:aws:sqs:us-east-1:000000000000:AuditQueue";
const FIFO_QUEUE: &str = "arn:aws:sqs:us-east-1:000000000000:AuditQueue.fifo";

fn settings(max_concurrency: usize) -> BatchSettings {
    BatchSettings {
        max_concurrency,
        deadline_margin: Duration::from_millis(100),
        retention_days: None,
        retry: RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            attempt_timeout: Duration::from_secs(2),
            retry_budget: 100,
        },
        max_receive_count: 5,
        access_queue_arn: None,
        redrivers: Redrivers::new([OPERATOR.to_owned()]),
    }
}

/// A record as Lambda delivers it, from `QUEUE` (the batch reads neither the receipt handle nor
/// the region).
fn record(id: &str, body: &str) -> SqsMessage {
    let mut record = audit_testkit::sqs::record(id, body);
    record.event_source_arn = Some(QUEUE.to_owned());
    record
}

fn valid(id: &str) -> SqsMessage {
    record(id, &format!(r#"{{"auditText":"text of {id}"}}"#))
}

fn fifo(id: &str, group: &str, body: &str) -> SqsMessage {
    let mut record = record(id, body);
    record.event_source_arn = Some(FIFO_QUEUE.to_owned());
    record
        .attributes
        .insert("MessageGroupId".into(), group.to_owned());
    record
}

fn failure_code(outcome: &Outcome) -> Option<&'static str> {
    match outcome {
        Outcome::Failed(failure) | Outcome::DeadLettered(failure) => Some(failure.code()),
        _ => None,
    }
}

fn failed_ids(report: &BatchReport) -> Vec<&str> {
    report.failures().map(|(id, _)| id).collect()
}

fn outcome_of<'a>(report: &'a BatchReport, id: &str) -> &'a Outcome {
    &report
        .records
        .iter()
        .find(|r| r.sqs_message_id == id)
        .expect("record in report")
        .outcome
}

#[tokio::test]
async fn clean_batch_writes_every_record() {
    let store = MemoryStore::new();
    let records: Vec<_> = (0..10).map(|i| valid(&format!("m{i}"))).collect();
    let report = process_batch(ports(&store), &settings(32), &records, None)
        .await
        .unwrap();
    assert_eq!(report.written(), 10);
    assert!(failed_ids(&report).is_empty());
    assert_eq!(store.items().len(), 10);
}

#[tokio::test]
async fn invalid_records_fail_alone() {
    let store = MemoryStore::new();
    let records = vec![valid("ok-1"), record("bad", "not json"), valid("ok-2")];
    let report = process_batch(ports(&store), &settings(32), &records, None)
        .await
        .unwrap();
    assert_eq!(failed_ids(&report), ["bad"]);
    // The reason, not serde_json's wording of it.
    assert_eq!(
        failure_code(outcome_of(&report, "bad")),
        Some("invalid_json")
    );
    assert_eq!(store.items().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn concurrency_never_exceeds_the_bound() {
    let store = MemoryStore::new().with_delay(Duration::from_millis(20));
    let records: Vec<_> = (0..40).map(|i| valid(&format!("m{i}"))).collect();
    let report = process_batch(ports(&store), &settings(4), &records, None)
        .await
        .unwrap();
    assert_eq!(report.written(), 40);
    assert_eq!(store.max_in_flight(), 4);
}

#[tokio::test]
async fn the_same_message_id_twice_is_processed_once() {
    let store = MemoryStore::new();
    let records = vec![
        valid("m1"),
        valid("m1"),
        record("bad", "[]"),
        record("bad", "[]"),
    ];
    let report = process_batch(ports(&store), &settings(32), &records, None)
        .await
        .unwrap();
    assert_eq!(store.calls(), 1);
    assert_eq!(report.received, 4);
    assert_eq!(report.records.len(), 2);
    assert_eq!(failed_ids(&report), ["bad"]);
}

#[tokio::test]
async fn redelivery_is_a_duplicate_and_another_payload_a_conflict() {
    let store = MemoryStore::new();
    let body = r#"{"auditText":"a","messageId":"p-1","auditTime":"2026-11-22T12:00:00Z"}"#;
    let first = record("sqs-1", body);
    process_batch(ports(&store), &settings(32), &[first], None)
        .await
        .unwrap();

    let retry = record("sqs-2", body);
    let clash = record(
        "sqs-3",
        r#"{"auditText":"changed","messageId":"p-1","auditTime":"2026-11-22T12:00:00Z"}"#,
    );
    let report = process_batch(ports(&store), &settings(32), &[retry, clash], None)
        .await
        .unwrap();
    assert_eq!(outcome_of(&report, "sqs-2"), &Outcome::Duplicate);
    assert_eq!(
        outcome_of(&report, "sqs-3"),
        &Outcome::Failed(Failure::Conflict)
    );
    let items = store.items();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].audit_text.as_deref(), Some("a"));
    assert_eq!(items[0].sqs_message_id, "sqs-1");
}

#[tokio::test]
async fn cloud_events_whose_source_and_id_split_differently_are_two_items_not_a_duplicate() {
    let store = MemoryStore::new();
    let event = |source: &str, id: &str| {
        serde_json::json!({
            "specversion": "1.0", "source": source, "id": id, "type": "order.paid",
            "time": "2026-11-22T12:00:00Z", "data": {"amount": 10}
        })
        .to_string()
    };
    let records = [
        record("sqs-1", &event("svc#a", "1")),
        record("sqs-2", &event("svc", "a#1")),
    ];
    let report = process_batch(ports(&store), &settings(32), &records, None)
        .await
        .unwrap();
    assert_eq!(outcome_of(&report, "sqs-1"), &Outcome::Written);
    assert_eq!(outcome_of(&report, "sqs-2"), &Outcome::Written);
    let mut keys: Vec<_> = store
        .items()
        .iter()
        .map(|i| {
            (
                i.message_id.clone(),
                i.extra["source"].clone(),
                i.extra["id"].clone(),
            )
        })
        .collect();
    keys.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        keys,
        [
            ("svc#a#1".to_owned(), "svc".into(), "a#1".into()),
            ("svc%23a#1".to_owned(), "svc#a".into(), "1".into()),
        ]
    );
}

#[tokio::test]
async fn fifo_group_stops_after_a_failure_and_other_groups_go_on() {
    let store = MemoryStore::new();
    let ok = r#"{"auditText":"x"}"#;
    let records = vec![
        fifo("a1", "A", ok),
        fifo("b1", "B", ok),
        fifo("a2", "A", "oops"),
        fifo("b2", "B", ok),
        fifo("a3", "A", ok),
        fifo("b3", "B", ok),
    ];
    let report = process_batch(ports(&store), &settings(32), &records, None)
        .await
        .unwrap();
    assert_eq!(failed_ids(&report), ["a2", "a3"]);
    assert_eq!(
        failure_code(outcome_of(&report, "a2")),
        Some("invalid_json")
    );
    assert_eq!(
        outcome_of(&report, "a3"),
        &Outcome::Failed(Failure::GroupStopped)
    );
    let written: Vec<String> = store.write_order();
    assert!(
        !written.contains(&"a3".to_owned()),
        "a3 must not be written"
    );
    assert_eq!(report.written(), 4);
}

#[tokio::test(start_paused = true)]
async fn fifo_records_of_one_group_are_written_in_order_one_at_a_time() {
    let store = MemoryStore::new().with_delay(Duration::from_millis(5));
    let records: Vec<_> = (0..20)
        .map(|i| fifo(&format!("g{i:02}"), "G", r#"{"auditText":"x"}"#))
        .collect();
    process_batch(ports(&store), &settings(32), &records, None)
        .await
        .unwrap();
    let expected: Vec<String> = (0..20).map(|i| format!("g{i:02}")).collect();
    assert_eq!(store.write_order(), expected);
    assert_eq!(store.max_in_flight(), 1);
}

#[tokio::test(start_paused = true)]
async fn standard_queue_ignores_message_group_ids() {
    let store = MemoryStore::new().with_delay(Duration::from_millis(20));
    let mut records: Vec<_> = (0..8).map(|i| valid(&format!("m{i}"))).collect();
    for r in &mut records {
        r.attributes.insert("MessageGroupId".into(), "same".into());
    }
    process_batch(ports(&store), &settings(8), &records, None)
        .await
        .unwrap();
    assert_eq!(store.max_in_flight(), 8);
}

#[tokio::test]
async fn a_panic_fails_only_its_record() {
    let store = MemoryStore::new();
    store.panic_on("boom");
    let records = vec![valid("m1"), valid("boom"), valid("m2")];
    let report = process_batch(ports(&store), &settings(32), &records, None)
        .await
        .unwrap();
    assert_eq!(
        outcome_of(&report, "boom"),
        &Outcome::Failed(Failure::Panic)
    );
    assert_eq!(report.written(), 2);
}

#[tokio::test(start_paused = true)]
async fn transient_errors_are_retried_and_permanent_ones_are_not() {
    let store = MemoryStore::new();
    store.fail_next(
        "flaky",
        [
            StoreError::Throttled("slow down".into()),
            StoreError::Unavailable("503".into()),
        ],
    );
    store.fail_next("gone", [StoreError::TableNotFound("no table".into())]);
    store.fail_next(
        "down",
        (0..10).map(|_| StoreError::Unavailable("500".into())),
    );
    let records = vec![valid("flaky"), valid("gone"), valid("down")];
    let report = process_batch(ports(&store), &settings(32), &records, None)
        .await
        .unwrap();
    assert_eq!(outcome_of(&report, "flaky"), &Outcome::Written);
    assert_eq!(
        outcome_of(&report, "gone").clone(),
        Outcome::Failed(Failure::Store(StoreError::TableNotFound("no table".into())))
    );
    assert_eq!(
        outcome_of(&report, "down").clone(),
        Outcome::Failed(Failure::Store(StoreError::Unavailable("500".into())))
    );
    // flaky: 3 attempts; gone: 1; down: max_attempts = 3.
    assert_eq!(store.calls(), 7);
}

#[tokio::test(start_paused = true)]
async fn a_slow_store_is_cut_at_the_deadline_and_unfinished_records_fail() {
    let store = MemoryStore::new().with_delay(Duration::from_millis(300));
    let records: Vec<_> = (0..10).map(|i| valid(&format!("m{i}"))).collect();
    let started = Instant::now();
    let deadline = started + Duration::from_millis(500);
    // Margin 100 ms: writes in the first wave (2 in flight) finish at ~300 ms, the second
    // wave cannot finish before the cutoff at 400 ms, the rest never start.
    let report = process_batch(ports(&store), &settings(2), &records, Some(deadline))
        .await
        .unwrap();
    // Tokio's paused clock: the answer comes exactly at the send cutoff (deadline - 50 ms),
    // where the unfinished second wave is dropped, never later.
    assert!(started.elapsed() <= Duration::from_millis(450));
    assert_eq!(report.written(), 2);
    assert_eq!(report.failed_by_reason().get("deadline"), Some(&8));
}

#[tokio::test(start_paused = true)]
async fn no_record_starts_when_the_deadline_margin_is_already_reached() {
    let store = MemoryStore::new();
    let records = vec![valid("m1"), valid("m2")];
    let deadline = Instant::now() + Duration::from_millis(50);
    let report = process_batch(ports(&store), &settings(32), &records, Some(deadline))
        .await
        .unwrap();
    assert_eq!(store.calls(), 0);
    assert_eq!(failed_ids(&report), ["m1", "m2"]);
}

#[tokio::test]
async fn a_record_without_message_id_fails_the_batch_before_any_write() {
    let store = MemoryStore::new();
    let mut nameless = valid("x");
    nameless.message_id = None;
    let error = process_batch(ports(&store), &settings(32), &[valid("m1"), nameless], None)
        .await
        .unwrap_err();
    assert_eq!(error, BatchError::MissingMessageId { position: 1 });
    assert_eq!(store.calls(), 0);
}

// ---- dead-lettering ------------------------------------------------------------------------

fn with_dlq<'a>(
    store: &'a MemoryStore,
    dlq: &'a MemoryDeadLetterQueue,
) -> Ports<'a, MemoryStore, MemoryDeadLetterQueue> {
    Ports {
        store,
        dead_letters: Some(dlq),
        attester: None,
    }
}

fn received(mut record: SqsMessage, count: u64) -> SqsMessage {
    record
        .attributes
        .insert("ApproximateReceiveCount".into(), count.to_string());
    record
}

fn with_attribute(mut record: SqsMessage, name: &str, value: &str) -> SqsMessage {
    let mut attribute = aws_lambda_events::sqs::SqsMessageAttribute::default();
    attribute.string_value = Some(value.to_owned());
    attribute.data_type = Some("String".into());
    record.message_attributes.insert(name.to_owned(), attribute);
    record
}

fn reasons(dlq: &MemoryDeadLetterQueue) -> Vec<String> {
    dlq.sent()
        .iter()
        .map(|l| l.reason().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn permanent_failures_are_dead_lettered_at_the_first_receive_and_reported_succeeded() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    let body = "{not json";
    let poison = with_attribute(record("bad", body), "tenant", "acme");
    let report = process_batch(
        with_dlq(&store, &dlq),
        &settings(32),
        &[valid("ok"), poison],
        None,
    )
    .await
    .unwrap();
    assert!(failed_ids(&report).is_empty(), "nothing comes back");
    assert!(matches!(
        outcome_of(&report, "bad"),
        Outcome::DeadLettered(Failure::Invalid(InvalidMessage::InvalidJson(_)))
    ));
    let sent = dlq.sent();
    assert_eq!(sent.len(), 1);
    let letter = &sent[0];
    assert_eq!(letter.body, body, "the body byte for byte");
    assert_eq!(letter.reason(), Some("invalid_json"));
    assert_eq!(
        letter.attributes["tenant"].string_value.as_deref(),
        Some("acme"),
        "original attributes kept"
    );
    let context = letter.context().unwrap();
    assert_eq!(context.reason, "invalid_json");
    assert_eq!(context.sqs_message_id, "bad");
    assert_eq!(context.sent_timestamp.as_deref(), Some("1795348800000"));
    assert_eq!(context.receive_count, Some(1));
    assert_eq!(context.event_source_arn.as_deref(), Some(QUEUE));
    assert!(!context.detail.is_empty() && !context.detail.contains(body));
    assert_eq!(letter.group_id, None);
    assert_eq!(letter.deduplication_id, None);
}

#[tokio::test]
async fn extra_nested_deeper_than_dynamodb_stores_is_dead_lettered_before_any_write() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    let nested = |levels: usize| {
        let mut body = String::from(r#"{"action":"a","deep":"#);
        body.push_str(&"[".repeat(levels));
        body.push('1');
        body.push_str(&"]".repeat(levels));
        body.push('}');
        body
    };
    // 30 arrays put the number at level 32 (the item's extra map is level 1): DynamoDB's last.
    let records = [
        record("at-limit", &nested(30)),
        record("deeper", &nested(31)),
    ];
    let report = process_batch(with_dlq(&store, &dlq), &settings(32), &records, None)
        .await
        .unwrap();
    assert_eq!(outcome_of(&report, "at-limit"), &Outcome::Written);
    assert_eq!(
        failure_code(outcome_of(&report, "deeper")),
        Some("nesting_too_deep")
    );
    assert_eq!(reasons(&dlq), ["nesting_too_deep"]);
    assert_eq!(store.calls(), 1, "the deeper one never reached the store");
}

#[tokio::test]
async fn transient_failures_come_back_until_the_last_receive_then_are_dead_lettered() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    store.fail_next(
        "early",
        (0..3).map(|_| StoreError::Throttled("slow down".into())),
    );
    store.fail_next(
        "last",
        (0..3).map(|_| StoreError::Throttled("slow down".into())),
    );
    let records = vec![received(valid("early"), 4), received(valid("last"), 5)];
    let report = process_batch(with_dlq(&store, &dlq), &settings(32), &records, None)
        .await
        .unwrap();
    assert_eq!(failed_ids(&report), ["early"]);
    assert!(matches!(
        outcome_of(&report, "last"),
        Outcome::DeadLettered(Failure::Store(StoreError::Throttled(_)))
    ));
    assert_eq!(reasons(&dlq), ["throttled"]);
}

#[tokio::test]
async fn a_failed_send_reports_the_record_failed_so_sqs_keeps_it() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    dlq.refuse_all(SendError::QueueMissing(
        "AWS.SimpleQueueService.NonExistentQueue".into(),
    ));
    let report = process_batch(
        with_dlq(&store, &dlq),
        &settings(32),
        &[record("bad", "[]")],
        None,
    )
    .await
    .unwrap();
    assert_eq!(failed_ids(&report), ["bad"]);
    assert!(matches!(
        report.records[0].dead_letter_error,
        Some(SendError::QueueMissing(_))
    ));
}

#[tokio::test]
async fn records_sqs_cannot_carry_again_stay_on_the_sqs_path() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    let mut no_body = record("no-body", "");
    no_body.body = None;
    let empty_body = record("empty-body", "");
    let mut crowded = record("crowded", "[]");
    for i in 0..9 {
        crowded = with_attribute(crowded, &format!("a{i}"), "v");
    }
    let mut eight = record("eight", "[]");
    for i in 0..8 {
        eight = with_attribute(eight, &format!("a{i}"), "v");
    }
    let report = process_batch(
        with_dlq(&store, &dlq),
        &settings(32),
        &[no_body, empty_body, crowded, eight],
        None,
    )
    .await
    .unwrap();
    assert_eq!(failed_ids(&report), ["no-body", "empty-body", "crowded"]);
    assert!(matches!(
        report.records[2].dead_letter_error,
        Some(SendError::TooManyAttributes(9))
    ));
    assert!(matches!(
        outcome_of(&report, "eight"),
        Outcome::DeadLettered(_)
    ));
    assert_eq!(dlq.sent()[0].attributes.len(), 10);
}

#[tokio::test]
async fn a_dead_lettered_fifo_record_lets_its_group_go_on_in_order() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    let ok = r#"{"auditText":"x"}"#;
    let records = vec![
        fifo("a1", "A", ok),
        fifo("a2", "A", "poison"),
        fifo("a3", "A", ok),
    ];
    let report = process_batch(with_dlq(&store, &dlq), &settings(32), &records, None)
        .await
        .unwrap();
    assert!(failed_ids(&report).is_empty());
    assert_eq!(store.write_order(), ["a1", "a3"]);
    let letter = &dlq.sent()[0];
    assert_eq!(letter.group_id.as_deref(), Some("A"));
    assert_eq!(letter.deduplication_id.as_deref(), Some("a2"));
}

#[tokio::test]
async fn a_fifo_group_stops_when_its_dead_letter_send_fails() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    dlq.fail_next([SendError::Unavailable("connection failed".into())]);
    let ok = r#"{"auditText":"x"}"#;
    let records = vec![fifo("a1", "A", "poison"), fifo("a2", "A", ok)];
    let report = process_batch(with_dlq(&store, &dlq), &settings(32), &records, None)
        .await
        .unwrap();
    assert_eq!(failed_ids(&report), ["a1", "a2"]);
    assert_eq!(
        outcome_of(&report, "a2"),
        &Outcome::Failed(Failure::GroupStopped)
    );
    assert!(store.write_order().is_empty());
}

/// The group's later records on their last receive, behind a record the function could not
/// dead-letter: none of them may reach the dead-letter queue ahead of it.
async fn last_receive_behind(first: SqsMessage, dlq: &MemoryDeadLetterQueue) -> BatchReport {
    let store = MemoryStore::new();
    let ok = r#"{"auditText":"x"}"#;
    let records = vec![
        first,
        received(fifo("a2", "A", "poison too"), 5),
        received(fifo("a3", "A", ok), 5),
    ];
    let report = process_batch(with_dlq(&store, dlq), &settings(32), &records, None)
        .await
        .unwrap();
    assert_eq!(failed_ids(&report), ["a1", "a2", "a3"]);
    for id in ["a2", "a3"] {
        assert_eq!(
            outcome_of(&report, id),
            &Outcome::Failed(Failure::GroupStopped),
            "{id}"
        );
    }
    assert!(store.write_order().is_empty());
    report
}

#[tokio::test]
async fn a_group_stopped_by_a_failed_send_dead_letters_nothing_behind_it_on_the_last_receive() {
    let dlq = MemoryDeadLetterQueue::new();
    dlq.fail_next([SendError::Unavailable("connection failed".into())]);
    last_receive_behind(received(fifo("a1", "A", "poison"), 5), &dlq).await;
    assert!(dlq.sent().is_empty(), "{:?}", reasons(&dlq));
}

#[tokio::test]
async fn a_group_stopped_by_a_record_without_body_dead_letters_nothing_behind_it() {
    let dlq = MemoryDeadLetterQueue::new();
    let mut first = received(fifo("a1", "A", ""), 5);
    first.body = None;
    last_receive_behind(first, &dlq).await;
    assert!(dlq.sent().is_empty(), "{:?}", reasons(&dlq));
}

#[tokio::test]
async fn a_group_stopped_by_too_many_attributes_dead_letters_nothing_behind_it() {
    let dlq = MemoryDeadLetterQueue::new();
    let mut first = received(fifo("a1", "A", "poison"), 5);
    for n in 0..9 {
        first = with_attribute(first, &format!("attr{n}"), "v");
    }
    let report = last_receive_behind(first, &dlq).await;
    assert!(dlq.sent().is_empty(), "{:?}", reasons(&dlq));
    assert!(matches!(
        report.records[0].dead_letter_error,
        Some(SendError::TooManyAttributes(9))
    ));
}

#[tokio::test]
async fn a_group_waiting_on_a_transient_failure_dead_letters_nothing_behind_it() {
    // a1 fails transiently on its second receive and goes back to the queue; a2 and a3, already
    // on their last receive, must stay behind it rather than enter the dead-letter queue first.
    let dlq = MemoryDeadLetterQueue::new();
    let store = MemoryStore::new();
    store.fail_next("a1", [StoreError::TableNotFound("AuditMessages".into())]);
    let ok = r#"{"auditText":"x"}"#;
    let records = vec![
        received(fifo("a1", "A", ok), 2),
        received(fifo("a2", "A", "poison"), 5),
        received(fifo("a3", "A", ok), 5),
    ];
    let report = process_batch(with_dlq(&store, &dlq), &settings(32), &records, None)
        .await
        .unwrap();
    assert_eq!(failed_ids(&report), ["a1", "a2", "a3"]);
    assert!(dlq.sent().is_empty(), "{:?}", reasons(&dlq));
}

#[tokio::test]
async fn a_redriven_record_is_its_original_delivery() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    // First delivery: written under its SQS id and SentTimestamp.
    process_batch(
        with_dlq(&store, &dlq),
        &settings(32),
        &[valid("orig")],
        None,
    )
    .await
    .unwrap();
    // Redriven: a new SQS id and a new SentTimestamp, the original in failureContext.
    let context = FailureContext {
        reason: "throttled".into(),
        detail: String::new(),
        sqs_message_id: "orig".into(),
        sent_timestamp: Some("1795348800000".into()),
        receive_count: Some(5),
        failed_at: "2026-11-22T12:00:01.000Z".into(),
        event_source_arn: None,
        original_sender_id: None,
        sender_id: None,
    };
    let mut redriven = with_attribute(
        sent_by(
            record("redriven", r#"{"auditText":"text of orig"}"#),
            OPERATOR,
        ),
        FAILURE_CONTEXT,
        &context.to_json(),
    );
    redriven
        .attributes
        .insert("SentTimestamp".into(), "1795349999999".into());
    let report = process_batch(with_dlq(&store, &dlq), &settings(32), &[redriven], None)
        .await
        .unwrap();
    assert_eq!(outcome_of(&report, "redriven"), &Outcome::Duplicate);
    let items = store.items();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].message_id, "orig");
    assert_eq!(
        items[0].sent_at.as_deref(),
        Some("2026-11-22T12:00:00.000Z")
    );
}

#[tokio::test]
async fn a_malformed_failure_context_is_ignored_not_a_failure() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    let records = vec![
        with_attribute(sent_by(valid("m1"), OPERATOR), FAILURE_CONTEXT, "not json"),
        with_attribute(
            sent_by(valid("m2"), OPERATOR),
            FAILURE_CONTEXT,
            r#"{"reason":"throttled"}"#,
        ),
    ];
    let report = process_batch(with_dlq(&store, &dlq), &settings(32), &records, None)
        .await
        .unwrap();
    assert_eq!(report.written(), 2);
    let keys: Vec<String> = store.items().into_iter().map(|i| i.message_id).collect();
    assert_eq!(keys, ["m1", "m2"]);
}

#[tokio::test]
async fn a_redrive_context_without_the_original_time_is_ignored_not_half_used() {
    // The original delivery wrote its item under (orig, its SentTimestamp). A context naming
    // orig without that time would key the redriven body by orig and the redrive's own time: a
    // second item claiming the original's identity. It is ignored, as if absent.
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    let mut redriven = with_attribute(
        sent_by(
            record("redriven", r#"{"auditText":"text of orig"}"#),
            OPERATOR,
        ),
        FAILURE_CONTEXT,
        r#"{"reason":"throttled","sqsMessageId":"orig"}"#,
    );
    redriven
        .attributes
        .insert("SentTimestamp".into(), "1795349999999".into());
    let report = process_batch(with_dlq(&store, &dlq), &settings(32), &[redriven], None)
        .await
        .unwrap();
    assert_eq!(outcome_of(&report, "redriven"), &Outcome::Written);
    let items = store.items();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].message_id, "redriven");
    assert_eq!(items[0].audit_time, "2026-11-22T12:19:59.999Z");
}

#[tokio::test]
async fn a_record_failing_again_after_a_redrive_keeps_its_original_identity() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    let context = FailureContext {
        reason: "throttled".into(),
        detail: String::new(),
        sqs_message_id: "first-id".into(),
        sent_timestamp: Some("1795340000000".into()),
        receive_count: Some(5),
        failed_at: String::new(),
        event_source_arn: None,
        original_sender_id: None,
        sender_id: None,
    };
    let again = with_attribute(
        sent_by(record("second-id", "[]"), OPERATOR),
        FAILURE_CONTEXT,
        &context.to_json(),
    );
    process_batch(with_dlq(&store, &dlq), &settings(32), &[again], None)
        .await
        .unwrap();
    let letter = &dlq.sent()[0];
    let new_context = letter.context().unwrap();
    assert_eq!(new_context.reason, "not_an_object");
    assert_eq!(new_context.sqs_message_id, "first-id");
    assert_eq!(new_context.sent_timestamp.as_deref(), Some("1795340000000"));
    assert_eq!(
        letter.attributes.len(),
        2,
        "the old context is replaced, not kept beside the new one"
    );
}

#[tokio::test(start_paused = true)]
async fn records_cut_off_by_the_deadline_on_their_last_receive_are_dead_lettered_in_the_margin() {
    let store = MemoryStore::new().with_delay(Duration::from_millis(300));
    let dlq = MemoryDeadLetterQueue::new();
    let records: Vec<_> = (0..4)
        .map(|i| received(valid(&format!("m{i}")), 5))
        .collect();
    let deadline = Instant::now() + Duration::from_millis(500);
    let report = process_batch(
        with_dlq(&store, &dlq),
        &settings(2),
        &records,
        Some(deadline),
    )
    .await
    .unwrap();
    assert_eq!(report.written(), 2);
    assert_eq!(report.dead_lettered_by_reason().get("deadline"), Some(&2));
    assert!(failed_ids(&report).is_empty());
}

/// Each record either dead-lettered (reported succeeded) with exactly one copy in the queue,
/// or reported failed with none (SQS then delivers it again, or moves it on its last receive):
/// never reported failed with a copy already in the queue, which makes a second one.
fn one_copy_each(report: &BatchReport, dlq: &MemoryDeadLetterQueue) {
    let sent = dlq.sent();
    for record in &report.records {
        let copies = sent
            .iter()
            .filter(|l| {
                l.context()
                    .is_some_and(|c| c.sqs_message_id == record.sqs_message_id)
            })
            .count();
        let expected = usize::from(matches!(record.outcome, Outcome::DeadLettered(_)));
        assert_eq!(
            copies, expected,
            "{}: {:?} with {copies} copies in the dead-letter queue",
            record.sqs_message_id, record.outcome
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_dead_letter_send_that_sqs_took_is_not_cut_off_by_the_deadline() {
    // Given SQS that takes each message at once and answers 30 ms later, a store that answers
    // after 300 ms, one record at a time, and four records on their last receive.
    let store = MemoryStore::new().with_delay(Duration::from_millis(300));
    let dlq = MemoryDeadLetterQueue::new().with_answer_delay(Duration::from_millis(30));
    let records: Vec<_> = (0..4)
        .map(|i| received(valid(&format!("m{i}")), 5))
        .collect();
    // Margin 100 ms: no write after 400 ms; m0 is written at 300, m1's write is cut at 400 and
    // its send answered at 430; m2 comes to its send at 430, m3 at 460.
    let deadline = Instant::now() + Duration::from_millis(500);

    let report = process_batch(
        with_dlq(&store, &dlq),
        &settings(1),
        &records,
        Some(deadline),
    )
    .await
    .unwrap();

    // Then a send that started (m2, at 430, before deadline - margin/2) is waited for: SQS took
    // it, so it is dead-lettered, not reported failed beside its copy. A send that would start
    // too late to be waited for (m3, at 460) is not started: m3 is reported failed, and has no
    // copy in the queue.
    assert_eq!(report.written(), 1);
    assert_eq!(report.dead_lettered_by_reason().get("deadline"), Some(&2));
    assert_eq!(failed_ids(&report), ["m3"]);
    one_copy_each(&report, &dlq);
    // The answer comes in the margin's third quarter, never later.
    assert!(Instant::now() <= deadline - Duration::from_millis(25));
}

#[tokio::test]
async fn a_body_near_the_queues_size_limit_is_dead_lettered_once_with_its_reason() {
    // Given a dead-letter queue that takes 4,096 bytes, and a poison record whose body and
    // attribute take 3,900 of them: with failureReason and a full failureContext it is over.
    let limit = 4_096;
    let (store, dlq) = (
        MemoryStore::new(),
        MemoryDeadLetterQueue::new().with_max_message_bytes(limit),
    );
    let body = format!("[{}1]", "1,".repeat(1_900));
    let record = with_attribute(record("near", &body), "tenant", &"t".repeat(84));
    let invalid = AuditMessage::parse(Some(&body), None).unwrap_err();
    let full = dead_letter(
        &record,
        &Redrivers::default(),
        &Failure::Invalid(invalid),
        Utc::now(),
    )
    .unwrap();
    assert!(full.size() > limit, "{} bytes", full.size());

    let report = process_batch(with_dlq(&store, &dlq), &settings(32), &[record], None)
        .await
        .unwrap();

    // Then it is dead-lettered, once, within the limit, with its reason, its identity and as
    // much of the detail as fits; the body and the attribute byte for byte.
    assert!(failed_ids(&report).is_empty(), "{:?}", report.records);
    let sent = dlq.sent();
    assert_eq!(sent.len(), 1);
    assert!(sent[0].size() <= limit, "{} bytes", sent[0].size());
    assert_eq!(sent[0].body, body);
    assert_eq!(
        sent[0].string_attribute("tenant"),
        Some("t".repeat(84).as_str())
    );
    assert_eq!(sent[0].reason(), Some("not_an_object"));
    let context: FailureContext =
        serde_json::from_str(sent[0].string_attribute(FAILURE_CONTEXT).unwrap()).unwrap();
    assert_eq!(context.reason, "not_an_object");
    assert_eq!(context.sqs_message_id, "near");
    assert!(context.sent_timestamp.is_some());
    one_copy_each(&report, &dlq);
}

#[tokio::test]
async fn a_body_over_the_queues_size_limit_on_its_own_is_left_to_sqs() {
    let dlq = MemoryDeadLetterQueue::new().with_max_message_bytes(1_024);
    let body = format!("[{}1]", "1,".repeat(600));
    let report = process_batch(
        with_dlq(&MemoryStore::new(), &dlq),
        &settings(32),
        &[record("huge", &body)],
        None,
    )
    .await
    .unwrap();
    assert_eq!(failed_ids(&report), ["huge"]);
    assert!(matches!(
        report.records[0].dead_letter_error,
        Some(SendError::TooLarge {
            limit: Some(1_024),
            ..
        })
    ));
    assert!(dlq.sent().is_empty());
}

#[tokio::test]
async fn without_a_dead_letter_queue_failures_are_only_reported() {
    let store = MemoryStore::new();
    let report = process_batch(
        ports(&store),
        &settings(32),
        &[received(record("bad", "[]"), 9)],
        None,
    )
    .await
    .unwrap();
    assert_eq!(failed_ids(&report), ["bad"]);
}

// ---- the shared retry budget ----------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_fully_throttled_batch_draws_on_one_retry_budget() {
    let store = MemoryStore::new();
    let records: Vec<_> = (0..100).map(|i| valid(&format!("m{i}"))).collect();
    for r in &records {
        store.fail_next(
            r.message_id.as_deref().unwrap(),
            (0..10).map(|_| StoreError::Throttled("ThrottlingException".into())),
        );
    }
    let mut settings = settings(32);
    settings.retry.max_attempts = 5;
    let report = process_batch(ports(&store), &settings, &records, None)
        .await
        .unwrap();
    assert_eq!(report.failed_by_reason().get("throttled"), Some(&100));
    // 100 first attempts and 100 / RETRY_COST retries, not 100 × 5 attempts.
    assert_eq!(store.calls(), 100 + 100 / RETRY_COST as usize);
}

#[tokio::test(start_paused = true)]
async fn successes_refill_the_budget_for_occasional_faults() {
    let store = MemoryStore::new();
    let records: Vec<_> = (0..200).map(|i| valid(&format!("m{i}"))).collect();
    // Every fourth record is throttled once: 50 retries drawing 250 tokens in all, more
    // than the 100 at the start; each retry that succeeds gives its tokens back.
    for r in records.iter().step_by(4) {
        store.fail_next(
            r.message_id.as_deref().unwrap(),
            [StoreError::Throttled("ThrottlingException".into())],
        );
    }
    let mut settings = settings(1);
    settings.retry.retry_budget = 100;
    let report = process_batch(ports(&store), &settings, &records, None)
        .await
        .unwrap();
    assert_eq!(report.written(), 200);
}

#[test]
fn backoff_grows_and_stays_under_the_cap() {
    let policy = RetryPolicy::default();
    for retry in 1..10 {
        let delay = policy.backoff(retry);
        let cap = (policy.base_delay * (1 << (retry - 1))).min(policy.max_delay);
        assert!(
            delay >= cap / 2 && delay <= cap,
            "retry {retry}: {delay:?} vs cap {cap:?}"
        );
    }
}

// ---- the attested sender and the access queue ------------------------------------------------

const ACCESS_QUEUE: &str = "arn:aws:sqs:us-east-1:000000000000:AuditAccessQueue";
const PRODUCER: &str = "AROAPRODUCER:orders-service";
const OPERATOR: &str = "AIDAOPERATOR";
const READER: &str = "AROAREADER:alice";

fn sent_by(mut record: SqsMessage, sender: &str) -> SqsMessage {
    record
        .attributes
        .insert("SenderId".into(), sender.to_owned());
    record
}

/// `settings(32)` of a deployment with an access queue.
fn with_access_queue() -> BatchSettings {
    let mut settings = settings(32);
    settings.access_queue_arn = Some(ACCESS_QUEUE.to_owned());
    settings
}

/// An access event as `auditctl` sends it: its caller's ARN as `actor`, its caller's user id as
/// `callerUserId`.
fn access_event(id: &str, caller: &str, queue: &str) -> SqsMessage {
    let mut record = record(
        id,
        &format!(
            r#"{{"action":"auditctl.query","actor":"arn:aws:sts::123456789012:assumed-role/reader/alice","resource":"AuditMessages","outcome":"success","messageId":"access-{id}","auditTime":"2026-11-22T10:00:00Z","callerUserId":"{caller}"}}"#
        ),
    );
    record.event_source_arn = Some(queue.to_owned());
    record
}

fn dead_letter_detail(dlq: &MemoryDeadLetterQueue, id: &str) -> String {
    dlq.sent()
        .iter()
        .filter_map(|l| l.context())
        .find(|c| c.sqs_message_id == id)
        .map(|c| c.detail)
        .unwrap_or_default()
}

#[tokio::test]
async fn every_item_says_who_aws_says_sent_it() {
    let store = MemoryStore::new();
    let records = vec![sent_by(valid("m1"), PRODUCER), valid("m2")];
    let report = process_batch(ports(&store), &with_access_queue(), &records, None)
        .await
        .unwrap();
    assert_eq!(report.written(), 2);
    let items = store.items();
    assert_eq!(items[0].sender_id.as_deref(), Some(PRODUCER));
    assert_eq!(items[0].original_sender_id, None, "not a redrive");
    assert_eq!(items[1].sender_id, None, "a delivery without SenderId");
}

#[tokio::test]
async fn an_access_event_of_its_attested_sender_is_written_from_the_access_queue() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    let event = sent_by(access_event("a1", READER, ACCESS_QUEUE), READER);
    let report = process_batch(with_dlq(&store, &dlq), &with_access_queue(), &[event], None)
        .await
        .unwrap();
    assert_eq!(outcome_of(&report, "a1"), &Outcome::Written);
    let items = store.items();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].sender_id.as_deref(), Some(READER));
    assert_eq!(items[0].fields.action.as_deref(), Some("auditctl.query"));
    assert_eq!(
        items[0].extra["callerUserId"], READER,
        "an ordinary body field"
    );
    assert!(dlq.sent().is_empty());
}

#[tokio::test]
async fn an_access_event_that_names_another_person_as_actor_is_dead_lettered_not_written() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    // Bob's own session, sending as himself, names alice as the reader.
    const BOB: &str = "AROAREADER:bob";
    let framing = sent_by(access_event("framing", BOB, ACCESS_QUEUE), BOB);
    let report = process_batch(
        with_dlq(&store, &dlq),
        &with_access_queue(),
        &[framing],
        None,
    )
    .await
    .unwrap();
    assert!(store.items().is_empty(), "nothing written");
    assert_eq!(reasons(&dlq), ["access_event_invalid"]);
    assert!(
        dead_letter_detail(&dlq, "framing").contains("actor is not the ARN of its attested sender"),
        "{report:?}"
    );
}

#[tokio::test]
async fn the_access_queue_dead_letters_anything_but_an_access_event_of_its_sender() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    let mut application = record("app", r#"{"action":"invoice.delete","callerUserId":"x"}"#);
    application.event_source_arn = Some(ACCESS_QUEUE.to_owned());
    let mut uncalled = record("uncalled", r#"{"action":"auditctl.get"}"#);
    uncalled.event_source_arn = Some(ACCESS_QUEUE.to_owned());
    let records = vec![
        // A reader forging another caller's access.
        sent_by(access_event("forged", OPERATOR, ACCESS_QUEUE), READER),
        sent_by(application, READER),
        sent_by(uncalled, READER),
        access_event("unsent", READER, ACCESS_QUEUE),
    ];
    let report = process_batch(with_dlq(&store, &dlq), &with_access_queue(), &records, None)
        .await
        .unwrap();
    assert!(
        failed_ids(&report).is_empty(),
        "permanent: nothing comes back"
    );
    assert_eq!(
        report.dead_lettered_by_reason().get("access_event_invalid"),
        Some(&4)
    );
    assert!(store.items().is_empty(), "nothing written");
    assert_eq!(store.calls(), 0, "refused before any write");
    assert_eq!(reasons(&dlq), ["access_event_invalid"; 4]);
    for (id, says) in [
        ("forged", "does not match"),
        ("app", "only auditctl.* actions"),
        ("uncalled", "no callerUserId"),
        ("unsent", "no SenderId"),
    ] {
        let detail = dead_letter_detail(&dlq, id);
        assert!(detail.contains(says), "{id}: {detail}");
        assert!(
            !detail.contains(READER) && !detail.contains(OPERATOR),
            "{detail}"
        );
    }
}

#[tokio::test]
async fn an_auditctl_action_from_the_audit_queue_is_reserved() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    // Even one that would pass on the access queue: the audit queue takes no access events.
    let forged = sent_by(access_event("forged", PRODUCER, QUEUE), PRODUCER);
    let ordinary = sent_by(valid("ok"), PRODUCER);
    for settings in [with_access_queue(), settings(32)] {
        let report = process_batch(
            with_dlq(&store, &dlq),
            &settings,
            &[forged.clone(), ordinary.clone()],
            None,
        )
        .await
        .unwrap();
        assert!(matches!(
            outcome_of(&report, "forged"),
            Outcome::DeadLettered(Failure::Access(_))
        ));
        assert_eq!(
            failure_code(outcome_of(&report, "forged")),
            Some("reserved_action")
        );
    }
    assert_eq!(reasons(&dlq), ["reserved_action"; 2]);
    let items = store.items();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].message_id, "ok");
}

#[tokio::test]
async fn a_dead_letter_keeps_the_first_delivery_s_sender() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    let first = |sqs_message_id: &str, original_sender_id: Option<&str>| FailureContext {
        reason: "throttled".into(),
        detail: String::new(),
        sqs_message_id: sqs_message_id.into(),
        sent_timestamp: Some("1795340000000".into()),
        receive_count: Some(5),
        failed_at: String::new(),
        event_source_arn: Some(QUEUE.into()),
        original_sender_id: original_sender_id.map(str::to_owned),
        sender_id: None,
    };
    let records = vec![
        // Its first failure: its own sender.
        sent_by(record("fresh", "[]"), PRODUCER),
        // Redriven by an operator, failing again: the sender its context carries.
        with_attribute(
            sent_by(record("again", "[]"), OPERATOR),
            FAILURE_CONTEXT,
            &first("first-again", Some(PRODUCER)).to_json(),
        ),
        // A context without one (an older dead letter): the delivery's own sender.
        with_attribute(
            sent_by(record("older", "[]"), OPERATOR),
            FAILURE_CONTEXT,
            &first("first-older", None).to_json(),
        ),
        // No sender at all: none claimed.
        record("nobody", "[]"),
    ];
    process_batch(with_dlq(&store, &dlq), &settings(32), &records, None)
        .await
        .unwrap();
    let senders: std::collections::BTreeMap<String, Option<String>> = dlq
        .sent()
        .iter()
        .filter_map(|l| l.context())
        .map(|c| (c.sqs_message_id, c.original_sender_id))
        .collect();
    assert_eq!(senders["fresh"].as_deref(), Some(PRODUCER));
    assert_eq!(senders["first-again"].as_deref(), Some(PRODUCER));
    assert_eq!(senders["first-older"].as_deref(), Some(OPERATOR));
    assert_eq!(senders["nobody"], None);
}

#[tokio::test]
async fn a_redriven_record_is_written_with_its_first_sender_and_its_redriver() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    let context = FailureContext {
        reason: "throttled".into(),
        detail: String::new(),
        sqs_message_id: "orig".into(),
        sent_timestamp: Some("1795348800000".into()),
        receive_count: Some(5),
        failed_at: "2026-11-22T12:00:01.000Z".into(),
        event_source_arn: Some(QUEUE.into()),
        original_sender_id: Some(PRODUCER.into()),
        sender_id: None,
    };
    let redriven = with_attribute(
        sent_by(
            record("redriven", r#"{"auditText":"text of orig"}"#),
            OPERATOR,
        ),
        FAILURE_CONTEXT,
        &context.to_json(),
    );
    // A malformed context's sender is not taken either.
    let malformed = with_attribute(
        sent_by(valid("m2"), OPERATOR),
        FAILURE_CONTEXT,
        &format!(r#"{{"sqsMessageId":"m","originalSenderId":"{PRODUCER}"}}"#),
    );
    let report = process_batch(
        with_dlq(&store, &dlq),
        &settings(32),
        &[redriven, malformed],
        None,
    )
    .await
    .unwrap();
    assert_eq!(report.written(), 2);
    let items = store.items();
    let orig = items.iter().find(|i| i.message_id == "orig").unwrap();
    assert_eq!(orig.sender_id.as_deref(), Some(OPERATOR));
    assert_eq!(orig.original_sender_id.as_deref(), Some(PRODUCER));
    let m2 = items.iter().find(|i| i.message_id == "m2").unwrap();
    assert_eq!(m2.sender_id.as_deref(), Some(OPERATOR));
    assert_eq!(m2.original_sender_id, None);
}

/// A context a producer makes up: another service as the first sender, an old send time, another
/// message's SQS id.
fn forged_context() -> String {
    FailureContext {
        reason: "throttled".into(),
        detail: String::new(),
        sqs_message_id: "someone-elses-message".into(),
        sent_timestamp: Some("1700000000000".into()),
        receive_count: Some(5),
        failed_at: String::new(),
        event_source_arn: Some(QUEUE.into()),
        original_sender_id: Some("AROAPAYMENTS:payments-service".into()),
        sender_id: None,
    }
    .to_json()
}

#[tokio::test]
async fn a_producers_failure_context_is_not_taken_for_the_item_or_the_dead_letter() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    let records = vec![
        // A valid body without messageId or auditTime: keyed by the delivery's own id and time.
        with_attribute(
            sent_by(record("forged-valid", r#"{"auditText":"paid"}"#), PRODUCER),
            FAILURE_CONTEXT,
            &forged_context(),
        ),
        // An invalid body: dead-lettered as the producer's own, under the function's role.
        with_attribute(
            sent_by(record("forged-invalid", "[]"), PRODUCER),
            FAILURE_CONTEXT,
            &forged_context(),
        ),
    ];
    process_batch(with_dlq(&store, &dlq), &settings(32), &records, None)
        .await
        .unwrap();

    let items = store.items();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].message_id, "forged-valid");
    assert_eq!(items[0].sqs_message_id, "forged-valid");
    assert_eq!(items[0].sender_id.as_deref(), Some(PRODUCER));
    assert_eq!(items[0].original_sender_id, None, "no other first sender");
    assert_ne!(
        items[0].sent_at.as_deref(),
        Some("2023-11-14T22:13:20.000Z"),
        "not the claimed send time"
    );
    let contexts: Vec<FailureContext> = dlq.sent().iter().filter_map(|l| l.context()).collect();
    assert_eq!(contexts.len(), 1);
    let context = &contexts[0];
    assert_eq!(context.sqs_message_id, "forged-invalid");
    assert_eq!(context.original_sender_id.as_deref(), Some(PRODUCER));
    assert_eq!(context.sender_id.as_deref(), Some(PRODUCER));
}

#[tokio::test]
async fn a_redrivers_context_is_taken_and_the_dead_letter_names_both_senders() {
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    let records = vec![with_attribute(
        sent_by(record("redriven", "[]"), OPERATOR),
        FAILURE_CONTEXT,
        &forged_context(),
    )];
    process_batch(with_dlq(&store, &dlq), &settings(32), &records, None)
        .await
        .unwrap();
    let contexts: Vec<FailureContext> = dlq.sent().iter().filter_map(|l| l.context()).collect();
    assert_eq!(contexts[0].sqs_message_id, "someone-elses-message");
    assert_eq!(
        contexts[0].original_sender_id.as_deref(),
        Some("AROAPAYMENTS:payments-service")
    );
    assert_eq!(contexts[0].sender_id.as_deref(), Some(OPERATOR));
}

#[tokio::test]
async fn every_item_written_is_attested_by_one_signature_over_the_batch() {
    use crate::attest::Uncertified;
    use audit_aws::dynamodb::item_line_map;
    use audit_aws::kms::MemoryKey;
    use audit_model::attest::{ReceiverKey, check};

    let kms = MemoryKey::new("arn:aws:kms:us-east-1:000000000000:key/attest");
    let run = Uncertified::generate(1_795_000_000_000).unwrap();
    let signature = kms.sign(&run.statement()).unwrap();
    let attester = run.certified(signature);
    let (store, dlq) = (MemoryStore::new(), MemoryDeadLetterQueue::new());
    let ports = Ports {
        store: &store,
        dead_letters: Some(&dlq),
        attester: Some(&attester),
    };
    let records: Vec<SqsMessage> = (0..5)
        .map(|i| valid(&format!("m{i}")))
        .chain([record("poison", "not json")])
        .collect();
    let report = process_batch(ports, &settings(32), &records, None)
        .await
        .unwrap();
    assert_eq!(report.written(), 5);
    let key = ReceiverKey::from_der(&kms.public_key().der);
    let items = store.items();
    let mut sizes = std::collections::BTreeSet::new();
    for item in &items {
        let attestation = check(&item_line_map(item), &key).unwrap();
        sizes.insert(attestation.size);
    }
    // The batch's tree holds the five items (the poison record is not one), under one signature.
    assert_eq!(sizes, [5].into());
    assert_eq!(kms.signed(), 1, "KMS signed once, for the run");
    assert_eq!(reasons(&dlq), ["invalid_json"]);
}
