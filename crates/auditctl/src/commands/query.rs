//! Owns `auditctl query`: its flags and help, and wiring them to the library's time range, plan
//! and reader. Must not know how the table is read (`audit_trail::query`) or printed.

use std::io::IsTerminal;
use std::net::IpAddr;
use std::time::Instant;

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};

use crate::commands::archive_flags::ArchiveReadFlags;
use crate::commands::choices::By;
use audit_model::archive::PeriodLength;
use audit_model::message::EventOutcome;
use audit_model::range::TimeRange;
use audit_proof::prove::archived::Archived;
use audit_proof::tlog::LogReader;
use audit_trail::access::Action;
use audit_trail::filter::{self, Fields, Plan};
use audit_trail::hot::{HotWindow, Split, archived_items, line_kept};
use audit_trail::merge::Order;
use audit_trail::query::QueryOptions;
use audit_trail::stack::StackTags;
use clap::Args;
use futures::{StreamExt, TryStreamExt};

use super::words::{self, TrailError};
use super::{Context, Failure, TableArgs, print_items};

/// Every item with FROM <= auditTime <= TO, ordered by (auditTime, messageId), from the
/// byAuditTime index, or with --actor, --action or --resource the events of that value from
/// its lookup index (never a Scan), printed as it is read.
#[derive(Debug, Args)]
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
a time query as well. A lookup keeps only the full items whose field is exactly the value asked
for, and warns on stderr of each item the index lists that the table no longer holds (expired
by TTL, or deleted). Items written before the lookup indexes existed are not in them. A table
deployed without a lookup index (template.yaml's LookupIndexes) answers a lookup by its field from
the time index over --from..--to with a filter, saying so on stderr (every event of the range is
read); without --from it stops and names the fix.

Past the table's hot window (a stack deployed with RetentionDays: the table's tag
audit:retention-days, or --hot-days), the part of the range before the window is read from the
archive (ARCHIVE_BUCKET or --bucket, DIGEST_PERIOD_SECONDS or --period-seconds): every period from
the day before --from to now, a sealed one through its index; stderr says what was read. A
lookup's default 30 days that reaches before the window by minutes only is the table's.

Who sent it: actor is what the producer claims; senderId is the IAM principal SQS attests sent
the message (a user id, or ROLEID:SESSION for a role), shown in every format beside it, and
originalSenderId the first sender of a redriven event. --sender ID keeps the events whose
senderId is ID, on a time query and on a lookup (checked on the full items: the lookup indexes
do not hold senderId).

Examples:
  auditctl query --from 2026-11-22T00:00:00Z --to 2026-11-22T23:59:59.999Z
  auditctl query --from 2026-11-22T10:00:00+01:00 --to 2026-11-22T11:00:00+01:00 --desc --limit 20
  auditctl query --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z --format jsonl | jq .auditText
  auditctl query --actor alice --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z
  auditctl query --resource invoice/4711 --outcome failure --from 2026-09-01T00:00:00Z --to 2026-12-01T00:00:00Z
  auditctl query --actor alice --action invoice.delete --by actor --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z
  auditctl query --actor alice --sender AROAEXAMPLEROLEID:billing --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z

Environment: TABLE_NAME, ACCESS_QUEUE_URL, ARCHIVE_BUCKET, DIGEST_PERIOD_SECONDS, AWS_ENDPOINT_URL,
AWS_PROFILE, AWS_REGION.")]
pub struct QueryArgs {
    /// First auditTime included, RFC 3339 with an offset, e.g. 2026-11-22T10:00:00Z, or a date
    /// (2026-11-22: that day's start, UTC). Needed for a time query; a lookup (--actor, --action,
    /// --resource) without it reads the 30 days before --to.
    #[arg(long, value_name = "TIME")]
    from: Option<String>,
    /// Last auditTime included, RFC 3339 with an offset, e.g. 2026-11-22T11:00:00+01:00, or a
    /// date (2026-11-22: up to that day's end, UTC) [default: now].
    #[arg(long, value_name = "TIME")]
    to: Option<String>,
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
    /// Only events whose senderId is ID: the IAM principal SQS attests sent the message (a user
    /// id, or a role id and session name as ROLEID:SESSION), where actor is what the producer
    /// claims (an exact-match filter).
    #[arg(long, value_name = "ID")]
    sender: Option<String>,
    /// The index to read when more than one of --actor, --action, --resource is given (the
    /// others filter what it reads); `time` reads byAuditTime and filters by all of them.
    #[arg(long, value_enum, value_name = "INDEX")]
    by: Option<By>,
    /// Leave out access events (auditctl.* actions: auditctl's own reads of the trail, as the
    /// viewer hides them by default); they are still read, and --limit counts the rows printed.
    #[arg(long)]
    no_access: bool,
    /// The table's hot window in days, in place of what its tag audit:retention-days says
    /// (RetentionDays): e.g. the shorter window that was in force before RetentionDays was
    /// raised, whose items TTL deleted already. 0 reads the table alone.
    #[arg(long, value_name = "DAYS", value_parser = clap::value_parser!(u32).range(0..=36500))]
    hot_days: Option<u32>,
    #[command(flatten)]
    table: TableArgs,
    /// Past the table's hot window: where the archive is.
    #[command(flatten)]
    archive: ArchiveReadFlags,
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

/// `auditctl query`: the range and the plan checked, the access recorded, the index checked,
/// then the rows printed as they are read (and `--stats` on stderr).
pub async fn run(args: QueryArgs, context: &Context) -> Result<(), Failure> {
    let lookup = args.fields.actor.is_some()
        || args.fields.action.is_some()
        || args.fields.resource.is_some();
    let range = range(args.from.as_deref(), args.to.as_deref(), lookup, Utc::now())?;
    let fields = Fields {
        actor: args.fields.actor,
        action: args.fields.action,
        resource: args.fields.resource,
        outcome: args.outcome,
        source_ip: args.source_ip,
        sender: args.sender,
    };
    let plan = Plan::new(args.by.map(Into::into), fields).map_err(Failure::usage)?;
    context
        .access
        .record(Action::Query, &args.table.table, &args.table.table)
        .await?;
    let reader = context.reader(&args.table.table);
    let plan = match reader.check_index(&plan).await {
        // A table deployed without this lookup index (LookupIndexes): the time index over the
        // range asked, filtered, when the range is the one asked for.
        Err(audit_trail::Error::NoLookupIndex {
            table,
            index,
            field,
        }) => {
            if args.from.is_none() {
                return Err(TrailError::LookupWithoutIndexNeedsFrom {
                    table,
                    index,
                    field,
                }
                .into());
            }
            let plan = plan.on_time_index();
            reader.check_index(&plan).await?;
            eprintln!(
                "{}",
                words::lookup_on_time_index(&table, &index, field, &range)
            );
            plan
        }
        checked => checked.map(|()| plan)?,
    };
    let order = if args.desc {
        Order::Descending
    } else {
        Order::Ascending
    };
    let options = QueryOptions {
        order,
        page_size: args.page_size,
        concurrency: usize::from(args.concurrency),
        // Without access events, the rows read are not the rows printed: the take below stops.
        limit: args.limit.filter(|_| !args.no_access),
    };
    let started = Instant::now();
    // The table's hot window (RetentionDays): the range's part before it is the archive's.
    // --hot-days, else the table's tag as the access's check read it, else (--no-audit-event)
    // read here.
    let days = match args.hot_days {
        Some(days) => Some(days),
        None => match context.access.stack_tags() {
            Some(tags) => tags.retention_days,
            None => {
                StackTags::read(reader.client(), &args.table.table, &context.location)
                    .await
                    .map_err(TrailError::from)?
                    .retention_days
            }
        },
    };
    let window = days
        .filter(|days| *days > 0)
        .map(|days| HotWindow::at(days, Utc::now()));
    let range = match &window {
        // A lookup's default 30 days that just misses the window: the table's alone.
        Some(window) if args.from.is_none() => window.clip_default(range),
        _ => range,
    };
    let split = match &window {
        Some(window) => window.split(&range),
        None => Split {
            archive: None,
            table: Some(range),
        },
    };
    let archived = match (&window, split.archive) {
        (Some(window), Some(part)) => {
            let bucket = args.archive.bucket.given().ok_or_else(|| {
                Failure::usage(words::hot_window_needs_bucket(&args.table.table, window))
            })?;
            Some((window.clone(), bucket, part))
        }
        _ => None,
    };
    let filters = plan.on_time_index().filters;
    let length = args.archive.period;
    // Read when reached: newest first with --limit, the table's rows may be all it takes.
    let archived = futures::stream::iter(archived)
        .then(move |(window, bucket, part)| {
            let filters = filters.clone();
            async move {
                let (mut read, first) =
                    read_archive(context, &bucket, length, &part, &filters).await?;
                let lines = std::mem::take(&mut read.lines);
                let items = archived_items(lines, &part, &filters, order);
                // On its own line, whatever progress line print_items left open.
                if std::io::stderr().is_terminal() {
                    eprint!("\r\x1b[K");
                }
                eprintln!(
                    "{}",
                    words::read_from_archive(
                        &window,
                        &bucket,
                        first.as_deref(),
                        &read,
                        items.len()
                    )
                );
                Ok::<_, Failure>(futures::stream::iter(items.into_iter().map(Ok)))
            }
        })
        .try_flatten();
    let no_access = args.no_access;
    let table_rows = match split.table {
        Some(part) => reader
            .read(&plan, part, options)
            .map_err(Failure::from)
            .left_stream(),
        None => futures::stream::empty().right_stream(),
    };
    // Oldest first: the archive's part, then the table's; newest first, the other way round.
    let rows = match order {
        Order::Ascending => archived.chain(table_rows).left_stream(),
        Order::Descending => table_rows.chain(archived).right_stream(),
    }
    .try_filter(move |row| futures::future::ready(!(no_access && row.is_access_event())));
    let rows = match args.limit {
        Some(limit) => rows
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .left_stream(),
        None => rows.right_stream(),
    };
    let printed = print_items(rows, &args.table, &reader).await?;
    if args.stats {
        eprintln!("{}", reader.stats.line(printed, started.elapsed()));
    }
    Ok(())
}

/// What was read from the archive for `part` (its events' `auditTime`s): every period an event
/// of it can have been received in (`LogReader::archived_from`). With the first period's start
/// (`None`: the archive holds no object).
async fn read_archive(
    context: &Context,
    bucket: &str,
    length: PeriodLength,
    part: &TimeRange,
    filters: &[(&'static str, String)],
) -> Result<(Archived, Option<String>), Failure> {
    let archive = super::prove::archive(context, bucket);
    let log = LogReader { archive: &archive };
    let Some((from, _)) = part.bounds() else {
        return Ok((Archived::default(), None));
    };
    let keep = |time: &str| part.from.as_str() <= time && time <= part.to.as_str();
    let keep_line = |line: &str| line_kept(line, part, filters);
    let (read, first) = log
        .archived_from(length, from, Utc::now(), &keep, &keep_line)
        .await?;
    let first = first.map(|first| {
        DateTime::from_timestamp(first.start, 0)
            .unwrap_or_default()
            .to_rfc3339_opts(SecondsFormat::Secs, true)
    });
    Ok((read, first))
}

/// How far back a lookup reads without --from.
const LOOKUP_DAYS: i64 = 30;

/// The range of --from and --to as given, a date standing for its whole day (UTC): --to
/// defaults to `now`, and --from of a lookup to `LOOKUP_DAYS` days before --to; a time query
/// without --from is bad usage (it would read the whole trail).
fn range(
    from: Option<&str>,
    to: Option<&str>,
    lookup: bool,
    now: DateTime<Utc>,
) -> Result<TimeRange, Failure> {
    let to = match to {
        Some(to) => day_or_time(to, "23:59:59.999"),
        None => now.to_rfc3339_opts(SecondsFormat::Millis, true),
    };
    let from = match from {
        Some(from) => day_or_time(from, "00:00:00"),
        None if lookup => {
            let end = DateTime::parse_from_rfc3339(&to)
                .map_err(|e| Failure::usage(format!("--to {to}: {e}")))?;
            (end - chrono::Duration::days(LOOKUP_DAYS)).to_rfc3339_opts(SecondsFormat::Millis, true)
        }
        None => {
            return Err(Failure::usage(format!(
                "a time query needs --from (a time, or a date such as {}); a lookup (--actor, --action or --resource) without it reads the last {LOOKUP_DAYS} days",
                now.format("%Y-%m-%d")
            )));
        }
    };
    TimeRange::parse(&from, &to).map_err(Failure::usage)
}

/// `text` as an RFC 3339 time: a date alone (YYYY-MM-DD) becomes that day at `clock`, UTC.
fn day_or_time(text: &str, clock: &str) -> String {
    match NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        Ok(day) if text.len() == 10 => format!("{day}T{clock}Z"),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(from: Option<&str>, to: Option<&str>, lookup: bool) -> (String, String) {
        let now = DateTime::parse_from_rfc3339("2026-11-28T12:34:56.789Z")
            .unwrap()
            .to_utc();
        match range(from, to, lookup, now) {
            Ok(range) => (range.from, range.to),
            Err(Failure::Usage(message)) => ("usage".into(), message),
            Err(_) => unreachable!(),
        }
    }

    #[test]
    fn a_date_is_its_whole_day_in_utc() {
        assert_eq!(
            bounds(Some("2026-11-28"), Some("2026-11-29"), false),
            (
                "2026-11-28T00:00:00.000Z".into(),
                "2026-11-29T23:59:59.999Z".into()
            )
        );
        assert_eq!(
            bounds(Some("2026-11-28T10:00:00+01:00"), None, false),
            (
                "2026-11-28T09:00:00.000Z".into(),
                "2026-11-28T12:34:56.789Z".into()
            )
        );
    }

    #[test]
    fn a_lookup_reads_the_last_30_days_and_a_time_query_needs_its_start() {
        assert_eq!(
            bounds(None, None, true),
            (
                "2026-10-29T12:34:56.789Z".into(),
                "2026-11-28T12:34:56.789Z".into()
            )
        );
        assert_eq!(
            bounds(None, Some("2026-11-01"), true),
            (
                "2026-10-02T23:59:59.999Z".into(),
                "2026-11-01T23:59:59.999Z".into()
            )
        );
        let (usage, message) = bounds(None, None, false);
        assert_eq!(usage, "usage");
        assert!(
            message.starts_with("a time query needs --from (a time, or a date such as 2026-11-28)"),
            "{message}"
        );
    }
}
