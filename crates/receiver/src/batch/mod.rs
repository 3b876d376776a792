//! Owns one batch: dedupe by SQS message id, bounded concurrency, the deadline, panics turned
//! into failures, and each record's outcome. Must not know DynamoDB or the Lambda runtime. The
//! rest is one concern a file: `delivery` (a record's delivery, read once, redrives included),
//! `schedule` (units, FIFO groups), `retry` (attempts, budget), `settle` (dead-letter or report),
//! `letter` (the dead-letter message).

mod delivery;
mod letter;
mod retry;
mod schedule;
mod settle;
#[cfg(test)]
mod tests;

pub use delivery::Received;
pub use letter::dead_letter;
pub use retry::{RETRY_COST, RetryPolicy, TIMEOUT_RETRY_COST};

use std::collections::{BTreeMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::OnceLock;
use std::time::Duration;

use aws_lambda_events::sqs::SqsMessage;
use chrono::{DateTime, Utc};
use futures::{FutureExt, StreamExt, stream};
use tokio::time::Instant;

use audit_model::Reason;
use audit_model::access::{self, Refused};
use audit_model::context::Redrivers;
use audit_model::message::{AuditItem, AuditMessage, InvalidMessage, parse_sent_timestamp};

use crate::attest::{Attester, ITEMS_PER_SIGNATURE};
use crate::deadletter::{DeadLetterQueue, SendError};
use crate::store::{AuditStore, StoreError};
use retry::{RetryBudget, write};
use schedule::{message_ids, units};
use settle::settle;

/// How a batch runs; built from `Config` in production, by hand in tests.
#[derive(Debug, Clone)]
pub struct BatchSettings {
    /// Writes in flight at most.
    pub max_concurrency: usize,
    /// Time kept in hand before the deadline. No record starts, and no write stays in flight,
    /// later than `deadline - margin`; no dead-letter send starts later than `deadline - margin
    /// / 2`, and a send once started is waited for until `deadline - margin / 4`, so each has at
    /// least a quarter of the margin (250 ms by default; SQS answers in tens of milliseconds);
    /// the last quarter pays for the response and telemetry.
    pub deadline_margin: Duration,
    pub retention_days: Option<u32>,
    pub retry: RetryPolicy,
    /// The source queue's `maxReceiveCount`: a transient failure on this receive (or a later
    /// one) is dead-lettered by the function, since SQS would move it without a reason.
    pub max_receive_count: u64,
    /// The access queue's ARN (`ACCESS_QUEUE_ARN`): its records must be access events of their
    /// attested sender (`audit_model::access`). None: every source is an ordinary queue.
    pub access_queue_arn: Option<String>,
    /// Whose deliveries' `failureContext` is honoured (the function's role, the redrive role);
    /// from anyone else it is ignored and the item records who really sent it.
    pub redrivers: Redrivers,
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
    /// Not an event this source may deliver: an access event outside the access queue, or
    /// anything but an access event of its attested sender on it.
    #[error(transparent)]
    Access(#[from] Refused),
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
    /// The reason: its code for logs, metrics, the dead-letter queue and the demo's report, and
    /// its disposition.
    pub fn reason(&self) -> Reason {
        match self {
            Self::Invalid(invalid) => invalid.reason(),
            Self::Access(refused) => refused.reason(),
            Self::Conflict => Reason::Conflict,
            Self::Store(error) => error.reason(),
            Self::Deadline => Reason::Deadline,
            Self::Panic => Reason::Panic,
            Self::GroupStopped => Reason::GroupStopped,
        }
    }

    pub fn code(&self) -> &'static str {
        self.reason().code()
    }

    /// Another receive may succeed (`Reason::disposition`).
    pub fn is_transient(&self) -> bool {
        self.reason().is_transient()
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

/// The ports a batch works through: the store, the dead-letter queue when one is set, and the
/// run's attestation key when one is (`ATTESTATION_KEY_ID`).
pub struct Ports<'a, S, Q> {
    pub store: &'a S,
    pub dead_letters: Option<&'a Q>,
    pub attester: Option<&'a Attester>,
}

/// The instants a batch works to.
#[derive(Debug, Clone, Copy)]
struct Cutoffs {
    /// No record starts and no write is in flight after it.
    work: Option<Instant>,
    /// When dead-letter sends may start, and until when one is waited for.
    sends: SendCutoffs,
}

/// The instants dead-letter sends work to. A send is not given up while SQS may still be taking
/// it: one that SQS took and that the batch stopped waiting for would leave the record reported
/// failed with its copy already in the dead-letter queue, and its next receive (or SQS's own
/// move, after the last) would make a second copy. So a send starts only while a whole share of
/// the margin is left to wait for it, and once started is waited for to the end of that share,
/// not cut at whatever time happened to be left.
#[derive(Debug, Clone, Copy)]
pub(super) struct SendCutoffs {
    /// No send starts after it: `deadline - margin / 2`.
    pub(super) start: Option<Instant>,
    /// No send is in flight after it: `deadline - margin / 4`.
    pub(super) end: Option<Instant>,
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
        sends: SendCutoffs {
            start: before(settings.deadline_margin / 2),
            end: before(settings.deadline_margin / 4),
        },
    };
    let budget = RetryBudget::new(settings.retry.retry_budget);
    // Each distinct record's delivery, read once; positions in `unique` from here on. Read before
    // the per-record panic isolation: it cannot panic whatever the record holds (attributes are
    // looked up as `Option`s, numbers parsed with `parse().ok()`, `failureContext` through serde
    // into `Option` fields, a malformed one kept as an error value).
    let deliveries: Vec<Received<'_>> = unique
        .iter()
        .map(|&i| Received::read(&records[i], &settings.redrivers))
        .collect();

    // Each record's item, built before any is written (one receive time for the batch), so that
    // one signature attests many; a record that cannot be an item keeps its failure. Attested a
    // signature's worth at a time, as they are built (the items still in the cache).
    let received_at = Utc::now();
    let mut items: Vec<Result<AuditItem, Failure>> = Vec::with_capacity(unique.len());
    let per_signature = ports.attester.map_or(usize::MAX, |_| ITEMS_PER_SIGNATURE);
    for (positions, received) in unique
        .chunks(per_signature)
        .zip(deliveries.chunks(per_signature))
    {
        let start = items.len();
        items.extend(
            positions
                .iter()
                .zip(received)
                .map(|(&i, delivery)| prepared(settings, &records[i], delivery, received_at)),
        );
        if let Some(attester) = ports.attester {
            attester.attest(
                items[start..]
                    .iter_mut()
                    .filter_map(|item| item.as_mut().ok()),
            );
        }
    }

    let slots: Vec<OnceLock<(Outcome, Option<SendError>)>> =
        unique.iter().map(|_| OnceLock::new()).collect();
    let work = stream::iter(units(&deliveries)).for_each_concurrent(
        settings.max_concurrency.max(1),
        |unit| {
            let (slots, budget, ports, deliveries, items) =
                (&slots, &budget, &ports, &deliveries, &items);
            let unique = &unique;
            async move {
                // Set once a record of this unit fails: the rest of a FIFO group is not processed.
                let mut stop: Option<Failure> = None;
                for position in unit {
                    let record = &records[unique[position]];
                    let delivery = &deliveries[position];
                    let (outcome, send_error) = match &stop {
                        // An earlier record of the group stays on SQS's path (reported failed,
                        // not dead-lettered): the rest stays behind it, reported failed and not
                        // dead-lettered on this receive, not even on its last, so that the
                        // dead-letter queue keeps the group's order.
                        Some(reason) => (Outcome::Failed(reason.clone()), None),
                        None => {
                            let outcome = if cutoffs.work.is_some_and(|c| Instant::now() >= c) {
                                Outcome::Failed(Failure::Deadline)
                            } else {
                                match &items[position] {
                                    Ok(item) => {
                                        isolated(ports.store, settings, budget, item, cutoffs.work)
                                            .await
                                    }
                                    Err(failure) => Outcome::Failed(failure.clone()),
                                }
                            };
                            match outcome {
                                Outcome::Failed(failure) => {
                                    settle(
                                        ports.dead_letters,
                                        settings,
                                        record,
                                        delivery,
                                        failure,
                                        cutoffs.sends,
                                    )
                                    .await
                                }
                                done => (done, None),
                            }
                        }
                    };
                    if let (None, Outcome::Failed(failure)) = (&stop, &outcome) {
                        stop = Some(match failure {
                            Failure::Deadline => Failure::Deadline,
                            _ => Failure::GroupStopped,
                        });
                    }
                    // Each position belongs to exactly one unit, so the slot is still empty.
                    let _ = slots[position].set((outcome, send_error));
                }
            }
        },
    );
    match cutoffs.sends.end {
        // Whatever is still running then is dropped, and reported below as unfinished: no write
        // is in flight by then, and every send that started has had its share of the margin.
        Some(cutoff) => {
            let _ = tokio::time::timeout_at(cutoff, work).await;
        }
        None => work.await,
    }

    let records_out = unique
        .iter()
        .zip(&slots)
        .map(|(&i, slot)| {
            let (outcome, dead_letter_error) = slot
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

/// One record's item: its body parsed, the access rule applied, the item built, with a panic
/// anywhere in it turned into a failure of that record only.
fn prepared(
    settings: &BatchSettings,
    record: &SqsMessage,
    delivery: &Received<'_>,
    received_at: DateTime<Utc>,
) -> Result<AuditItem, Failure> {
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        item_of(settings, record, delivery, received_at)
    }))
    .unwrap_or(Err(Failure::Panic))
}

fn item_of(
    settings: &BatchSettings,
    record: &SqsMessage,
    delivery: &Received<'_>,
    received_at: DateTime<Utc>,
) -> Result<AuditItem, Failure> {
    if let Some(error) = &delivery.malformed_context {
        tracing::warn!(sqs_message_id = ?record.message_id, %error, "failureContext ignored");
    }
    if delivery.unvouched_context {
        tracing::warn!(
            sqs_message_id = ?record.message_id,
            sender_id = ?delivery.sender_id,
            "failureContext ignored: its sender is neither this function's role nor the redrive role, so its delivery facts are not taken"
        );
    }
    let message = AuditMessage::parse(record.body.as_deref(), delivery.sent_at)?;
    let source = delivery.source(settings.access_queue_arn.as_deref());
    access::check(&message, source, delivery.sender_id)?;
    Ok(AuditItem::new(
        message,
        delivery.item_delivery(),
        received_at,
        settings.retention_days,
    ))
}

/// One record's write, with a panic anywhere in it turned into a failure of that record only.
async fn isolated<S: AuditStore>(
    store: &S,
    settings: &BatchSettings,
    budget: &RetryBudget,
    item: &AuditItem,
    cutoff: Option<Instant>,
) -> Outcome {
    match AssertUnwindSafe(write(store, item, &settings.retry, budget, cutoff))
        .catch_unwind()
        .await
    {
        Ok(outcome) => outcome,
        Err(_) => Outcome::Failed(Failure::Panic),
    }
}
