//! auditctl, the operator's command line: reads the audit trail in time order, works the
//! dead-letter queue and proves the trail unchanged. Argument parsing and wiring only; the logic
//! is in `this crate`.

use std::io::{BufWriter, IsTerminal, Write};
use std::net::IpAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use audit_model::archive::{DEFAULT_DIGEST_PERIOD_SECONDS, PeriodLength};
use audit_model::keys::DEFAULT_TABLE_NAME;
use audit_model::message::EventOutcome;
use auditctl::TrailError;
use auditctl::access::{self, Action, Recorder, SdkAccessLog};
use auditctl::dlq::{DeadLetterQueue, Listed, ListedWithBody, RedriveOptions};
use auditctl::filter::{self, By, Fields, Plan};
use auditctl::item::TrailItem;
use auditctl::merge::Order;
use auditctl::output::{Format, Printer};
use auditctl::query::{QueryOptions, Reader};
use auditctl::range::TimeRange;
use auditctl::verify::dynamo::DynamoTable;
use auditctl::verify::key::TrustedKey;
use auditctl::verify::kms::KmsKey;
use auditctl::verify::ports::KeySource;
use auditctl::verify::report::Console;
use auditctl::verify::s3::S3Archive;
use auditctl::verify::{ARCHIVE_LAG_SECONDS, Settings, walk};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use futures::{Stream, StreamExt};

const AFTER_HELP: &str = "\
Environment (a flag wins over its variable):
  TABLE_NAME              the audit table (--table)
  AUDIT_QUEUE_URL         the audit queue: where each command records its own access, and the target
                          of a redrive (--queue-url; stack output AuditQueueUrl)
  DEAD_LETTER_QUEUE_URL   the dead-letter queue (--dlq-url; stack output AuditDeadLetterQueueUrl)
  ARCHIVE_BUCKET          the archive bucket, for verify (--bucket; stack output AuditArchiveBucketName)
  DIGEST_KEY_ID           the digest signing key, for verify (--key-id; stack output AuditDigestKeyArn)
  DIGEST_PERIOD_SECONDS   the digest period, for verify (--period-seconds; 3600 in AWS)
  AWS_ENDPOINT_URL        a local endpoint such as moto (--endpoint-url)
  AWS_PROFILE, AWS_REGION and the other standard AWS variables and files (--profile, --region)

Examples:
  auditctl query --from 2026-11-22T00:00:00Z --to 2026-11-22T23:59:59.999Z
  auditctl query --from 2026-11-22T10:00:00+01:00 --to 2026-11-23T10:00:00+01:00 --desc --limit 20
  auditctl query --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z --format csv > november.csv
  auditctl get order-42 --format jsonl
  auditctl dlq list
  auditctl dlq redrive --reason throttled --rate 50
  auditctl verify --from 2026-11-22T00:00:00Z --to 2026-11-22T23:59:59.999Z --table

Access to the trail is itself recorded: query, get, dlq list, dlq redrive and verify first send an
audit event of their own (actor = the caller's ARN from sts:GetCallerIdentity, action
auditctl.query, auditctl.get, auditctl.dlq.list, auditctl.dlq.redrive or auditctl.verify, the
arguments given) to the audit queue.
If it cannot be sent, the command reads nothing and exits 1. Without an audit queue, or with
--no-audit-event, it says on stderr that the access was not recorded.

Exit status: 0 success, 1 failure (the message names the fix; for verify: a problem found), 2 bad
usage.";

const VERIFY_HELP: &str = "\
Walks the digests of every period from the one holding --from to the one holding --to (both
included; times as for query) and checks:
  - the chain: every period's digest present (from the chain's first digest on), each linked to
    the previous period's (the one before the range too), none written over or deleted;
  - each digest's signature, with the public key of DIGEST_KEY_ID fetched from KMS (never taken
    from next to the digest), and its fields (period, bucket, events);
  - each object it lists: that version's SHA-256, size and events (lines after gunzip);
  - that no listed object was overwritten (a newer version) or deleted (a delete marker), and that
    no other object sits in a sealed period's place or in the range's partitions.
With --table it also compares the table with the archive: every archived event of the range's
periods is still in the table unchanged (unless expired by TTL), and every item with auditTime in
the range is among the archived events (looked for in the periods after its receivedAt, up to
--archive-lag later).

Each problem is printed as it is found, one line each: KIND  KEY-OR-MESSAGE-ID  DETAIL, with KIND
one of: digest missing, chain broken, signature invalid, object changed, object missing, object
not in digest, item changed, item missing, item not archived. A summary of what was checked
follows. A period whose digest is absent less than --grace after it could be sealed is \"not sealed
yet\" (counted, not a problem); periods before the chain's first digest are \"before the trail\".

Memory: one period's objects at a time (without --table); with --table also about 40 bytes per
archived event of the range (a 16-byte key in a set).

Examples:
  auditctl verify --from 2026-11-22T00:00:00Z --to 2026-11-22T23:59:59.999Z
  auditctl verify --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z --table
  auditctl verify --from 2026-11-22T10:00:00Z --to 2026-11-22T10:59:59Z | grep '^object'

Exit status: 0 when everything holds, 1 when anything does not (or cannot be read), 2 bad usage.

Environment: ARCHIVE_BUCKET, DIGEST_KEY_ID, DIGEST_PERIOD_SECONDS, TABLE_NAME (--table),
AUDIT_QUEUE_URL, AWS_ENDPOINT_URL, AWS_PROFILE, AWS_REGION.";

/// Reads the audit trail in time order and works the dead-letter queue.
#[derive(Debug, Parser)]
#[command(name = "auditctl", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(flatten)]
    aws: AwsArgs,
    #[command(flatten)]
    audit: AuditArgs,
    #[command(subcommand)]
    command: Command,
}

/// Where a command records its own access (access.rs).
#[derive(Debug, Args)]
struct AuditArgs {
    /// The audit queue (stack output AuditQueueUrl): each command's own access event goes there,
    /// and a redrive's messages.
    #[arg(long, global = true, env = "AUDIT_QUEUE_URL")]
    queue_url: Option<String>,
    /// Do not record this access to the trail (said on stderr).
    #[arg(long, global = true)]
    no_audit_event: bool,
}

#[derive(Debug, Args)]
struct AwsArgs {
    /// The AWS profile (default: the standard chain: AWS_PROFILE, environment, SSO, instance role).
    #[arg(long, global = true, env = "AWS_PROFILE")]
    profile: Option<String>,
    /// The AWS region (default: the profile's, or AWS_REGION).
    #[arg(long, global = true, env = "AWS_REGION")]
    region: Option<String>,
    /// A local AWS endpoint, e.g. http://127.0.0.1:5000 for moto.
    #[arg(long, global = true, env = "AWS_ENDPOINT_URL")]
    endpoint_url: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every item with FROM <= auditTime <= TO, ordered by (auditTime, messageId), from the
    /// byAuditTime index, or with --actor, --action or --resource the events of that value from
    /// its lookup index (never a Scan), printed as it is read.
    #[command(after_help = "\
Times are RFC 3339 with an offset (Z or ±hh:mm), any precision. Items are stored at millisecond
precision in UTC: --to 10:00:00.9999Z includes 10:00:00.999Z; --from 10:00:00.0001Z starts at
10:00:00.001Z. The 32 shards of each UTC day are read concurrently and merged; memory is bounded by
the pages in flight (about 32 x 3 x --page-size items), not by the size of the range.

Lookups: --actor, --action or --resource reads the 4 shards of that value in its index (byActor,
byAction, byResource) over the whole range at once, merges them in the same order, and reads the
full items 100 at a time (BatchGetItem). Given two or three of them, --by names the index and the
others filter. --outcome and --source-ip filter too (the IP in any text form: 2001:DB8::1 finds
2001:db8::1). Filters are exact matches applied by DynamoDB to what the index reads; they work on
a time query as well. Items written before the lookup indexes existed are not in them.

Examples:
  auditctl query --from 2026-11-22T00:00:00Z --to 2026-11-22T23:59:59.999Z
  auditctl query --from 2026-11-22T10:00:00+01:00 --to 2026-11-22T11:00:00+01:00 --desc --limit 20
  auditctl query --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z --format jsonl | jq .auditText
  auditctl query --actor alice --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z
  auditctl query --resource invoice/4711 --outcome failure --from 2026-09-01T00:00:00Z --to 2026-12-01T00:00:00Z
  auditctl query --actor alice --action invoice.delete --by actor --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z

Environment: TABLE_NAME, AWS_ENDPOINT_URL, AWS_PROFILE, AWS_REGION.")]
    Query(QueryArgs),
    /// The item(s) of one messageId (a Query on the table's key).
    #[command(after_help = "\
Example:
  auditctl get order-42 --format jsonl

Environment: TABLE_NAME, AWS_ENDPOINT_URL, AWS_PROFILE, AWS_REGION.")]
    Get(GetArgs),
    /// The dead-letter queue: list its messages, or redrive them to the audit queue.
    Dlq(DlqArgs),
    /// Proves the trail unchanged: the chain of signed digests over the range, every object they
    /// list, nothing overwritten, deleted or slipped in; with --table, the table against the
    /// archive.
    #[command(after_help = VERIFY_HELP)]
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// The first time of the range, RFC 3339 with an offset, e.g. 2026-11-22T10:00:00Z.
    #[arg(long, value_name = "TIME")]
    from: String,
    /// The last time of the range (included), RFC 3339 with an offset.
    #[arg(long, value_name = "TIME")]
    to: String,
    /// Also compare the table with the archive: archived events still in the table unchanged,
    /// the table's items of the range archived.
    #[arg(long)]
    table: bool,
    /// The archive bucket (stack output AuditArchiveBucketName).
    #[arg(long, env = "ARCHIVE_BUCKET", value_name = "BUCKET")]
    bucket: Option<String>,
    /// The digest signing key: its ARN, id or alias (stack output AuditDigestKeyArn).
    #[arg(long, env = "DIGEST_KEY_ID", value_name = "KEY")]
    key_id: Option<String>,
    /// The digest period in seconds, the archiver's (3600 in AWS, short on the local stack).
    #[arg(long, env = "DIGEST_PERIOD_SECONDS", value_name = "SECONDS", default_value = DEFAULT_PERIOD, value_parser = parse_period)]
    period_seconds: PeriodLength,
    /// Seconds after a period could be sealed (its end + 30 s) during which its absent digest is
    /// "not sealed yet" rather than missing [default: 600 + the period].
    #[arg(long, value_name = "SECONDS")]
    grace: Option<u32>,
    /// With --table: seconds after an item's receivedAt within which the archiver archives it
    /// (how far beyond --to, and after each item, the archive is read).
    #[arg(long, value_name = "SECONDS", default_value_t = ARCHIVE_LAG_SECONDS as u32)]
    archive_lag: u32,
    /// The audit table (with --table).
    #[arg(long, env = "TABLE_NAME", value_name = "TABLE", default_value = DEFAULT_TABLE_NAME)]
    table_name: String,
    /// Object reads in flight at most.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
    concurrency: u16,
}

/// The digest period in AWS, as the flag's default: the model's, checked when this compiles.
const DEFAULT_PERIOD: &str = "3600";
const _: () = assert!(DEFAULT_DIGEST_PERIOD_SECONDS == 3600);

/// A digest period: from 10 seconds to a day, dividing a day.
fn parse_period(text: &str) -> Result<PeriodLength, String> {
    text.trim()
        .parse::<u32>()
        .ok()
        .and_then(PeriodLength::new)
        .ok_or_else(|| {
            format!("'{text}' is not a digest period: seconds from 10 to 86400 that divide a day (3600 in AWS); use the archiver's DIGEST_PERIOD_SECONDS")
        })
}

#[derive(Debug, Args)]
struct TableArgs {
    /// The audit table.
    #[arg(long, env = "TABLE_NAME", default_value = DEFAULT_TABLE_NAME)]
    table: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Debug, Args)]
struct QueryArgs {
    /// First auditTime included, RFC 3339 with an offset, e.g. 2026-11-22T10:00:00Z.
    #[arg(long, value_name = "TIME")]
    from: String,
    /// Last auditTime included, RFC 3339 with an offset, e.g. 2026-11-22T11:00:00+01:00.
    #[arg(long, value_name = "TIME")]
    to: String,
    /// Newest first (reverses both auditTime and messageId order).
    #[arg(long)]
    desc: bool,
    /// Stop after N rows (and stop querying).
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// Items per Query request (the Query Limit).
    #[arg(long, value_name = "N", default_value_t = 500, value_parser = clap::value_parser!(i32).range(1..))]
    page_size: i32,
    /// Query requests in flight at most.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    concurrency: u16,
    /// Print rows, requests and time on stderr at the end.
    #[arg(long)]
    stats: bool,
    #[command(flatten)]
    fields: FieldArgs,
    /// Only events with this outcome: success, failure or unknown (a filter).
    #[arg(long, value_name = "OUTCOME", value_parser = filter::parse_outcome)]
    outcome: Option<EventOutcome>,
    /// Only events from this IPv4 or IPv6 address, in any text form (a filter).
    #[arg(long, value_name = "IP", value_parser = filter::parse_source_ip)]
    source_ip: Option<IpAddr>,
    /// The index to read when more than one of --actor, --action, --resource is given (the
    /// others filter what it reads); `time` reads byAuditTime and filters by all of them.
    #[arg(long, value_enum, value_name = "INDEX")]
    by: Option<By>,
    #[command(flatten)]
    table: TableArgs,
}

/// Who did what to what: one of --actor, --action, --resource picks a lookup index; the others
/// filter (exact match).
#[derive(Debug, Args)]
#[group(id = "lookup", multiple = true, required = false)]
struct FieldArgs {
    /// Only events of this actor (a lookup on the byActor index).
    #[arg(long, value_name = "ACTOR")]
    actor: Option<String>,
    /// Only events of this action (a lookup on the byAction index).
    #[arg(long, value_name = "ACTION")]
    action: Option<String>,
    /// Only events on this resource (a lookup on the byResource index).
    #[arg(long, value_name = "RESOURCE")]
    resource: Option<String>,
}

#[derive(Debug, Args)]
struct GetArgs {
    /// The item's messageId (a producer messageId, or the original SQS message id).
    message_id: String,
    #[command(flatten)]
    table: TableArgs,
}

#[derive(Debug, Args)]
struct DlqArgs {
    /// The dead-letter queue URL (stack output AuditDeadLetterQueueUrl).
    #[arg(long, global = true, env = "DEAD_LETTER_QUEUE_URL")]
    dlq_url: Option<String>,
    #[command(subcommand)]
    command: DlqCommand,
}

#[derive(Debug, Subcommand)]
enum DlqCommand {
    /// The messages with their reason, original SQS message id, failed-at time, receive count
    /// and body size; bodies only with --show-body. Leaves the queue as it was: every message
    /// received is made visible again before the command ends.
    #[command(after_help = "\
The reason is the failureReason attribute the function set, or max_receives when there is none
(SQS moved the message itself after maxReceiveCount receives).

It lists every message the queue holds. When it cannot (some are in flight with another consumer,
or delayed), it prints those it got, says on stderr how many it listed of how many and what to do,
and exits 1. With --show-body the table prints each body in full under its row; jsonl and csv
carry it in full in their body field.

Examples:
  auditctl dlq list
  auditctl dlq list --reason conflict --show-body --format jsonl

Environment: DEAD_LETTER_QUEUE_URL, AWS_ENDPOINT_URL, AWS_PROFILE, AWS_REGION.")]
    List {
        /// Only messages of this reason code (e.g. throttled, conflict, max_receives).
        #[arg(long, value_name = "CODE")]
        reason: Option<String>,
        /// Print the bodies, each in full (audit text can be personal data).
        #[arg(long)]
        show_body: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Moves messages back to the audit queue: each is sent (body and attributes as they are)
    /// and deleted from the dead-letter queue only after the send succeeded.
    #[command(after_help = "\
A message without a failureContext (SQS moved it after maxReceiveCount receives) gets one built
from its own message id and SentTimestamp, reason max_receives, so the function writes it under
its original identity: a message already written is a duplicate, not a second item. (SQS's own
StartMessageMoveTask gives each message a new id and loses that identity.) Messages not moved are
visible again when the command ends.

It goes through the whole queue (or up to --max). When it cannot see every message (some are in
flight with another consumer, or delayed), it moves what it saw, says on stderr how many it saw
of how many and what to do, and exits 1.

Examples:
  auditctl dlq redrive --dry-run
  auditctl dlq redrive --reason throttled --rate 50
  auditctl dlq redrive --reason max_receives --max 100

Environment: AUDIT_QUEUE_URL, DEAD_LETTER_QUEUE_URL, AWS_ENDPOINT_URL, AWS_PROFILE, AWS_REGION.")]
    Redrive {
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
    },
}

/// A failure: usage (exit 2) or anything else (exit 1).
enum Failure {
    Usage(String),
    Trail(TrailError),
    /// `verify` found problems (printed): exit 1 with nothing more to say.
    Problems,
}

impl From<TrailError> for Failure {
    fn from(error: TrailError) -> Self {
        Self::Trail(error)
    }
}

impl From<access::AccessError> for Failure {
    fn from(error: access::AccessError) -> Self {
        Self::Trail(TrailError::Access(error))
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        Self::Trail(TrailError::Output(error))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // clap exits 2 on bad usage. Built first, so that each subcommand holds the global flags
    // that given_arguments reads.
    let mut command = Cli::command();
    command.build();
    let matches = command.get_matches_mut();
    let cli = Cli::from_arg_matches(&matches)
        .map_err(|e| e.format(&mut Cli::command()))
        .unwrap_or_else(|e| e.exit());
    let arguments = access::given_arguments(&command, &matches);
    match run(cli, arguments).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Trail(TrailError::Output(e)))
            if e.kind() == std::io::ErrorKind::BrokenPipe =>
        {
            ExitCode::SUCCESS // `auditctl query ... | head`
        }
        Err(Failure::Usage(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Problems) => ExitCode::FAILURE,
        Err(Failure::Trail(error)) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(
    cli: Cli,
    arguments: serde_json::Map<String, serde_json::Value>,
) -> Result<(), Failure> {
    let config = audit_aws::config::cli(&audit_aws::config::CliOptions {
        profile: cli.aws.profile.clone(),
        region: cli.aws.region.clone(),
        endpoint_url: cli.aws.endpoint_url.clone(),
    })
    .await;
    // Each command that reads the trail or moves dead letters records that first (after its
    // arguments are checked, before any read): `access.record(...)` in its arm.
    let access = Recorder::new(
        cli.audit
            .queue_url
            .clone()
            .map(|url| SdkAccessLog::new(&config, url)),
        cli.audit.no_audit_event,
        arguments,
    );
    let location = match (&cli.aws.endpoint_url, config.region()) {
        (Some(endpoint), _) => endpoint.clone(),
        (None, Some(region)) => format!("region {region}"),
        (None, None) => "no region (set AWS_REGION or --region)".to_owned(),
    };
    match cli.command {
        Command::Verify(args) => verify(args, &config, &access, location).await,
        Command::Query(args) => {
            let range = TimeRange::parse(&args.from, &args.to)
                .map_err(|e| Failure::Usage(e.to_string()))?;
            let fields = Fields {
                actor: args.fields.actor,
                action: args.fields.action,
                resource: args.fields.resource,
                outcome: args.outcome,
                source_ip: args.source_ip,
            };
            let plan = Plan::new(args.by, fields).map_err(|e| Failure::Usage(e.to_string()))?;
            access.record(Action::Query, &args.table.table).await?;
            let reader = Reader::new(
                aws_sdk_dynamodb::Client::new(&config),
                &args.table.table,
                location,
            );
            reader.check_index(&plan).await?;
            let options = QueryOptions {
                order: if args.desc {
                    Order::Descending
                } else {
                    Order::Ascending
                },
                page_size: args.page_size,
                concurrency: usize::from(args.concurrency),
                limit: args.limit,
            };
            let started = Instant::now();
            let rows = reader.read(&plan, range, options);
            let rows = match args.limit {
                Some(limit) => rows
                    .take(usize::try_from(limit).unwrap_or(usize::MAX))
                    .left_stream(),
                None => rows.right_stream(),
            };
            let printed = print_items(rows, args.table.format, &reader).await?;
            if args.stats {
                eprintln!("{}", reader.stats.line(printed, started.elapsed()));
            }
            Ok(())
        }
        Command::Get(args) => {
            access.record(Action::Get, &args.table.table).await?;
            let reader = Reader::new(
                aws_sdk_dynamodb::Client::new(&config),
                &args.table.table,
                location,
            );
            print_items(reader.get(&args.message_id), args.table.format, &reader).await?;
            Ok(())
        }
        Command::Dlq(dlq) => {
            let url = dlq.dlq_url.ok_or(TrailError::NoQueueUrl {
                what: "dead-letter queue",
                env: "DEAD_LETTER_QUEUE_URL",
                flag: "--dlq-url",
                output: "AuditDeadLetterQueueUrl",
            })?;
            let queue = DeadLetterQueue::new(aws_sdk_sqs::Client::new(&config), url.clone());
            match dlq.command {
                DlqCommand::List {
                    reason,
                    show_body,
                    format,
                } => {
                    access.record(Action::DlqList, &url).await?;
                    let listing = queue.list().await?;
                    let shown = listing
                        .messages
                        .iter()
                        .filter(|m| reason.as_ref().is_none_or(|r| *r == m.reason()));
                    let out = BufWriter::new(std::io::stdout().lock());
                    if show_body {
                        let mut printer = Printer::new(format, out);
                        for message in shown {
                            printer.print(&ListedWithBody(message))?;
                        }
                        printer.finish()?;
                    } else {
                        let mut printer = Printer::new(format, out);
                        for message in shown {
                            printer.print(&Listed(message))?;
                        }
                        printer.finish()?;
                    }
                    // Everything it got is printed; then how many of how many, and exit 1.
                    match listing.shortfall {
                        None => Ok(()),
                        Some(shortfall) => Err(TrailError::from(shortfall).into()),
                    }
                }
                DlqCommand::Redrive {
                    reason,
                    max,
                    rate,
                    dry_run,
                } => {
                    let target = cli.audit.queue_url.clone().ok_or(TrailError::NoQueueUrl {
                        what: "audit queue",
                        env: "AUDIT_QUEUE_URL",
                        flag: "--queue-url",
                        output: "AuditQueueUrl",
                    })?;
                    if rate.is_some_and(|r| r.is_nan() || r <= 0.0) {
                        return Err(Failure::Usage("--rate must be above 0".into()));
                    }
                    access.record(Action::DlqRedrive, &url).await?;
                    let options = RedriveOptions {
                        reason,
                        max,
                        rate,
                        dry_run,
                    };
                    let report = queue.redrive(&target, &options).await?;
                    let total =
                        |m: &std::collections::BTreeMap<String, u64>| m.values().sum::<u64>();
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
                        Err(TrailError::Aws(format!(
                            "{} message(s) could not be moved (above); they stay in the dead-letter queue",
                            report.failed.len()
                        ))
                        .into())
                    }
                }
            }
        }
    }
}

/// `auditctl verify`: its settings checked, its access recorded, the key fetched and checked, then
/// the walk, printing each problem as it is found and the summary last.
async fn verify(
    args: VerifyArgs,
    config: &aws_config::SdkConfig,
    access: &Recorder<SdkAccessLog>,
    location: String,
) -> Result<(), Failure> {
    let range =
        TimeRange::parse(&args.from, &args.to).map_err(|e| Failure::Usage(e.to_string()))?;
    let length = args.period_seconds;
    let given = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
    let bucket = given(args.bucket).ok_or(TrailError::NotSet {
        var: "ARCHIVE_BUCKET",
        flag: "--bucket",
        output: "AuditArchiveBucketName",
    })?;
    let key_id = given(args.key_id).ok_or(TrailError::NotSet {
        var: "DIGEST_KEY_ID",
        flag: "--key-id",
        output: "AuditDigestKeyArn",
    })?;
    let time_plan =
        Plan::new(None, Fields::default()).map_err(|e| Failure::Usage(e.to_string()))?;
    access.record(Action::Verify, &bucket).await?;
    // The public key from KMS, never from next to a digest.
    let key = TrustedKey::new(
        KmsKey::new(config, key_id, location.clone())
            .public_key()
            .await?,
    )?;
    let archive = S3Archive::new(config, &bucket, location.clone());
    let table = if args.table {
        let reader = Reader::new(
            aws_sdk_dynamodb::Client::new(config),
            &args.table_name,
            location,
        );
        reader.check_index(&time_plan).await?;
        Some(DynamoTable::new(reader))
    } else {
        None
    };
    let settings = Settings {
        bucket,
        length,
        range,
        now: chrono::Utc::now(),
        grace_seconds: args
            .grace
            .map(i64::from)
            .unwrap_or_else(|| Settings::default_grace(length)),
        lag_seconds: i64::from(args.archive_lag),
        concurrency: usize::from(args.concurrency),
    };
    let mut console = Console::new(
        BufWriter::new(std::io::stdout().lock()),
        std::io::stderr().is_terminal(),
    );
    let walked = walk::verify(&archive, &key, table.as_ref(), &settings, &mut console).await;
    console.clear();
    let summary = match walked {
        Ok(summary) => summary,
        // `auditctl verify | head`: what was printed stands, and so do its problems.
        Err(TrailError::Output(e))
            if e.kind() == std::io::ErrorKind::BrokenPipe && console.printed() > 0 =>
        {
            return Err(Failure::Problems);
        }
        Err(error) => return Err(error.into()),
    };
    console.finish(&summary)?;
    if summary.holds() {
        Ok(())
    } else {
        Err(Failure::Problems)
    }
}

/// Prints rows as they arrive: flushed at least every 100 ms, with a progress line on stderr
/// when stderr is a terminal. Returns the rows printed.
async fn print_items(
    rows: impl Stream<Item = Result<TrailItem, TrailError>>,
    format: Format,
    reader: &Reader,
) -> Result<u64, Failure> {
    let mut printer = Printer::new(format, BufWriter::new(std::io::stdout().lock()));
    let progress = std::io::stderr().is_terminal();
    let mut last = Instant::now();
    let mut shown_progress = false;
    let mut rows = std::pin::pin!(rows);
    while let Some(row) = rows.next().await {
        printer.print(&row?)?;
        if last.elapsed() >= Duration::from_millis(100) {
            printer.flush()?;
            last = Instant::now();
            if progress {
                eprint!(
                    "\r{} rows, {} requests ",
                    printer.rows(),
                    reader.stats.requests()
                );
                let _ = std::io::stderr().flush();
                shown_progress = true;
            }
        }
    }
    printer.finish()?;
    if shown_progress {
        eprint!("\r\x1b[K");
    }
    Ok(printer.rows())
}
