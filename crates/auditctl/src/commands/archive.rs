//! Owns `auditctl archive repair`: its flags and help, wiring verify's archive, key and table and
//! the archiver function to the repair (`crate::commands::repair`), what it prints and its exit. Must not
//! know how the missing items are found or archived.

use std::io::Write;

use crate::commands::repair::{self, LambdaArchiver};
use crate::commands::table::DynamoTable;
use crate::commands::words::RepairFailure;
use crate::commands::words::TrailError;
use audit_model::keys::DEFAULT_TABLE_NAME;
use audit_model::range::TimeRange;
use audit_model::repair::RepairAnswer;
use audit_proof::archive::S3Archive;
use audit_proof::verify::key::TrustedKey;
use audit_proof::verify::kms::KmsKey;
use audit_proof::verify::ports::KeySource;
use audit_proof::verify::{ARCHIVE_LAG_SECONDS, Settings};
use audit_trail::access::Action;
use audit_trail::filter::{Fields, Plan};
use clap::{Args, Subcommand};

use super::archive_flags::ArchiveFlags;
use super::{Context, Failure};

/// The archive: repair what it lacks.
#[derive(Debug, Args)]
pub struct ArchiveArgs {
    #[command(subcommand)]
    command: ArchiveCommand,
}

#[derive(Debug, Subcommand)]
enum ArchiveCommand {
    Repair(RepairArgs),
}

const REPAIR_HELP: &str = "\
Finds the items of the table with auditTime in the range that are in no archive object (what
`auditctl verify --table` reports as `item not archived`: records given up to
AuditArchiveFailureQueue, or any other loss) and asks the archiver function to archive them. Only
their keys are sent: the archiver reads each item from the table itself (ConsistentRead) and
archives its line through its own markers and objects, in the period open now, each object marked
as a repair (user metadata repair: true; its marker says repair). Once that period is sealed,
`auditctl verify --table` finds the items archived again and counts the repaired objects.

Idempotent: a second repair of the same range finds nothing missing, and an item sent twice is
archived once (the archiver finds its earlier repair). Items written within --archive-lag of now
are not repaired: the stream may still deliver them.

Prints one line per item: `repaired  MESSAGE_ID  AUDIT_TIME  OBJECT`, `already repaired …`, `not
in the table …` (expired or deleted since), `failed  …  REASON`, then a summary. Exit status 0 when
every missing item is archived (or there was none), 1 otherwise (the message names the fix), 2 bad
usage.

Its access is recorded first (action auditctl.archive.repair, resource the archive bucket). It
needs AuditOperatorPolicy: verify's reads, plus lambda:InvokeFunction on the archiver.

Examples:
  auditctl archive repair --from 2026-11-22T10:00:00Z --to 2026-11-22T10:59:59.999Z --dry-run
  auditctl archive repair --from 2026-11-22T10:00:00Z --to 2026-11-22T10:59:59.999Z

Environment: ARCHIVER_FUNCTION, ARCHIVE_BUCKET, DIGEST_KEY_ID, DIGEST_PERIOD_SECONDS, TABLE_NAME
(--table-name), ACCESS_QUEUE_URL, AWS_ENDPOINT_URL (AWS_ENDPOINT_URL_LAMBDA for the archiver's,
locally), AWS_PROFILE, AWS_REGION.";

/// Archives, through the archiver, the table's items of a range that the archive lacks.
#[derive(Debug, Args)]
#[command(after_help = REPAIR_HELP)]
pub struct RepairArgs {
    /// The first time of the range, RFC 3339 with an offset, e.g. 2026-11-22T10:00:00Z.
    #[arg(long, value_name = "TIME")]
    from: String,
    /// The last time of the range (included), RFC 3339 with an offset.
    #[arg(long, value_name = "TIME")]
    to: String,
    /// The archiver function: its name or ARN (stack output AuditArchiverFunctionArn).
    #[arg(long, env = "ARCHIVER_FUNCTION", value_name = "FUNCTION")]
    archiver_function: Option<String>,
    /// List what would be repaired; invoke nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    archive: ArchiveFlags,
    /// Seconds after an item's receivedAt within which the stream archives it: items written
    /// more recently are left to the stream, and the archive is read this far after each item.
    #[arg(long, value_name = "SECONDS", default_value_t = ARCHIVE_LAG_SECONDS as u32)]
    archive_lag: u32,
    /// The audit table (its tag also names the access queue).
    #[arg(long, env = "TABLE_NAME", value_name = "TABLE", default_value = DEFAULT_TABLE_NAME)]
    table_name: String,
}

pub async fn run(args: ArchiveArgs, context: &Context) -> Result<(), Failure> {
    match args.command {
        ArchiveCommand::Repair(args) => repair_range(args, context).await,
    }
}

/// `auditctl archive repair`: settings checked, access recorded, the missing items found as
/// verify finds them, then sent to the archiver and what it did printed.
async fn repair_range(args: RepairArgs, context: &Context) -> Result<(), Failure> {
    let range = TimeRange::parse(&args.from, &args.to).map_err(Failure::usage)?;
    let given = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
    let bucket = args.archive.bucket()?;
    let key_id = args.archive.key_id()?;
    let function = given(args.archiver_function);
    if function.is_none() && !args.dry_run {
        return Err(TrailError::Repair(RepairFailure::NoFunction).into());
    }
    let time_plan = Plan::new(None, Fields::default()).map_err(Failure::usage)?;
    context
        .access
        .record(Action::ArchiveRepair, &bucket, &args.table_name)
        .await?;
    let (config, location) = (&context.config, &context.location);
    let key = TrustedKey::new(
        KmsKey::new(config, key_id, location.clone())
            .public_key()
            .await?,
    )?;
    let archive = S3Archive::new(config, &bucket, location.clone());
    let reader = context.reader(&args.table_name);
    reader.check_index(&time_plan).await?;
    let table = DynamoTable::new(reader);
    let length = args.archive.period;
    let settings = Settings {
        bucket: bucket.clone(),
        length,
        range,
        now: chrono::Utc::now(),
        grace_seconds: Settings::default_grace(length),
        lag_seconds: i64::from(args.archive_lag),
        concurrency: 8,
        attestations: None,
    };
    let missing = repair::missing(&archive, &key, &table, &settings).await?;
    let mut out = std::io::stdout().lock();
    if missing.other_problems > 0 {
        eprintln!(
            "note: verify finds {} other problem(s) in the range, which a repair does not mend: run auditctl verify --table over it",
            missing.other_problems
        );
    }
    if missing.keys.is_empty() {
        writeln!(
            out,
            "nothing to repair: every item of the range is archived (or written within --archive-lag of now, left to the stream)"
        )?;
        return Ok(());
    }
    let Some(function) = function.filter(|_| !args.dry_run) else {
        for key in &missing.keys {
            writeln!(out, "would repair  {}  {}", key.message_id, key.audit_time)?;
        }
        writeln!(
            out,
            "would repair {} item(s); nothing sent",
            missing.keys.len()
        )?;
        return Ok(());
    };
    let archiver = LambdaArchiver::new(
        audit_aws::lambda::LambdaFunction::new(audit_aws::config::lambda(config), function),
        location.clone(),
    );
    let answer = repair::repair(&archiver, &missing.keys, &mut |answer| {
        print_answer(&mut out, answer).map_err(TrailError::Output)
    })
    .await?;
    let objects: std::collections::BTreeSet<&str> =
        answer.repaired.iter().map(|r| r.object.as_str()).collect();
    writeln!(
        out,
        "{} item(s) the archive lacked: {} repaired in {} object(s), {} already repaired, {} no longer in the table, {} failed",
        missing.keys.len(),
        answer.repaired.len(),
        objects.len(),
        answer.already_repaired.len(),
        answer.not_found.len(),
        answer.failed.len()
    )?;
    out.flush()?;
    if answer.failed.is_empty() {
        Ok(())
    } else {
        eprintln!(
            "error: {} item(s) not repaired (reasons above): run the same auditctl archive repair again; it archives only what is still missing",
            answer.failed.len()
        );
        Err(Failure::Problems)
    }
}

fn print_answer(out: &mut impl Write, answer: &RepairAnswer) -> std::io::Result<()> {
    for r in &answer.repaired {
        writeln!(
            out,
            "repaired  {}  {}  {}",
            r.key.message_id, r.key.audit_time, r.object
        )?;
    }
    for key in &answer.already_repaired {
        writeln!(
            out,
            "already repaired  {}  {}  an earlier repair archived it",
            key.message_id, key.audit_time
        )?;
    }
    for key in &answer.not_found {
        writeln!(
            out,
            "not in the table  {}  {}  expired or deleted since: nothing to archive",
            key.message_id, key.audit_time
        )?;
    }
    for f in &answer.failed {
        writeln!(
            out,
            "failed  {}  {}  {}",
            f.key.message_id, f.key.audit_time, f.reason
        )?;
    }
    out.flush()
}
