//! Owns working the dead-letter queue: listing its messages (and leaving them visible) and
//! redriving them to the source queue with their identity (`failureContext`) kept, and with the
//! original sender only as AWS attests it. Must not know DynamoDB (the receiver's role id is
//! given); the message format is the library's (`deadletter.rs`), not restated here
//! (docs/architecture.md "The crates", trail).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use audit_aws::error::{AwsError, ErrorKind};
use audit_aws::sqs::{Attribute, room};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, MessageAttributeValue, MessageSystemAttributeName,
    QueueAttributeName,
};
use serde_json::{Value, json};

use crate::Error as TrailError;
use crate::output::{Block, Column, Record};
use audit_model::context::{FAILURE_CONTEXT, FAILURE_REASON, FailureContext, MAX_RECEIVES};
use audit_model::message::canonical_time;

/// The original's attributes a redrive keeps when it adds `failureContext`: SQS's limit less one.
const MAX_ORIGINAL_ATTRIBUTES: usize = room(1);
/// How long a received message stays invisible while a command runs. Every message is made
/// visible again at the end (visibility 0); this only bounds how long one stays hidden if the
/// command is killed.
const HOLD_SECONDS: i32 = 120;
/// How long a listing receives at most: well below `HOLD_SECONDS`, so that no message it holds
/// becomes visible again (and is received a second time) while it is still listing.
const LIST_SECONDS: u64 = 90;
/// Receives in a row that bring nothing new before a listing still short of the queue's count
/// gives up. One is not enough: SQS may answer empty while messages remain, and its counts are
/// approximate.
const EMPTY_RECEIVES: u32 = 3;

/// The `failureContext` field that names the first delivery's sender.
const ORIGINAL_SENDER_ID: &str = "originalSenderId";

/// Who first sent a dead-lettered message, as far as AWS attests it (docs/events.md
/// "Claimed and attested: `actor` and `senderId`").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OriginalSender {
    /// No valid `failureContext`: SQS moved the message (or someone sent it here directly), and
    /// its own `SenderId` is the first sender's.
    Own(String),
    /// The `failureContext`'s claim, made by the receiver function: the message's own `SenderId`
    /// is the function's role. Kept.
    Vouched(String),
    /// A claim the receiver function did not make (the message's own `SenderId` is another
    /// principal's, or there is none, or the function's role id is not known): dropped from the
    /// context before a redrive.
    Unvouched { claim: String, why: String },
    /// Not known: no `SenderId`, or a context that names no sender.
    Unknown,
}

impl OriginalSender {
    /// The sender a redrive carries on, if any.
    pub fn attested(&self) -> Option<&str> {
        match self {
            Self::Own(id) | Self::Vouched(id) => Some(id),
            Self::Unvouched { .. } | Self::Unknown => None,
        }
    }
}

/// Whether `sender` (a `SenderId`: a user id, or `<RoleId>:<session>`) is the role `role_id`.
fn is_role(sender: &str, role_id: &str) -> bool {
    sender.split(':').next() == Some(role_id)
}

/// One message of the dead-letter queue, as received.
#[derive(Debug, Clone)]
pub struct DlqMessage {
    pub message_id: String,
    receipt_handle: String,
    pub body: String,
    pub attributes: HashMap<String, MessageAttributeValue>,
    system: HashMap<MessageSystemAttributeName, String>,
}

impl DlqMessage {
    fn string_attribute(&self, name: &str) -> Option<&str> {
        self.attributes.get(name).and_then(|a| a.string_value())
    }

    /// The `failureContext` it carries, when valid.
    pub fn context(&self) -> Option<FailureContext> {
        self.string_attribute(FAILURE_CONTEXT)
            .and_then(|text| FailureContext::parse(text).ok())
    }

    /// `failureReason`, else the context's reason, else `max_receives`: with neither, SQS moved
    /// it after `maxReceiveCount` receives.
    pub fn reason(&self) -> String {
        self.string_attribute(FAILURE_REASON)
            .map(str::to_owned)
            .or_else(|| self.context().map(|c| c.reason).filter(|r| !r.is_empty()))
            .unwrap_or_else(|| MAX_RECEIVES.to_owned())
    }

    /// The SQS message id of the original delivery.
    pub fn original_id(&self) -> String {
        self.context()
            .map(|c| c.sqs_message_id)
            .unwrap_or_else(|| self.message_id.clone())
    }

    fn system(&self, name: MessageSystemAttributeName) -> Option<&str> {
        self.system.get(&name).map(String::as_str)
    }

    /// Who sent this message to the dead-letter queue, as SQS attests it (`SenderId`): the
    /// receiver function's role for what it dead-lettered, the first sender for what SQS moved.
    pub fn sender_id(&self) -> Option<&str> {
        self.system(MessageSystemAttributeName::SenderId)
            .filter(|id| !id.is_empty())
    }

    /// The `failureContext` as a JSON object, when it is one.
    fn context_object(&self) -> Option<serde_json::Map<String, Value>> {
        self.string_attribute(FAILURE_CONTEXT)
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
            .and_then(|value| match value {
                Value::Object(object) => Some(object),
                _ => None,
            })
    }

    /// The first delivery's sender, as AWS attests it: `receiver_role_id` is the receiver
    /// function's role id (the table's tag `audit:receiver-role-id`), whose claims alone are
    /// trusted.
    pub fn original_sender(&self, receiver_role_id: Option<&str>) -> OriginalSender {
        let Some(context) = self.context() else {
            return self.sender_id().map_or(OriginalSender::Unknown, |id| {
                OriginalSender::Own(id.to_owned())
            });
        };
        let Some(claim) = self
            .context_object()
            .and_then(|mut object| object.remove(ORIGINAL_SENDER_ID))
        else {
            return OriginalSender::Unknown;
        };
        let why = match (self.sender_id(), receiver_role_id) {
            (Some(sender), Some(role)) if is_role(sender, role) => {
                return context
                    .original_sender_id
                    .map_or(OriginalSender::Unknown, OriginalSender::Vouched);
            }
            (Some(sender), Some(role)) => format!(
                "the message was sent to the dead-letter queue by {sender}, not by the receiver function's role {role}"
            ),
            (None, _) => "the message has no SenderId".to_owned(),
            (Some(_), None) => {
                "the table has no tag audit:receiver-role-id naming the receiver function's role, so no claim can be trusted (update the stack)".to_owned()
            }
        };
        OriginalSender::Unvouched {
            claim: match claim {
                Value::String(text) => text,
                other => other.to_string(),
            },
            why,
        }
    }

    /// Receives at the source when it failed (from the context), else the queue's own count.
    pub fn receive_count(&self) -> Option<u64> {
        self.context().and_then(|c| c.receive_count).or_else(|| {
            self.system(MessageSystemAttributeName::ApproximateReceiveCount)
                .and_then(|n| n.parse().ok())
        })
    }

    /// The queue it came from: its context's `eventSourceArn`, else the attribute SQS sets when
    /// it moves a message (`DeadLetterQueueSourceArn`).
    pub fn source_arn(&self) -> Option<String> {
        self.context().and_then(|c| c.event_source_arn).or_else(|| {
            self.system(MessageSystemAttributeName::DeadLetterQueueSourceArn)
                .map(str::to_owned)
        })
    }

    /// The context as a message whose context is missing or malformed gets it for a redrive:
    /// its own message id and `SentTimestamp` are those of the original delivery (SQS keeps both
    /// when it moves a message after `maxReceiveCount`).
    pub fn context_for_redrive(&self) -> FailureContext {
        self.context().unwrap_or_else(|| FailureContext {
            reason: MAX_RECEIVES.to_owned(),
            detail:
                "moved by SQS after maxReceiveCount receives; context added by auditctl dlq redrive"
                    .to_owned(),
            sqs_message_id: self.message_id.clone(),
            sent_timestamp: self
                .system(MessageSystemAttributeName::SentTimestamp)
                .map(str::to_owned),
            receive_count: self
                .system(MessageSystemAttributeName::ApproximateReceiveCount)
                .and_then(|n| n.parse().ok()),
            failed_at: canonical_time(chrono::Utc::now()),
            event_source_arn: self
                .system(MessageSystemAttributeName::DeadLetterQueueSourceArn)
                .map(str::to_owned),
            // Its own SenderId: SQS keeps it when it moves a message.
            original_sender_id: self.sender_id().map(str::to_owned),
        })
    }

    fn json(&self, sender: &OriginalSender, show_body: bool) -> Value {
        let mut value = json!({
            "messageId": self.message_id,
            "reason": self.reason(),
            "originalSqsMessageId": self.original_id(),
            "originalSenderId": sender.attested(),
            "senderId": self.sender_id(),
            "failedAt": self.context().map(|c| c.failed_at).filter(|t| !t.is_empty()),
            "receiveCount": self.receive_count(),
            "bodyBytes": self.body.len(),
            "failureContext": self.string_attribute(FAILURE_CONTEXT)
                .and_then(|t| serde_json::from_str::<Value>(t).ok()),
        });
        if show_body {
            value["body"] = Value::String(self.body.clone());
        }
        value
    }

    fn cells(&self, sender: &OriginalSender) -> Vec<String> {
        vec![
            self.message_id.clone(),
            self.reason(),
            self.original_id(),
            self.context().map(|c| c.failed_at).unwrap_or_default(),
            self.receive_count()
                .map(|n| n.to_string())
                .unwrap_or_default(),
            self.body.len().to_string(),
            sender.attested().unwrap_or_default().to_owned(),
            self.sender_id().unwrap_or_default().to_owned(),
        ]
    }
}

/// A listed message without its body (audit text can be personal data), with its original
/// sender as attested.
pub struct Listed<'a>(pub &'a DlqMessage, pub OriginalSender);
/// A listed message with its body (`--show-body`).
pub struct ListedWithBody<'a>(pub &'a DlqMessage, pub OriginalSender);

const fn column(name: &'static str, table_width: Option<usize>) -> Column {
    Column { name, table_width }
}

impl Record for Listed<'_> {
    const COLUMNS: &'static [Column] = &[
        column("messageId", Some(36)),
        column("reason", Some(29)),
        column("originalSqsMessageId", Some(36)),
        column("failedAt", Some(24)),
        column("receiveCount", Some(7)),
        column("bodyBytes", Some(9)),
        column("originalSenderId", Some(24)),
        // The dead-letter message's own sender: in jsonl and csv.
        column("senderId", None),
    ];
    fn json(&self) -> Value {
        self.0.json(&self.1, false)
    }
    fn cells(&self) -> Vec<String> {
        self.0.cells(&self.1)
    }
}

impl Record for ListedWithBody<'_> {
    const COLUMNS: &'static [Column] = &[
        column("messageId", Some(36)),
        column("reason", Some(29)),
        column("originalSqsMessageId", Some(36)),
        column("failedAt", Some(24)),
        column("receiveCount", Some(7)),
        column("bodyBytes", Some(9)),
        column("originalSenderId", Some(24)),
        column("senderId", None),
        // Not a cell in the table: a person who asks for the body sees all of it, under the row.
        column("body", None),
    ];
    fn json(&self) -> Value {
        self.0.json(&self.1, true)
    }
    fn cells(&self) -> Vec<String> {
        let mut cells = self.0.cells(&self.1);
        cells.push(self.0.body.clone());
        cells
    }
    fn block(&self) -> Option<Block> {
        Some(Block {
            name: "body",
            of: self.0.message_id.clone(),
            text: self.0.body.clone(),
        })
    }
}

/// What a listing got: the messages, and when they are not all the queue holds, by how many.
#[derive(Debug)]
pub struct Listing {
    pub messages: Vec<DlqMessage>,
    pub shortfall: Option<Shortfall>,
}

/// A listing short of the queue: how many it listed of how many, why, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{verb} {listed} of {total} messages the dead-letter queue holds: {why}")]
pub struct Shortfall {
    /// What the command did with the ones it got: "listed", "saw".
    pub verb: &'static str,
    pub listed: u64,
    pub total: u64,
    pub why: String,
}

/// The queue's approximate counts (GetQueueAttributes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Depth {
    visible: u64,
    /// Received and not yet deleted nor visible again: in flight with some consumer.
    in_flight: u64,
    /// Sent with a delay that has not ended.
    delayed: u64,
}

impl Depth {
    fn total(&self) -> u64 {
        self.visible + self.in_flight + self.delayed
    }
}

/// Why a listing stopped receiving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Receives in a row brought nothing new.
    Empty,
    /// `bound` messages held.
    Bound,
    /// `LIST_SECONDS` spent.
    Time,
}

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

/// The dead-letter queue.
#[derive(Debug, Clone)]
pub struct DeadLetterQueue {
    client: Client,
    url: String,
    /// Distinct messages read at most in one command.
    pub bound: usize,
}

impl DeadLetterQueue {
    pub fn new(client: Client, url: impl Into<String>) -> Self {
        Self {
            client,
            url: url.into(),
            bound: 100_000,
        }
    }

    /// Every message the queue holds, in the order received; all visible again when it returns.
    /// It receives until it holds as many as the queue held when it began (and a receive brings
    /// nothing new): SQS returns at most 10 a receive, and may return fewer, or none, while
    /// messages remain. When it cannot get them all (in flight with another consumer, delayed,
    /// more than `bound`, or `LIST_SECONDS` spent), the listing says by how many.
    pub async fn list(&self) -> Result<Listing, TrailError> {
        let mut held = Held::default();
        let result = self.list_held(&mut held).await;
        let released = self.release(&held).await;
        let listing = result?;
        released?;
        Ok(listing)
    }

    async fn list_held(&self, held: &mut Held) -> Result<Listing, TrailError> {
        let at_start = self.depth().await?.total();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(LIST_SECONDS);
        let mut messages = Vec::new();
        let mut empty = 0;
        let stop = loop {
            if held.len() >= self.bound {
                break Stop::Bound;
            }
            if tokio::time::Instant::now() >= deadline {
                break Stop::Time;
            }
            let batch = self.receive().await?;
            if held.add(&batch) > 0 {
                messages.extend(batch.into_iter().filter(|m| held.is_first(m)));
                empty = 0;
                continue;
            }
            if count(held.len()) >= at_start {
                return Ok(Listing {
                    messages,
                    shortfall: None,
                });
            }
            empty += 1;
            if empty >= EMPTY_RECEIVES {
                break Stop::Empty;
            }
        };
        // Short of the count at the start, or stopped early: what does the queue hold now? (The
        // rest may have been deleted meanwhile, by a redrive for example.)
        let now = self.depth().await?;
        let listed = count(held.len());
        let shortfall = (now.total() > listed).then(|| Shortfall {
            verb: "listed",
            listed,
            total: now.total(),
            why: self.why_short(stop, now, listed),
        });
        Ok(Listing {
            messages,
            shortfall,
        })
    }

    /// Why a listing got `listed` of what the queue holds (`now`, where the messages this
    /// listing holds are among those in flight), and what to do.
    fn why_short(&self, stop: Stop, now: Depth, listed: u64) -> String {
        let (mut causes, when) = self.causes(now, listed);
        let redrive_first = "redrive what the listed messages explain (auditctl dlq redrive --reason CODE), then run auditctl dlq list again";
        let fix = match stop {
            Stop::Bound => {
                causes.push(format!(
                    "auditctl lists at most {} messages in one command",
                    self.bound
                ));
                redrive_first.to_owned()
            }
            Stop::Time => {
                causes.push(format!(
                    "it stopped receiving after {LIST_SECONDS} s, before the first messages it held would be visible again"
                ));
                redrive_first.to_owned()
            }
            Stop::Empty if when.is_empty() => {
                causes.push(format!(
                    "{EMPTY_RECEIVES} receives in a row brought none of the rest"
                ));
                "run auditctl dlq list again".to_owned()
            }
            Stop::Empty => format!(
                "run auditctl dlq list again once they are visible (when {} ends)",
                when.join(" or ")
            ),
        };
        format!("{}; {fix}", causes.join("; "))
    }

    /// What keeps messages from a command that holds `ours` of them (`now`: the queue's counts,
    /// ours among the in-flight ones): the causes in words, and what must end before they can be
    /// received.
    fn causes(&self, now: Depth, ours: u64) -> (Vec<String>, Vec<&'static str>) {
        let are = |n: u64| if n == 1 { "is" } else { "are" };
        let mut causes = Vec::new();
        let mut when = Vec::new();
        let others = now.in_flight.saturating_sub(ours);
        if others > 0 {
            causes.push(format!(
                "{others} {} in flight with another consumer (a redrive, another listing, or a reader that has not deleted them)",
                are(others)
            ));
            when.push("that consumer's visibility timeout");
        }
        if now.delayed > 0 {
            causes.push(format!(
                "{} {} delayed (sent with a delay)",
                now.delayed,
                are(now.delayed)
            ));
            when.push("the delay");
        }
        (causes, when)
    }

    /// The queue's approximate counts right now.
    async fn depth(&self) -> Result<Depth, TrailError> {
        let output = self
            .client
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
            .send()
            .await
            .map_err(|e| self.queue_error(&e))?;
        let attributes = output.attributes.unwrap_or_default();
        let number = |name: QueueAttributeName| {
            attributes
                .get(&name)
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        Ok(Depth {
            visible: number(QueueAttributeName::ApproximateNumberOfMessages),
            in_flight: number(QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
            delayed: number(QueueAttributeName::ApproximateNumberOfMessagesDelayed),
        })
    }

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
            let value = Attribute::string(Value::Object(context).to_string())
                .to_sdk()
                .map_err(|e| e.to_string())?;
            attributes.insert(FAILURE_CONTEXT.to_owned(), value);
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
            let value = Attribute::string(context)
                .to_sdk()
                .map_err(|e| e.to_string())?;
            attributes.insert(FAILURE_CONTEXT.to_owned(), value);
        }
        let mut send = self
            .client
            .send_message()
            .queue_url(target_url)
            .message_body(&message.body)
            .set_message_attributes(Some(attributes));
        if fifo {
            send = send
                .message_group_id(
                    message
                        .system(MessageSystemAttributeName::MessageGroupId)
                        .unwrap_or("auditctl-redrive"),
                )
                // This dead-letter copy's id: a retried send is deduplicated, a later redrive of
                // the same original (failed again, a new copy) is not.
                .message_deduplication_id(&message.message_id);
        }
        send.send().await.map_err(|e| sqs_error(&e))?;
        self.client
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(&message.receipt_handle)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "sent, but not deleted from the dead-letter queue: {}",
                    sqs_error(&e)
                )
            })?;
        Ok(())
    }

    /// One receive of up to 10 messages, hidden for `HOLD_SECONDS`, with every attribute. A
    /// one-second wait (long polling) asks every SQS server, so an empty answer usually means
    /// none visible; `list` still checks against the queue's count.
    async fn receive(&self) -> Result<Vec<DlqMessage>, TrailError> {
        let output = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(10)
            .visibility_timeout(HOLD_SECONDS)
            .wait_time_seconds(1)
            .message_attribute_names("All")
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .map_err(|e| self.queue_error(&e))?;
        Ok(output
            .messages
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| {
                Some(DlqMessage {
                    message_id: m.message_id?,
                    receipt_handle: m.receipt_handle?,
                    body: m.body.unwrap_or_default(),
                    attributes: m.message_attributes.unwrap_or_default(),
                    system: m.attributes.unwrap_or_default(),
                })
            })
            .collect())
    }

    /// Makes every held message visible again at once (ChangeMessageVisibilityBatch, 10 a call).
    async fn release(&self, held: &Held) -> Result<(), TrailError> {
        let entries: Vec<ChangeMessageVisibilityBatchRequestEntry> = held
            .handles
            .values()
            .enumerate()
            .filter_map(|(i, handle)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(handle)
                    .visibility_timeout(0)
                    .build()
                    .ok()
            })
            .collect();
        let mut failed = 0;
        for chunk in entries.chunks(10) {
            let output = self
                .client
                .change_message_visibility_batch()
                .queue_url(&self.url)
                .set_entries(Some(chunk.to_vec()))
                .send()
                .await
                .map_err(|e| self.queue_error(&e))?;
            failed += output.failed.len();
        }
        if failed > 0 {
            return Err(TrailError::NotReleased {
                failed,
                seconds: HOLD_SECONDS,
            });
        }
        Ok(())
    }

    fn queue_error<E>(&self, error: &SdkError<E, HttpResponse>) -> TrailError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        let error = AwsError::from_sdk(error);
        match error.kind {
            ErrorKind::NotFound => TrailError::QueueNotFound {
                url: self.url.clone(),
            },
            ErrorKind::Denied => TrailError::QueueDenied {
                url: self.url.clone(),
                detail: error.text,
            },
            _ => TrailError::Aws(error),
        }
    }
}

fn sqs_error<E, R>(error: &SdkError<E, R>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    audit_aws::error::describe(error)
}

/// A number of messages as the queue's counts are.
fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Messages received and not yet deleted, by id, with their latest receipt handle (the one
/// SQS honours); and which batch saw each first.
#[derive(Debug, Default)]
struct Held {
    handles: BTreeMap<String, String>,
    first_seen: HashMap<String, String>,
}

impl Held {
    /// Records a batch; returns how many of its messages were not seen before.
    fn add(&mut self, batch: &[DlqMessage]) -> usize {
        let mut fresh = 0;
        for message in batch {
            if !self.first_seen.contains_key(&message.message_id) {
                fresh += 1;
                self.first_seen
                    .insert(message.message_id.clone(), message.receipt_handle.clone());
            }
            self.handles
                .insert(message.message_id.clone(), message.receipt_handle.clone());
        }
        fresh
    }

    /// Whether this is the receive that first saw the message (a message seen again after its
    /// hold expired is not listed twice).
    fn is_first(&self, message: &DlqMessage) -> bool {
        self.first_seen.get(&message.message_id) == Some(&message.receipt_handle)
    }

    fn forget(&mut self, message_id: &str) {
        self.handles.remove(message_id);
    }

    fn len(&self) -> usize {
        self.first_seen.len()
    }
}
