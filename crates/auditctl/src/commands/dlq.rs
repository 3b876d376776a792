//! Owns `auditctl dlq list` and `redrive`: their flags and help, wiring and printing what they did.
//! Must not know how the queue is read or moved (`audit_trail::dlq`).

use std::collections::BTreeMap;
use std::io::BufWriter;

use crate::commands::choices::Format;
use crate::commands::words::TrailError;
use audit_aws::config::ClientOptions;
use audit_model::keys::DEFAULT_TABLE_NAME;
use audit_trail::access::Action;
use audit_trail::dlq::{DeadLetterQueue, Listed, ListedWithBody, OriginalSender, RedriveOptions};
use audit_trail::output::Printer;
use audit_trail::stack::StackTags;
use clap::{Args, Subcommand};

use super::{Context, Failure};

/// The dead-letter queue: list its messages, or redrive them to the audit queue.
#[derive(Debug, Args)]
pub struct DlqArgs {
    /// The dead-letter queue URL (stack output AuditDeadLetterQueueUrl).
    #[arg(long, global = true, env = "DEAD_LETTER_QUEUE_URL")]
    dlq_url: Option<String>,
    /// The stack's table: its tags name the access queue and the receiver function's role
    /// (whose claims of an original sender alone are trusted).
    #[arg(long, global = true, env = "TABLE_NAME", default_value = DEFAULT_TABLE_NAME)]
    table: String,
    #[command(subcommand)]
    command: DlqCommand,
}

#[derive(Debug, Subcommand)]
enum DlqCommand {
    List(ListArgs),
    Redrive(RedriveArgs),
}

/// The messages with their reason, original SQS message id, failed-at time, receive count,
/// body size and original sender; bodies only with --show-body. Leaves the queue as it was: every message
/// received is made visible again before the command ends.
#[derive(Debug, Args)]
#[command(after_help = "\
The reason is the failureReason attribute the function set, or max_receives when there is none
(SQS moved the message itself after maxReceiveCount receives).

originalSenderId is the first delivery's sender as AWS attests it (SenderId): for a message SQS
moved, its own SenderId; for one the function dead-lettered, the failureContext's
originalSenderId, trusted only because the message's own SenderId is the receiver function's role
(the table's tag audit:receiver-role-id). A claim from anyone else is not shown (stderr says so),
and dlq redrive removes it. jsonl and csv also carry senderId, the message's own SenderId.

It lists every message the queue holds. When it cannot (some are in flight with another consumer,
or delayed), it prints those it got, says on stderr how many it listed of how many and what to do,
and exits 1. With --show-body the table prints each body in full under its row; jsonl and csv
carry it in full in their body field.

Examples:
  auditctl dlq list
  auditctl dlq list --reason conflict --show-body --format jsonl

Environment: DEAD_LETTER_QUEUE_URL, TABLE_NAME, ACCESS_QUEUE_URL, AWS_ENDPOINT_URL, AWS_PROFILE,
AWS_REGION.")]
struct ListArgs {
    /// Only messages of this reason code (e.g. throttled, conflict, max_receives).
    #[arg(long, value_name = "CODE")]
    reason: Option<String>,
    /// Print the bodies, each in full (audit text can be personal data).
    #[arg(long)]
    show_body: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Moves messages back to the audit queue: each is sent (body and attributes as they are)
/// and deleted from the dead-letter queue only after the send succeeded.
#[derive(Debug, Args)]
#[command(after_help = "\
A message without a failureContext (SQS moved it after maxReceiveCount receives) gets one built
from its own message id and SentTimestamp, reason max_receives, so the function writes it under
its original identity: a message already written is a duplicate, not a second item. (SQS's own
StartMessageMoveTask gives each message a new id and loses that identity.) Messages not moved are
visible again when the command ends.

The original sender goes along only as AWS attests it: a message without a failureContext gets
originalSenderId = its own SenderId (SQS keeps it on the move). A failureContext's
originalSenderId is kept only when the message's own SenderId is the receiver function's role (the
table's tag audit:receiver-role-id); any other claim is removed from the context before the send,
and stderr names each such message.

Run it as the stack's AuditOperatorRole (output AuditOperatorRoleArn; e.g. a profile with that
role_arn): the function takes a redriven message's failureContext (its original SQS id, time and
sender) only from that role or its own. Under other credentials the messages still move, but the
function takes each as a new delivery (a body without messageId becomes a new item).

Access events (messages that came from the access queue, the table's tag audit:access-queue-arn)
are left where they are and named on stderr: one is written only as sent by its own caller, so
sent again by you it would be refused.

It goes through the whole queue (or up to --max). When it cannot see every message (some are in
flight with another consumer, or delayed), it moves what it saw, says on stderr how many it saw
of how many and what to do, and exits 1.

Examples:
  auditctl dlq redrive --dry-run
  auditctl dlq redrive --reason throttled --rate 50
  auditctl dlq redrive --reason max_receives --max 100

Environment: AUDIT_QUEUE_URL, DEAD_LETTER_QUEUE_URL, TABLE_NAME, ACCESS_QUEUE_URL, AWS_ENDPOINT_URL,
AWS_PROFILE, AWS_REGION.")]
struct RedriveArgs {
    /// The audit queue the messages go back to (stack output AuditQueueUrl).
    #[arg(long, env = "AUDIT_QUEUE_URL")]
    queue_url: Option<String>,
    /// Only messages of this reason code; the others stay.
    #[arg(long, value_name = "CODE")]
    reason: Option<String>,
    /// Move at most N messages.
    #[arg(long, value_name = "N")]
    max: Option<u64>,
    /// At most N messages per second.
    #[arg(long, value_name = "N")]
    rate: Option<f64>,
    /// Change nothing: print what would move.
    #[arg(long)]
    dry_run: bool,
}

/// `auditctl dlq ...`: the dead-letter queue's URL checked, then the subcommand.
pub async fn run(args: DlqArgs, context: &Context) -> Result<(), Failure> {
    let url = args.dlq_url.ok_or(TrailError::NoQueueUrl {
        what: "dead-letter queue",
        env: "DEAD_LETTER_QUEUE_URL",
        flag: "--dlq-url",
        output: "AuditDeadLetterQueueUrl",
    })?;
    let client = audit_aws::config::sqs(&context.config, ClientOptions::AS_CONFIGURED);
    let queue = DeadLetterQueue::new(client, url.clone());
    match args.command {
        DlqCommand::List(list_args) => list(list_args, context, &queue, &url, &args.table).await,
        DlqCommand::Redrive(redrive_args) => {
            redrive(redrive_args, context, &queue, &url, &args.table).await
        }
    }
}

/// The receiver function's role id, from the stack's table's tag.
async fn receiver_role_id(context: &Context, table: &str) -> Result<Option<String>, Failure> {
    Ok(stack_tags(context, table).await?.receiver_role_id)
}

async fn stack_tags(context: &Context, table: &str) -> Result<StackTags, Failure> {
    Ok(StackTags::read(
        &audit_aws::config::dynamodb(&context.config),
        table,
        &context.location,
    )
    .await
    .map_err(TrailError::from)?)
}

/// `auditctl dlq list`: the access recorded, the receiver's role id read, every message printed
/// that it got with its original sender (a claim not attested said on stderr); then, when it
/// could not get them all, how many of how many (exit 1).
async fn list(
    args: ListArgs,
    context: &Context,
    queue: &DeadLetterQueue,
    url: &str,
    table: &str,
) -> Result<(), Failure> {
    context.access.record(Action::DlqList, url, table).await?;
    let role = receiver_role_id(context, table).await?;
    let listing = queue.list().await?;
    let shown = listing
        .messages
        .iter()
        .filter(|m| args.reason.as_ref().is_none_or(|r| *r == m.reason()))
        .map(|m| {
            let sender = m.original_sender(role.as_deref());
            if let OriginalSender::Unvouched { claim, why } = &sender {
                eprintln!(
                    "note: {}: its failureContext claims originalSenderId {claim}, not shown: {why}; dlq redrive removes it",
                    m.message_id
                );
            }
            (m, sender)
        });
    let out = BufWriter::new(std::io::stdout().lock());
    if args.show_body {
        let mut printer = Printer::new(args.format.into(), out);
        for (message, sender) in shown {
            printer.print(&ListedWithBody(message, sender))?;
        }
        printer.finish()?;
    } else {
        let mut printer = Printer::new(args.format.into(), out);
        for (message, sender) in shown {
            printer.print(&Listed(message, sender))?;
        }
        printer.finish()?;
    }
    // Everything it got is printed; then how many of how many, and exit 1.
    match listing.shortfall {
        None => Ok(()),
        Some(shortfall) => Err(TrailError::from(shortfall).into()),
    }
}

/// `auditctl dlq redrive`: the audit queue and the rate checked, the access recorded, the
/// receiver's role id read, the messages moved; then what moved and what is left, by reason,
/// which claimed senders were removed, and what failed.
async fn redrive(
    args: RedriveArgs,
    context: &Context,
    queue: &DeadLetterQueue,
    url: &str,
    table: &str,
) -> Result<(), Failure> {
    let target = args.queue_url.ok_or(TrailError::NoQueueUrl {
        what: "audit queue",
        env: "AUDIT_QUEUE_URL",
        flag: "--queue-url",
        output: "AuditQueueUrl",
    })?;
    if args.rate.is_some_and(|r| r.is_nan() || r <= 0.0) {
        return Err(Failure::Usage("--rate must be above 0".into()));
    }
    context
        .access
        .record(Action::DlqRedrive, url, table)
        .await?;
    let dry_run = args.dry_run;
    let tags = stack_tags(context, table).await?;
    let options = RedriveOptions {
        reason: args.reason,
        max: args.max,
        rate: args.rate,
        dry_run,
        receiver_role_id: tags.receiver_role_id,
        access_queue_arn: tags.access_queue_arn,
    };
    let report = queue.redrive(&target, &options).await?;
    let total = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
    let verb = if dry_run { "would move" } else { "moved" };
    println!("{verb} {} message(s) to {target}", total(&report.moved));
    for (reason, n) in &report.moved {
        println!("  {reason:<32} {n}");
    }
    let left = if dry_run { "would leave" } else { "left" };
    println!("{left} in the dead-letter queue: {}", total(&report.left));
    for (reason, n) in &report.left {
        println!("  {reason:<32} {n}");
    }
    let removed = if dry_run {
        "would be removed"
    } else {
        "removed"
    };
    for dropped in &report.dropped_claims {
        eprintln!(
            "note: {}: failureContext.originalSenderId {} {removed} before the resend: {}",
            dropped.message_id, dropped.claim, dropped.why
        );
    }
    for id in &report.access_events {
        eprintln!(
            "note: {id} left in the dead-letter queue: an access event (from the access queue) is written only as sent by its own caller, and a redrive would send it as you; auditctl dlq list --show-body shows it"
        );
    }
    for (id, error) in &report.failed {
        eprintln!("error: {id} not moved: {error}");
    }
    // Messages it could not see (in flight elsewhere, delayed): exit 1, as list.
    if let Some(unseen) = report.unseen {
        if report.failed.is_empty() {
            return Err(TrailError::from(unseen).into());
        }
        eprintln!("error: {unseen}");
    }
    if report.failed.is_empty() {
        Ok(())
    } else {
        Err(TrailError::Worded(format!(
            "{} message(s) could not be moved (above); they stay in the dead-letter queue",
            report.failed.len()
        ))
        .into())
    }
}
