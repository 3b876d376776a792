//! Owns one batch: dedupe by SQS message id, bounded concurrency, FIFO group order, retries,
//! the deadline, and panics turned into failures. Must not know DynamoDB or the Lambda runtime.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use aws_lambda_events::sqs::SqsMessage;
use chrono::{DateTime, Utc};
use futures::{FutureExt, StreamExt, stream};
use tokio::time::Instant;

use crate::deadletter::{
    Attribute, DeadLetter, DeadLetterQueue, FAILURE_CONTEXT, FAILURE_REASON, FailureContext,
    MAX_ORIGINAL_ATTRIBUTES, MalformedContext, SendError, is_transient,
};
use crate::message::{
    AuditItem, AuditMessage, Delivery, InvalidMessage, canonical_time, parse_sent_timestamp,
};
use crate::store::{AuditStore, PutOutcome, StoreError};

/// How a batch runs; built from `Config` in production, by hand in tests.
#[derive(Debug, Clone)]
pub struct BatchSettings {
    /// Writes in flight at most.
    pub max_concurrency: usize,
    /// Time kept in hand before the deadline. No record starts, and no write stays in flight,
    /// later than `deadline - margin`; dead-letter sends may use the first half of the margin
    /// (until `deadline - margin / 2`); the second half pays for the response and telemetry.
    pub deadline_margin: Duration,
    pub retention_days: Option<u32>,
    pub retry: RetryPolicy,
    /// The source queue's `maxReceiveCount`: a transient failure on this receive (or a later
    /// one) is dead-lettered by the function, since SQS would move it without a reason.
    pub max_receive_count: u64,
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
    /// Tokens of the invocation's shared retry budget, in the manner of the SDK's retry quota:
    /// a retry costs `RETRY_COST` (a timeout `TIMEOUT_RETRY_COST`) and gives it back when it
    /// succeeds; a write that succeeds at its first attempt adds one (up to the start value). An empty budget ends retrying for every record: a
    /// throttled table is not hammered with `MAX_CONCURRENCY` × attempts requests, and what is
    /// left is reported for SQS to retry later.
    pub retry_budget: u32,
}

/// What one retry draws from the budget.
pub const RETRY_COST: i64 = 5;
/// What one retry after a timeout draws (a timeout costs the table more than an error).
pub const TIMEOUT_RETRY_COST: i64 = 10;

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(25),
            max_delay: Duration::from_secs(1),
            attempt_timeout: Duration::from_secs(3),
            retry_budget: 100,
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

/// The retry budget of one invocation, shared by all its records.
#[derive(Debug)]
struct RetryBudget {
    tokens: AtomicI64,
    capacity: i64,
}

impl RetryBudget {
    fn new(capacity: u32) -> Self {
        Self {
            tokens: AtomicI64::new(i64::from(capacity)),
            capacity: i64::from(capacity),
        }
    }

    /// Takes `cost` tokens if that many are left.
    fn acquire(&self, cost: i64) -> bool {
        self.tokens
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                (t >= cost).then_some(t - cost)
            })
            .is_ok()
    }

    fn refund(&self, tokens: i64) {
        let _ = self
            .tokens
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some((t + tokens).min(self.capacity))
            });
    }
}

/// What happened to one record.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Written,
    /// Already stored with the same payload: success, nothing written.
    Duplicate,
    /// Failed, and sent to the dead-letter queue with its reason: reported as succeeded, so SQS
    /// deletes it from the source queue.
    DeadLettered(Failure),
    /// Reported in `batchItemFailures`: SQS delivers it again (and its redrive policy applies).
    Failed(Failure),
}

/// Why a record failed.
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
    /// A stable code for logs, metrics, the dead-letter queue and the demo's report.
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

    /// Another receive may succeed (throttling, an unavailable store, the deadline, a missing
    /// table, a stopped FIFO group); everything else fails the same way every time.
    pub fn is_transient(&self) -> bool {
        is_transient(self.code())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RecordOutcome {
    pub sqs_message_id: String,
    pub outcome: Outcome,
    /// Why a dead-letter send that was due did not happen (the record is then `Failed`).
    pub dead_letter_error: Option<SendError>,
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

    /// Records reported in `batchItemFailures`.
    pub fn failures(&self) -> impl Iterator<Item = (&str, &Failure)> {
        self.records.iter().filter_map(|r| match &r.outcome {
            Outcome::Failed(failure) => Some((r.sqs_message_id.as_str(), failure)),
            _ => None,
        })
    }

    /// Records sent to the dead-letter queue (reported as succeeded).
    pub fn dead_lettered(&self) -> impl Iterator<Item = (&str, &Failure)> {
        self.records.iter().filter_map(|r| match &r.outcome {
            Outcome::DeadLettered(failure) => Some((r.sqs_message_id.as_str(), failure)),
            _ => None,
        })
    }

    pub fn failed_by_reason(&self) -> BTreeMap<&'static str, usize> {
        by_reason(self.failures())
    }

    pub fn dead_lettered_by_reason(&self) -> BTreeMap<&'static str, usize> {
        by_reason(self.dead_lettered())
    }

    fn count(&self, pick: impl Fn(&Outcome) -> bool) -> usize {
        self.records.iter().filter(|r| pick(&r.outcome)).count()
    }
}

fn by_reason<'a>(
    failures: impl Iterator<Item = (&'a str, &'a Failure)>,
) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for (_, failure) in failures {
        *counts.entry(failure.code()).or_insert(0) += 1;
    }
    counts
}

/// The only error that fails a whole batch: a failure could not be reported for this record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error(
        "record {position} of the batch has no messageId, so its failure could not be reported"
    )]
    MissingMessageId { position: usize },
}

/// The ports a batch works through: the store, and the dead-letter queue when one is set.
pub struct Ports<'a, S, Q> {
    pub store: &'a S,
    pub dead_letters: Option<&'a Q>,
}

/// The instants a batch works to.
#[derive(Debug, Clone, Copy)]
struct Cutoffs {
    /// No record starts and no write is in flight after it.
    work: Option<Instant>,
    /// No dead-letter send is in flight after it.
    send: Option<Instant>,
}

/// Processes a batch. `deadline` is when Lambda would stop the invocation (None: no deadline).
pub async fn process_batch<S: AuditStore, Q: DeadLetterQueue>(
    ports: Ports<'_, S, Q>,
    settings: &BatchSettings,
    records: &[SqsMessage],
    deadline: Option<Instant>,
) -> Result<BatchReport, BatchError> {
    let ids = message_ids(records)?;
    let mut seen = HashSet::with_capacity(ids.len());
    let unique: Vec<usize> = (0..records.len())
        .filter(|&i| seen.insert(ids[i]))
        .collect();
    let before =
        |margin: Duration| deadline.map(|d| d.checked_sub(margin).unwrap_or_else(Instant::now));
    let cutoffs = Cutoffs {
        work: before(settings.deadline_margin),
        send: before(settings.deadline_margin / 2),
    };
    let budget = RetryBudget::new(settings.retry.retry_budget);

    let slots: Vec<OnceLock<(Outcome, Option<SendError>)>> =
        records.iter().map(|_| OnceLock::new()).collect();
    let work = stream::iter(units(records, &unique)).for_each_concurrent(
        settings.max_concurrency.max(1),
        |unit| {
            let (slots, budget, ports) = (&slots, &budget, &ports);
            async move {
                // Set once a record of this unit fails: the rest of a FIFO group is not processed.
                let mut stop: Option<Failure> = None;
                for index in unit {
                    let record = &records[index];
                    let outcome = match &stop {
                        Some(reason) => Outcome::Failed(reason.clone()),
                        None if cutoffs.work.is_some_and(|c| Instant::now() >= c) => {
                            Outcome::Failed(Failure::Deadline)
                        }
                        None => isolated(ports.store, settings, budget, record, cutoffs.work).await,
                    };
                    let (outcome, send_error) = match outcome {
                        Outcome::Failed(failure) => {
                            settle(ports.dead_letters, settings, record, failure, cutoffs.send)
                                .await
                        }
                        done => (done, None),
                    };
                    if let (None, Outcome::Failed(failure)) = (&stop, &outcome) {
                        stop = Some(match failure {
                            Failure::Deadline => Failure::Deadline,
                            _ => Failure::GroupStopped,
                        });
                    }
                    // Each index belongs to exactly one unit, so the slot is still empty.
                    let _ = slots[index].set((outcome, send_error));
                }
            }
        },
    );
    match cutoffs.send {
        // Whatever is still running then is dropped, and reported below as unfinished.
        Some(cutoff) => {
            let _ = tokio::time::timeout_at(cutoff, work).await;
        }
        None => work.await,
    }

    let records_out = unique
        .iter()
        .map(|&i| {
            let (outcome, dead_letter_error) = slots[i]
                .get()
                .cloned()
                .unwrap_or((Outcome::Failed(Failure::Deadline), None));
            RecordOutcome {
                sqs_message_id: ids[i].to_owned(),
                outcome,
                dead_letter_error,
            }
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
        match fifo_group(record) {
            Some(group) => match groups.get(group) {
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

/// The record's `MessageGroupId` when it comes from a FIFO queue.
fn fifo_group(record: &SqsMessage) -> Option<&str> {
    let fifo = record
        .event_source_arn
        .as_deref()
        .is_some_and(|arn| arn.ends_with(".fifo"));
    record
        .attributes
        .get("MessageGroupId")
        .filter(|_| fifo)
        .map(String::as_str)
}

/// One record, with a panic anywhere in it turned into a failure of that record only.
async fn isolated<S: AuditStore>(
    store: &S,
    settings: &BatchSettings,
    budget: &RetryBudget,
    record: &SqsMessage,
    cutoff: Option<Instant>,
) -> Outcome {
    match AssertUnwindSafe(process_record(store, settings, budget, record, cutoff))
        .catch_unwind()
        .await
    {
        Ok(outcome) => outcome,
        Err(_) => Outcome::Failed(Failure::Panic),
    }
}

/// The identity of the record's original delivery: its own, or the one its `failureContext`
/// carries when it was dead-lettered before and redriven. A malformed context is ignored; it is
/// returned beside the identity so that the caller logs it once per record.
struct Original {
    message_id: String,
    sent_timestamp: Option<String>,
}

fn original(record: &SqsMessage) -> (Original, Option<MalformedContext>) {
    let own_id = record.message_id.clone().unwrap_or_default();
    let own_sent = record.attributes.get("SentTimestamp").cloned();
    let context = record
        .message_attributes
        .get(FAILURE_CONTEXT)
        .and_then(|a| a.string_value.as_deref())
        .map(FailureContext::parse);
    match context {
        Some(Ok(c)) => (
            Original {
                message_id: c.sqs_message_id,
                sent_timestamp: c.sent_timestamp.or(own_sent),
            },
            None,
        ),
        malformed => (
            Original {
                message_id: own_id,
                sent_timestamp: own_sent,
            },
            malformed.and_then(Result::err),
        ),
    }
}

async fn process_record<S: AuditStore>(
    store: &S,
    settings: &BatchSettings,
    budget: &RetryBudget,
    record: &SqsMessage,
    cutoff: Option<Instant>,
) -> Outcome {
    let (original, malformed) = original(record);
    if let Some(error) = malformed {
        tracing::warn!(sqs_message_id = ?record.message_id, %error, "failureContext ignored");
    }
    let sent_at = parse_sent_timestamp(original.sent_timestamp.as_deref());
    let message = match AuditMessage::parse(record.body.as_deref(), sent_at) {
        Ok(message) => message,
        Err(invalid) => return Outcome::Failed(invalid.into()),
    };
    let delivery = Delivery {
        sqs_message_id: record.message_id.clone().unwrap_or_default(),
        original_message_id: original.message_id,
        sent_at,
        receive_count: receive_count(record),
        event_source: record.event_source_arn.clone(),
    };
    let item = AuditItem::new(message, delivery, Utc::now(), settings.retention_days);
    write(store, &item, &settings.retry, budget, cutoff).await
}

fn receive_count(record: &SqsMessage) -> Option<u64> {
    record
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|c| c.trim().parse().ok())
}

/// One conditional write, retried while the error is transient, attempts and the shared budget
/// remain, and the backoff still ends before the cutoff.
async fn write<S: AuditStore>(
    store: &S,
    item: &AuditItem,
    retry: &RetryPolicy,
    budget: &RetryBudget,
    cutoff: Option<Instant>,
) -> Outcome {
    let mut attempt = 1;
    let mut drawn = 0;
    loop {
        let left = cutoff.map(|c| c.saturating_duration_since(Instant::now()));
        if left.is_some_and(|b| b.is_zero()) {
            return Outcome::Failed(Failure::Deadline);
        }
        let limit = left.map_or(retry.attempt_timeout, |b| b.min(retry.attempt_timeout));
        let (result, timed_out) = match tokio::time::timeout(limit, store.put_if_absent(item)).await
        {
            Ok(result) => (result, false),
            Err(_) if limit < retry.attempt_timeout => {
                return Outcome::Failed(Failure::Deadline);
            }
            Err(_) => (
                Err(StoreError::Unavailable(format!(
                    "no answer within {} ms",
                    limit.as_millis()
                ))),
                true,
            ),
        };
        if result.is_ok() {
            // As the SDK's retry quota: a first-attempt success adds a token, a retry that
            // succeeded gives back what it drew.
            budget.refund(if attempt == 1 { 1 } else { drawn });
        }
        match result {
            Ok(PutOutcome::Written) => return Outcome::Written,
            Ok(PutOutcome::Duplicate) => return Outcome::Duplicate,
            Ok(PutOutcome::Conflict) => return Outcome::Failed(Failure::Conflict),
            Err(error) if error.is_retryable() && attempt < retry.max_attempts => {
                let delay = retry.backoff(attempt);
                if cutoff.is_some_and(|c| Instant::now() + delay >= c) {
                    return Outcome::Failed(error.into());
                }
                let cost = if timed_out {
                    TIMEOUT_RETRY_COST
                } else {
                    RETRY_COST
                };
                if !budget.acquire(cost) {
                    return Outcome::Failed(error.into());
                }
                drawn = cost;
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Err(error) => return Outcome::Failed(error.into()),
        }
    }
}

/// A failed record: dead-lettered when a dead-letter queue is set and the failure is permanent,
/// or transient on the last receive; otherwise, or when the send fails, reported failed.
async fn settle<Q: DeadLetterQueue>(
    dead_letters: Option<&Q>,
    settings: &BatchSettings,
    record: &SqsMessage,
    failure: Failure,
    cutoff: Option<Instant>,
) -> (Outcome, Option<SendError>) {
    let Some(queue) = dead_letters else {
        return (Outcome::Failed(failure), None);
    };
    let last_receive = receive_count(record).is_some_and(|n| n >= settings.max_receive_count);
    if failure.is_transient() && !last_receive {
        return (Outcome::Failed(failure), None);
    }
    let letter = match dead_letter(record, &failure, Utc::now()) {
        Ok(letter) => letter,
        Err(error) => return (Outcome::Failed(failure), Some(error)),
    };
    let left = cutoff.map(|c| c.saturating_duration_since(Instant::now()));
    let sent = match left {
        Some(left) if left.is_zero() => Err(SendError::Deadline),
        Some(left) => tokio::time::timeout(left, queue.send(&letter))
            .await
            .unwrap_or(Err(SendError::Deadline)),
        None => queue.send(&letter).await,
    };
    match sent {
        Ok(()) => (Outcome::DeadLettered(failure), None),
        Err(error) => (Outcome::Failed(failure), Some(error)),
    }
}

/// The dead-letter message of a failed record: its body byte for byte, its attributes, and
/// `failureReason` and `failureContext` (with the original delivery's identity).
pub fn dead_letter(
    record: &SqsMessage,
    failure: &Failure,
    now: DateTime<Utc>,
) -> Result<DeadLetter, SendError> {
    let body = match record.body.as_deref() {
        Some(body) if !body.is_empty() => body.to_owned(),
        _ => return Err(SendError::NoBody),
    };
    let mut attributes: std::collections::BTreeMap<String, Attribute> = record
        .message_attributes
        .iter()
        .filter(|(name, _)| *name != FAILURE_REASON && *name != FAILURE_CONTEXT)
        .map(|(name, a)| {
            let attribute = Attribute {
                data_type: a.data_type.clone().unwrap_or_else(|| "String".into()),
                string_value: a.string_value.clone(),
                binary_value: a.binary_value.as_ref().map(|b| b.0.clone()),
            };
            (name.clone(), attribute)
        })
        .collect();
    if attributes.len() > MAX_ORIGINAL_ATTRIBUTES {
        return Err(SendError::TooManyAttributes(attributes.len()));
    }
    // A malformed context was logged when the record was processed; here it is only ignored.
    let (original, _) = original(record);
    let context = FailureContext {
        reason: failure.code().to_owned(),
        detail: failure.to_string(),
        sqs_message_id: original.message_id,
        sent_timestamp: original.sent_timestamp,
        receive_count: receive_count(record),
        failed_at: canonical_time(now),
        event_source_arn: record.event_source_arn.clone(),
    };
    attributes.insert(FAILURE_REASON.into(), Attribute::string(failure.code()));
    attributes.insert(FAILURE_CONTEXT.into(), Attribute::string(context.to_json()));
    let group_id = fifo_group(record).map(str::to_owned);
    Ok(DeadLetter {
        body,
        attributes,
        // FIFO: the record's own SQS message id deduplicates a repeated send of this delivery;
        // a redriven delivery has a new id, so a second failure is never deduplicated away.
        deduplication_id: group_id.as_ref().and(record.message_id.clone()),
        group_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deadletter::memory::MemoryDeadLetterQueue;
    use crate::deadletter::{FAILURE_CONTEXT, FailureContext, SendError};
    use crate::store::memory::MemoryStore;

    fn ports(store: &MemoryStore) -> Ports<'_, MemoryStore, MemoryDeadLetterQueue> {
        Ports {
            store,
            dead_letters: None,
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
        };
        let mut redriven = with_attribute(
            record("redriven", r#"{"auditText":"text of orig"}"#),
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
            with_attribute(valid("m1"), FAILURE_CONTEXT, "not json"),
            with_attribute(valid("m2"), FAILURE_CONTEXT, r#"{"reason":"throttled"}"#),
        ];
        let report = process_batch(with_dlq(&store, &dlq), &settings(32), &records, None)
            .await
            .unwrap();
        assert_eq!(report.written(), 2);
        let keys: Vec<String> = store.items().into_iter().map(|i| i.message_id).collect();
        assert_eq!(keys, ["m1", "m2"]);
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
        };
        let again = with_attribute(
            record("second-id", "[]"),
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
    async fn records_cut_off_by_the_deadline_on_their_last_receive_are_dead_lettered_in_the_margin()
    {
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
}
