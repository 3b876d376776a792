//! Owns redriving the dead-letter queue: which messages move, how each is sent back with its
//! identity (`failureContext`) kept and only an attested original sender, and what it reports.
//! Must not know how a listing words its shortfall (`list.rs`) nor the SDK.

use std::collections::BTreeMap;
use std::time::Duration;

use audit_aws::sqs::{Attribute, DeadLetter, Sqs, room};
use serde_json::Value;

use super::held::{Held, count};
use super::message::{DlqMessage, ORIGINAL_SENDER_ID, OriginalSender};
use super::{DeadLetterQueue, EMPTY_RECEIVES, Shortfall, Stop};
use crate::Error as TrailError;
use audit_model::context::FAILURE_CONTEXT;

/// The original's attributes a redrive keeps when it adds `failureContext`: SQS's limit less one.
const MAX_ORIGINAL_ATTRIBUTES: usize = room(1);

/// What a redrive does.
#[derive(Debug, Clone, Default)]
pub struct RedriveOptions {
    /// Only messages of this reason; the others are left visible.
    pub reason: Option<String>,
    /// Move at most this many.
    pub max: Option<u64>,
    /// Messages per second at most.
    pub rate: Option<f64>,
    /// Change nothing: count what would move.
    pub dry_run: bool,
    /// The receiver function's role id (the table's tag `audit:receiver-role-id`): a
    /// `failureContext`'s `originalSenderId` is kept only on a message that role sent.
    pub receiver_role_id: Option<String>,
    /// The access queue's ARN (the table's tag `audit:access-queue-arn`): a message that came
    /// from it is an access event, left where it is (see `RedriveReport::access_events`).
    pub access_queue_arn: Option<String>,
}

/// What a redrive did (or, dry, would do), by reason.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RedriveReport {
    pub moved: BTreeMap<String, u64>,
    pub left: BTreeMap<String, u64>,
    /// Messages that could not be moved (they stay in the dead-letter queue), with the error.
    pub failed: Vec<(String, String)>,
    /// When it could not see every message the queue held: how many of how many, why, and what
    /// to do.
    pub unseen: Option<Shortfall>,
    /// Messages moved (or, dry, that would be) whose `failureContext` claimed an
    /// `originalSenderId` that is not attested: the message id, the claim, and why it was removed.
    pub dropped_claims: Vec<DroppedClaim>,
    /// Access events (they came from the access queue), left in the dead-letter queue: one is
    /// written only as sent by its own caller, and a redrive would send it as someone else
    /// (`reserved_action` on the audit queue, `access_event_invalid` on the access queue).
    pub access_events: Vec<String>,
}

/// A claimed `originalSenderId` removed from a message's `failureContext` before its redrive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedClaim {
    pub message_id: String,
    pub claim: String,
    pub why: String,
}

impl<Q: Sqs> DeadLetterQueue<Q> {
    /// Moves messages to `target_url`: each is sent (body byte for byte, attributes kept, a
    /// `failureContext` added when it has none), and deleted here only after the send succeeded.
    /// Everything not moved is visible again when it returns.
    pub async fn redrive(
        &self,
        target_url: &str,
        options: &RedriveOptions,
    ) -> Result<RedriveReport, TrailError> {
        let mut held = Held::default();
        let mut report = RedriveReport::default();
        let result = self
            .redrive_held(target_url, options, &mut held, &mut report)
            .await;
        let released = self.release(&held).await;
        result?;
        released?;
        Ok(report)
    }

    async fn redrive_held(
        &self,
        target_url: &str,
        options: &RedriveOptions,
        held: &mut Held,
        report: &mut RedriveReport,
    ) -> Result<(), TrailError> {
        let fifo = target_url.ends_with(".fifo");
        let interval = options
            .rate
            .filter(|r| *r > 0.0)
            .map(|r| Duration::from_secs_f64(1.0 / r));
        let mut next_send = tokio::time::Instant::now();
        let mut moved = 0u64;
        let full = |moved: u64| options.max.is_some_and(|max| moved >= max);
        // As `list`: SQS may answer a receive short or empty while messages remain, so it keeps
        // receiving until it has seen as many as the queue held and a receive brings nothing
        // new. No time bound: a message seen again after its hold ended is not moved twice
        // (`Held::is_first`), and a slow `--rate` must not cut the redrive short.
        let at_start = self.depth().await?.total();
        let mut empty = 0;
        let stop = loop {
            if full(moved) {
                return Ok(());
            }
            if held.len() >= self.bound {
                break Stop::Bound;
            }
            let batch = self.receive().await?;
            if held.add(&batch) == 0 {
                if count(held.len()) >= at_start {
                    return Ok(());
                }
                empty += 1;
                if empty >= EMPTY_RECEIVES {
                    break Stop::Empty;
                }
                continue;
            }
            empty = 0;
            let firsts: Vec<&DlqMessage> = batch.iter().filter(|m| held.is_first(m)).collect();
            for message in firsts {
                let reason = message.reason();
                let wanted = options.reason.as_ref().is_none_or(|r| *r == reason);
                if !wanted || full(moved) {
                    *report.left.entry(reason).or_default() += 1;
                    continue;
                }
                let access_event = options
                    .access_queue_arn
                    .as_deref()
                    .is_some_and(|arn| message.source_arn().as_deref() == Some(arn));
                if access_event {
                    report.access_events.push(message.message_id.clone());
                    *report.left.entry(reason).or_default() += 1;
                    continue;
                }
                let sender = message.original_sender(options.receiver_role_id.as_deref());
                let dropped = match &sender {
                    OriginalSender::Unvouched { claim, why } => Some(DroppedClaim {
                        message_id: message.message_id.clone(),
                        claim: claim.clone(),
                        why: why.clone(),
                    }),
                    _ => None,
                };
                if options.dry_run {
                    moved += 1;
                    *report.moved.entry(reason).or_default() += 1;
                    report.dropped_claims.extend(dropped);
                    continue;
                }
                if let Some(interval) = interval {
                    tokio::time::sleep_until(next_send).await;
                    next_send = tokio::time::Instant::now() + interval;
                }
                match self.move_one(message, &sender, target_url, fifo).await {
                    Ok(()) => {
                        held.forget(&message.message_id);
                        moved += 1;
                        *report.moved.entry(reason).or_default() += 1;
                        report.dropped_claims.extend(dropped);
                    }
                    Err(error) => {
                        report.failed.push((message.message_id.clone(), error));
                        *report.left.entry(reason).or_default() += 1;
                    }
                }
            }
        };
        // Short of the count at the start: does the queue hold messages it has not seen? (Those
        // it holds and did not move are among the in-flight ones.)
        let now = self.depth().await?;
        let seen = count(held.len());
        let holding = count(held.handles.len());
        let not_seen = now.total().saturating_sub(holding);
        if not_seen > 0 {
            let (mut causes, when) = self.causes(now, holding);
            let fix = match stop {
                Stop::Bound => {
                    causes.push(format!(
                        "auditctl reads at most {} messages in one command",
                        self.bound
                    ));
                    "run auditctl dlq redrive again".to_owned()
                }
                _ if when.is_empty() => {
                    causes.push(format!(
                        "{EMPTY_RECEIVES} receives in a row brought none of the rest"
                    ));
                    "run auditctl dlq redrive again".to_owned()
                }
                _ => format!(
                    "run auditctl dlq redrive again once they are visible (when {} ends)",
                    when.join(" or ")
                ),
            };
            report.unseen = Some(Shortfall {
                verb: "saw",
                listed: seen,
                total: seen + not_seen,
                why: format!("{}; {fix}", causes.join("; ")),
            });
        }
        Ok(())
    }

    /// Send, then delete. A failed send leaves the message here; a failed delete after a good
    /// send leaves a copy here that a later redrive sends again (the function absorbs it as a
    /// duplicate: the identity is the same). A claimed original sender that is not attested
    /// (`sender`) is removed from the context first; the rest of the context stays as it was.
    async fn move_one(
        &self,
        message: &DlqMessage,
        sender: &OriginalSender,
        target_url: &str,
        fifo: bool,
    ) -> Result<(), String> {
        let mut attributes = message.attributes.clone();
        if let (OriginalSender::Unvouched { .. }, Some(mut context)) =
            (sender, message.context_object())
        {
            context.remove(ORIGINAL_SENDER_ID);
            attributes.insert(
                FAILURE_CONTEXT.to_owned(),
                Attribute::string(Value::Object(context).to_string()),
            );
        }
        if message.context().is_none() {
            if !attributes.contains_key(FAILURE_CONTEXT)
                && attributes.len() > MAX_ORIGINAL_ATTRIBUTES
            {
                return Err(format!(
                    "it has {} message attributes, leaving no room for failureContext: its identity would be lost, so it stays",
                    attributes.len()
                ));
            }
            let context = message.context_for_redrive().to_json();
            attributes.insert(FAILURE_CONTEXT.to_owned(), Attribute::string(context));
        }
        let letter = DeadLetter {
            body: message.body.clone(),
            attributes,
            group_id: fifo.then(|| {
                message
                    .system
                    .message_group_id
                    .clone()
                    .unwrap_or_else(|| "auditctl-redrive".to_owned())
            }),
            // This dead-letter copy's id: a retried send is deduplicated, a later redrive of the
            // same original (failed again, a new copy) is not.
            deduplication_id: fifo.then(|| message.message_id.clone()),
        };
        self.sqs
            .send(target_url, &letter)
            .await
            .map_err(|e| e.text)?;
        self.sqs
            .delete(&self.url, &message.receipt_handle)
            .await
            .map_err(|e| {
                format!(
                    "sent, but not deleted from the dead-letter queue: {}",
                    e.text
                )
            })?;
        Ok(())
    }
}
