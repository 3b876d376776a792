//! Owns one batch: dedupe by SQS message id, bounded concurrency, FIFO group order, retries,
//! the deadline, and panics turned into failures. Must not know DynamoDB or the Lambda runtime.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;
use std::time::Duration;

use aws_lambda_events::sqs::SqsMessage;
use chrono::{DateTime, Utc};
use futures::{FutureExt, StreamExt, stream};
use tokio::time::Instant;

use crate::message::{AuditItem, AuditMessage, Delivery, InvalidMessage, parse_sent_timestamp};
use crate::store::{AuditStore, PutOutcome, StoreError};

/// How a batch runs; built from `Config` in production, by hand in tests.
#[derive(Debug, Clone)]
pub struct BatchSettings {
    /// Writes in flight at most.
    pub max_concurrency: usize,
    /// No record starts, and no write stays in flight, later than `deadline - margin`.
    pub deadline_margin: Duration,
    pub retention_days: Option<u32>,
    pub retry: RetryPolicy,
}

/// Retries of throttling, 5xx, timeouts and connection errors within the invocation.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts per record, the first included.
    pub max_attempts: u32,
    /// Backoff before retry n is drawn from [cap/2, cap] with cap = min(max_delay, base × 2^(n-1)).
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// One attempt with no answer by then counts as a timeout (retryable).
    pub attempt_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(25),
            max_delay: Duration::from_secs(1),
            attempt_timeout: Duration::from_secs(3),
        }
    }
}

impl RetryPolicy {
    fn backoff(&self, retry: u32) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20));
        let cap = exp.min(self.max_delay);
        let half = cap / 2;
        half + half.mul_f64(fastrand::f64())
    }
}

/// What happened to one record.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Written,
    /// Already stored with the same payload: success, nothing written.
    Duplicate,
    Failed(Failure),
}

/// Why a record is reported as failed (and so comes back, and ends in the dead-letter queue).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Failure {
    #[error(transparent)]
    Invalid(#[from] InvalidMessage),
    #[error("an item with this key and another payload exists; the stored item was kept")]
    Conflict,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("not finished before the invocation's deadline margin")]
    Deadline,
    #[error("processing the record panicked")]
    Panic,
    #[error("an earlier record of its FIFO message group failed")]
    GroupStopped,
}

impl Failure {
    /// A stable code for logs, metrics and the demo's report.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Invalid(invalid) => invalid.code(),
            Self::Conflict => "conflict",
            Self::Store(error) => error.code(),
            Self::Deadline => "deadline",
            Self::Panic => "panic",
            Self::GroupStopped => "group_stopped",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RecordOutcome {
    pub sqs_message_id: String,
    pub outcome: Outcome,
}

/// Every distinct record of the batch with its outcome, in batch order.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchReport {
    /// Records in the event, repeats included.
    pub received: usize,
    pub records: Vec<RecordOutcome>,
    /// The earliest `SentTimestamp` in the batch.
    pub oldest_sent_at: Option<DateTime<Utc>>,
}

impl BatchReport {
    pub fn written(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Written))
    }

    pub fn duplicates(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Duplicate))
    }

    pub fn failures(&self) -> impl Iterator<Item = (&str, &Failure)> {
        self.records.iter().filter_map(|r| match &r.outcome {
            Outcome::Failed(failure) => Some((r.sqs_message_id.as_str(), failure)),
            _ => None,
        })
    }

    pub fn failed_by_reason(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for (_, failure) in self.failures() {
            *counts.entry(failure.code()).or_insert(0) += 1;
        }
        counts
    }

    fn count(&self, pick: impl Fn(&Outcome) -> bool) -> usize {
        self.records.iter().filter(|r| pick(&r.outcome)).count()
    }
}

/// The only error that fails a whole batch: a failure could not be reported for this record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error(
        "record {position} of the batch has no messageId, so its failure could not be reported"
    )]
    MissingMessageId { position: usize },
}

/// Processes a batch. `deadline` is when Lambda would stop the invocation (None: no deadline).
pub async fn process_batch<S: AuditStore>(
    store: &S,
    settings: &BatchSettings,
    records: &[SqsMessage],
    deadline: Option<Instant>,
) -> Result<BatchReport, BatchError> {
    let ids = message_ids(records)?;
    let mut seen = HashSet::with_capacity(ids.len());
    let unique: Vec<usize> = (0..records.len())
        .filter(|&i| seen.insert(ids[i]))
        .collect();
    let cutoff = deadline.map(|d| {
        d.checked_sub(settings.deadline_margin)
            .unwrap_or_else(Instant::now)
    });

    let slots: Vec<OnceLock<Outcome>> = records.iter().map(|_| OnceLock::new()).collect();
    let work = stream::iter(units(records, &unique)).for_each_concurrent(
        settings.max_concurrency.max(1),
        |unit| {
            let slots = &slots;
            async move {
                // Set once a record of this unit fails: the rest of a FIFO group is not processed.
                let mut stop: Option<Failure> = None;
                for index in unit {
                    let outcome = match &stop {
                        Some(reason) => Outcome::Failed(reason.clone()),
                        None if cutoff.is_some_and(|c| Instant::now() >= c) => {
                            Outcome::Failed(Failure::Deadline)
                        }
                        None => isolated(store, settings, &records[index], cutoff).await,
                    };
                    if let (None, Outcome::Failed(failure)) = (&stop, &outcome) {
                        stop = Some(match failure {
                            Failure::Deadline => Failure::Deadline,
                            _ => Failure::GroupStopped,
                        });
                    }
                    // Each index belongs to exactly one unit, so the slot is still empty.
                    let _ = slots[index].set(outcome);
                }
            }
        },
    );
    match cutoff {
        // Whatever is still running at the cutoff is dropped, and reported below as unfinished.
        Some(cutoff) => {
            let _ = tokio::time::timeout_at(cutoff, work).await;
        }
        None => work.await,
    }

    let records_out = unique
        .iter()
        .map(|&i| RecordOutcome {
            sqs_message_id: ids[i].to_owned(),
            outcome: slots[i]
                .get()
                .cloned()
                .unwrap_or(Outcome::Failed(Failure::Deadline)),
        })
        .collect();
    Ok(BatchReport {
        received: records.len(),
        records: records_out,
        oldest_sent_at: records
            .iter()
            .filter_map(|r| {
                parse_sent_timestamp(r.attributes.get("SentTimestamp").map(String::as_str))
            })
            .min(),
    })
}

fn message_ids(records: &[SqsMessage]) -> Result<Vec<&str>, BatchError> {
    records
        .iter()
        .enumerate()
        .map(|(position, record)| match record.message_id.as_deref() {
            Some(id) if !id.is_empty() => Ok(id),
            _ => Err(BatchError::MissingMessageId { position }),
        })
        .collect()
}

/// Units of work, each run one record at a time: one per FIFO message group (in batch order),
/// one per record on a standard queue.
fn units(records: &[SqsMessage], unique: &[usize]) -> Vec<Vec<usize>> {
    let mut units: Vec<Vec<usize>> = Vec::new();
    let mut groups: HashMap<&str, usize> = HashMap::new();
    for &index in unique {
        let record = &records[index];
        let fifo = record
            .event_source_arn
            .as_deref()
            .is_some_and(|arn| arn.ends_with(".fifo"));
        match record.attributes.get("MessageGroupId").filter(|_| fifo) {
            Some(group) => match groups.get(group.as_str()) {
                Some(&unit) => units[unit].push(index),
                None => {
                    groups.insert(group, units.len());
                    units.push(vec![index]);
                }
            },
            None => units.push(vec![index]),
        }
    }
    units
}

/// One record, with a panic anywhere in it turned into a failure of that record only.
async fn isolated<S: AuditStore>(
    store: &S,
    settings: &BatchSettings,
    record: &SqsMessage,
    cutoff: Option<Instant>,
) -> Outcome {
    match AssertUnwindSafe(process_record(store, settings, record, cutoff))
        .catch_unwind()
        .await
    {
        Ok(outcome) => outcome,
        Err(_) => Outcome::Failed(Failure::Panic),
    }
}

async fn process_record<S: AuditStore>(
    store: &S,
    settings: &BatchSettings,
    record: &SqsMessage,
    cutoff: Option<Instant>,
) -> Outcome {
    let attribute = |name: &str| record.attributes.get(name).map(String::as_str);
    let sent_at = parse_sent_timestamp(attribute("SentTimestamp"));
    let message = match AuditMessage::parse(record.body.as_deref(), sent_at) {
        Ok(message) => message,
        Err(invalid) => return Outcome::Failed(invalid.into()),
    };
    let delivery = Delivery {
        sqs_message_id: record.message_id.clone().unwrap_or_default(),
        sent_at,
        receive_count: attribute("ApproximateReceiveCount").and_then(|c| c.trim().parse().ok()),
        event_source: record.event_source_arn.clone(),
    };
    let item = AuditItem::new(message, delivery, Utc::now(), settings.retention_days);
    write(store, &item, &settings.retry, cutoff).await
}

/// One conditional write, retried while the error is transient, attempts remain and the
/// backoff still ends before the cutoff.
async fn write<S: AuditStore>(
    store: &S,
    item: &AuditItem,
    retry: &RetryPolicy,
    cutoff: Option<Instant>,
) -> Outcome {
    let mut attempt = 1;
    loop {
        let budget = cutoff.map(|c| c.saturating_duration_since(Instant::now()));
        if budget.is_some_and(|b| b.is_zero()) {
            return Outcome::Failed(Failure::Deadline);
        }
        let limit = budget.map_or(retry.attempt_timeout, |b| b.min(retry.attempt_timeout));
        let result = match tokio::time::timeout(limit, store.put_if_absent(item)).await {
            Ok(result) => result,
            Err(_) if limit < retry.attempt_timeout => return Outcome::Failed(Failure::Deadline),
            Err(_) => Err(StoreError::Unavailable(format!(
                "no answer within {} ms",
                limit.as_millis()
            ))),
        };
        match result {
            Ok(PutOutcome::Written) => return Outcome::Written,
            Ok(PutOutcome::Duplicate) => return Outcome::Duplicate,
            Ok(PutOutcome::Conflict) => return Outcome::Failed(Failure::Conflict),
            Err(error) if error.is_retryable() && attempt < retry.max_attempts => {
                let delay = retry.backoff(attempt);
                if cutoff.is_some_and(|c| Instant::now() + delay >= c) {
                    return Outcome::Failed(error.into());
                }
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Err(error) => return Outcome::Failed(error.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

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
            },
        }
    }

    fn record(id: &str, body: &str) -> SqsMessage {
        let mut record = SqsMessage::default();
        record.message_id = Some(id.to_owned());
        record.body = Some(body.to_owned());
        record.event_source_arn = Some(QUEUE.to_owned());
        record
            .attributes
            .insert("SentTimestamp".into(), "1795348800000".into());
        record
            .attributes
            .insert("ApproximateReceiveCount".into(), "1".into());
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
        let report = process_batch(&store, &settings(32), &records, None)
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
        let report = process_batch(&store, &settings(32), &records, None)
            .await
            .unwrap();
        assert_eq!(failed_ids(&report), ["bad"]);
        assert_eq!(
            outcome_of(&report, "bad"),
            &Outcome::Failed(Failure::Invalid(InvalidMessage::InvalidJson(
                "expected ident at line 1 column 2".into()
            )))
        );
        assert_eq!(store.items().len(), 2);
    }

    #[tokio::test]
    async fn concurrency_never_exceeds_the_bound() {
        let store = MemoryStore::new().with_delay(Duration::from_millis(20));
        let records: Vec<_> = (0..40).map(|i| valid(&format!("m{i}"))).collect();
        let report = process_batch(&store, &settings(4), &records, None)
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
        let report = process_batch(&store, &settings(32), &records, None)
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
        let first = record("sqs-1", r#"{"auditText":"a","messageId":"p-1"}"#);
        process_batch(&store, &settings(32), &[first], None)
            .await
            .unwrap();

        let retry = record("sqs-2", r#"{"auditText":"a","messageId":"p-1"}"#);
        let clash = record(
            "sqs-3",
            r#"{"auditText":"changed","messageId":"p-1","auditTime":"2026-11-22T12:00:00Z"}"#,
        );
        let report = process_batch(&store, &settings(32), &[retry, clash], None)
            .await
            .unwrap();
        assert_eq!(outcome_of(&report, "sqs-2"), &Outcome::Duplicate);
        assert_eq!(
            outcome_of(&report, "sqs-3"),
            &Outcome::Failed(Failure::Conflict)
        );
        let items = store.items();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].audit_text, "a");
        assert_eq!(items[0].sqs_message_id, "sqs-1");
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
        let report = process_batch(&store, &settings(32), &records, None)
            .await
            .unwrap();
        assert_eq!(failed_ids(&report), ["a2", "a3"]);
        assert_eq!(
            outcome_of(&report, "a2").clone(),
            Outcome::Failed(Failure::Invalid(InvalidMessage::InvalidJson(
                "expected value at line 1 column 1".into()
            )))
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

    #[tokio::test]
    async fn fifo_records_of_one_group_are_written_in_order_one_at_a_time() {
        let store = MemoryStore::new().with_delay(Duration::from_millis(5));
        let records: Vec<_> = (0..20)
            .map(|i| fifo(&format!("g{i:02}"), "G", r#"{"auditText":"x"}"#))
            .collect();
        process_batch(&store, &settings(32), &records, None)
            .await
            .unwrap();
        let expected: Vec<String> = (0..20).map(|i| format!("g{i:02}")).collect();
        assert_eq!(store.write_order(), expected);
        assert_eq!(store.max_in_flight(), 1);
    }

    #[tokio::test]
    async fn standard_queue_ignores_message_group_ids() {
        let store = MemoryStore::new().with_delay(Duration::from_millis(20));
        let mut records: Vec<_> = (0..8).map(|i| valid(&format!("m{i}"))).collect();
        for r in &mut records {
            r.attributes.insert("MessageGroupId".into(), "same".into());
        }
        process_batch(&store, &settings(8), &records, None)
            .await
            .unwrap();
        assert_eq!(store.max_in_flight(), 8);
    }

    #[tokio::test]
    async fn a_panic_fails_only_its_record() {
        let store = MemoryStore::new();
        store.panic_on("boom");
        let records = vec![valid("m1"), valid("boom"), valid("m2")];
        let report = process_batch(&store, &settings(32), &records, None)
            .await
            .unwrap();
        assert_eq!(
            outcome_of(&report, "boom"),
            &Outcome::Failed(Failure::Panic)
        );
        assert_eq!(report.written(), 2);
    }

    #[tokio::test]
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
        let report = process_batch(&store, &settings(32), &records, None)
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

    #[tokio::test]
    async fn a_slow_store_is_cut_at_the_deadline_and_unfinished_records_fail() {
        let store = MemoryStore::new().with_delay(Duration::from_millis(300));
        let records: Vec<_> = (0..10).map(|i| valid(&format!("m{i}"))).collect();
        let started = Instant::now();
        let deadline = started + Duration::from_millis(500);
        // Margin 100 ms: writes in the first wave (2 in flight) finish at ~300 ms, the second
        // wave cannot finish before the cutoff at 400 ms, the rest never start.
        let report = process_batch(&store, &settings(2), &records, Some(deadline))
            .await
            .unwrap();
        let elapsed = started.elapsed();
        assert!(
            elapsed < Duration::from_millis(450),
            "returned after {elapsed:?}"
        );
        assert_eq!(report.written(), 2);
        assert_eq!(report.failed_by_reason().get("deadline"), Some(&8));
    }

    #[tokio::test]
    async fn no_record_starts_when_the_deadline_margin_is_already_reached() {
        let store = MemoryStore::new();
        let records = vec![valid("m1"), valid("m2")];
        let deadline = Instant::now() + Duration::from_millis(50);
        let report = process_batch(&store, &settings(32), &records, Some(deadline))
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
        let error = process_batch(&store, &settings(32), &[valid("m1"), nameless], None)
            .await
            .unwrap_err();
        assert_eq!(error, BatchError::MissingMessageId { position: 1 });
        assert_eq!(store.calls(), 0);
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
}
