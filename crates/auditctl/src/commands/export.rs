//! Owns `auditctl export --evidence`: its flags and help, the access recorded, the log's key from
//! KMS, the bundle's place checked and its summary printed. Must not know how the bundle is made
//! or written (`audit_proof::evidence::bundle`), which packing a path asks for
//! (`audit_check_proof::packing`), nor how it is checked.

use std::net::IpAddr;
use std::path::PathBuf;

use audit_check_proof::{Packing, packing};
use audit_model::evidence::PUBLIC_KEY;
use audit_model::keys::DEFAULT_TABLE_NAME;
use audit_model::message::EventOutcome;
use audit_model::note::origin;
use audit_model::range::TimeRange;
use audit_proof::evidence::bundle::{self, Filters, Request};
use audit_proof::tlog::{LogReader, witness_key_args};
use audit_trail::access::Action;
use audit_trail::filter;
use chrono::DateTime;
use clap::Args;

use super::archive_flags::ArchiveFlags;
use super::prove::{archive, log_key};
use super::{Context, Failure};

const EXPORT_HELP: &str = "\
Writes an evidence bundle for an auditor (docs/archive.md \"Evidence for auditors\"): a directory,
a .tar.gz when PATH ends .tar.gz or .tgz, or a .zip when it ends .zip, that `auditctl check-proof PATH` (or
`audit-check-proof PATH`) checks offline, holding

  events.jsonl     each event as its archived line, exact bytes, in log order
  proofs.jsonl     line for line, each event's proof as `auditctl prove` prints it
  checkpoint.txt   the checkpoint every proof is in, with every cosignature found
  checkpoints/     the checkpoints a completeness claim names (<size>.txt)
  digest-key.pem   the digest key's public key (its ARN is in the manifest)
  unproven.jsonl   the archived lines of events whose period is not sealed yet
  manifest.json    the query and filters, the periods with their leaves, the counts, the tree
                   size, what is proven and what is not, when and by whom it was made

The range picks the digest periods from the one holding --from to the one holding --to: an event
is in the period its archive object was written in (received then, give or take a late write).
Each period's index is read, each archive object and each tile once. Without filters, when every
period is sealed, the bundle also proves it holds every event of those periods: their leaves are
one contiguous run of the log, and a range proof recomputes the checkpoints at both ends of it.
With filters only inclusion is proven, and the manifest says so. Events of periods not sealed yet
are listed as unproven, never left out.

Examples:
  auditctl export --from 2026-07-01T00:00:00Z --to 2026-09-30T23:59:59Z --evidence q3
  auditctl export --from 2026-07-01T00:00:00Z --to 2026-09-30T23:59:59Z --action admin.grant \\
    --evidence q3-grants --witness-key \"$WITNESS_KEY\"
  auditctl check-proof q3 --public-key q3/digest-key.pem --origin audit-receiver/$ARCHIVE_BUCKET

Exit status: 0 written, 1 failure (the message names the fix), 2 bad usage.

Its access is recorded first (action auditctl.export; see auditctl --help).

Environment: TABLE_NAME, ARCHIVE_BUCKET, DIGEST_KEY_ID, DIGEST_PERIOD_SECONDS, ACCESS_QUEUE_URL,
AWS_ENDPOINT_URL, AWS_PROFILE, AWS_REGION.";

/// Writes an evidence bundle: events, their proofs, checkpoints and a manifest.
#[derive(Debug, Args)]
#[command(after_help = EXPORT_HELP)]
pub struct ExportArgs {
    /// The first period's time: RFC 3339 with an offset, e.g. 2026-07-01T00:00:00Z.
    #[arg(long, value_name = "TIME")]
    from: String,
    /// The last period's time: RFC 3339 with an offset.
    #[arg(long, value_name = "TIME")]
    to: String,
    /// The bundle: a directory (made; it must not hold files already), or a .tar.gz (PATH ending
    /// .tar.gz or .tgz) or a .zip (PATH ending .zip) of the same files.
    #[arg(long, value_name = "PATH")]
    evidence: PathBuf,
    /// Only events of this actor (a filter: only inclusion is then proven).
    #[arg(long, value_name = "ACTOR")]
    actor: Option<String>,
    /// Only events of this action (a filter).
    #[arg(long, value_name = "ACTION")]
    action: Option<String>,
    /// Only events on this resource (a filter).
    #[arg(long, value_name = "RESOURCE")]
    resource: Option<String>,
    /// Only events with this outcome: success, failure or unknown (a filter).
    #[arg(long, value_name = "OUTCOME", value_parser = filter::parse_outcome)]
    outcome: Option<EventOutcome>,
    /// Only events from this IPv4 or IPv6 address (a filter).
    #[arg(long, value_name = "IP", value_parser = filter::parse_source_ip)]
    source_ip: Option<IpAddr>,
    /// Only events whose senderId is ID (a filter).
    #[arg(long, value_name = "ID")]
    sender: Option<String>,
    /// The tree size to prove the events in [default: the largest cosigned by a --witness-key
    /// witness holding them all, else the newest].
    #[arg(long, value_name = "N")]
    tree_size: Option<u64>,
    /// A witness whose cosignature chooses the tree size (as for `prove`). Repeatable.
    #[arg(long, value_name = "KEY")]
    witness_key: Vec<String>,
    /// The audit table (its tag names the access queue).
    #[arg(long, env = "TABLE_NAME", value_name = "TABLE", default_value = DEFAULT_TABLE_NAME)]
    table: String,
    #[command(flatten)]
    archive: ArchiveFlags,
}

impl ExportArgs {
    /// The filters given, as (the archived line's field, its value).
    fn filters(&self) -> Filters {
        [
            ("actor", self.actor.clone()),
            ("action", self.action.clone()),
            ("resource", self.resource.clone()),
            ("outcome", self.outcome.map(|o| o.as_str().to_owned())),
            ("sourceIp", self.source_ip.map(|ip| ip.to_string())),
            ("senderId", self.sender.clone()),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect()
    }
}

/// `auditctl export`: the range and the bundle's place checked, the access recorded, the
/// contents made and written.
pub async fn run(args: ExportArgs, context: &Context) -> Result<(), Failure> {
    let range = TimeRange::parse(&args.from, &args.to).map_err(Failure::usage)?;
    let time = |text: &str| {
        DateTime::parse_from_rfc3339(text)
            .map(|t| t.to_utc())
            .map_err(|e| Failure::usage(format!("{text}: {e}")))
    };
    let (from, to) = (time(&range.from)?, time(&range.to)?);
    let dir = &args.evidence;
    let name = dir.to_string_lossy();
    let packing = packing(dir);
    let packed = packing != Packing::Directory;
    if packed && dir.exists() {
        return Err(Failure::usage(format!(
            "--evidence {name}: the file is there already; give a new one"
        )));
    }
    if !packed && std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(Failure::usage(format!(
            "--evidence {name}: the directory holds files already; give a new one"
        )));
    }
    let witnesses = witness_key_args(&args.witness_key).map_err(Failure::usage)?;
    let bucket = args.archive.bucket()?;
    let key_id = args.archive.key_id()?;
    context
        .access
        .record(Action::Export, &bucket, &args.table)
        .await?;
    let made_by = context
        .access
        .caller()
        .map(|c| c.arn.clone())
        .unwrap_or_else(|| "not recorded (--no-audit-event)".to_owned());
    let (key, arn, der) = log_key(context, key_id).await?;
    let archive = archive(context, &bucket);
    let log = LogReader { archive: &archive };
    let filters = args.filters();
    let log_origin = origin(&bucket);
    let request = Request {
        from,
        to,
        from_text: &range.from,
        to_text: &range.to,
        filters: &filters,
        length: args.archive.period,
        key: &key,
        key_der: &der,
        key_arn: &arn,
        origin: &log_origin,
        witnesses: &witnesses,
        tree_size: args.tree_size,
        made_by,
    };
    let made = bundle::make(&log, &request).await?;
    let written = |result: std::io::Result<std::fs::File>| {
        result
            .and_then(|file| file.sync_all())
            .map_err(|e| Failure::usage(format!("cannot write {}: {e}", dir.display())))
    };
    match packing {
        Packing::Zip => written(std::fs::File::create(dir).and_then(|f| made.write_zip(f)))?,
        Packing::TarGz => written(std::fs::File::create(dir).and_then(|f| made.write_tar_gz(f)))?,
        Packing::Directory => made.write_directory(dir)?,
    }
    let manifest = &made.manifest;
    eprintln!(
        "wrote {name}: {} event(s) proven in the tree of {}{}, {} unproven (period not sealed yet); {}; check with: auditctl check-proof {name} --public-key {name}/{PUBLIC_KEY} --origin {log_origin}",
        manifest.events,
        manifest.tree_size,
        match &manifest.completeness {
            Some(c) => format!(", complete (leaves {} to {})", c.start, c.end),
            None => ", inclusion only".to_owned(),
        },
        manifest.unproven_events,
        archive.count()
    );
    Ok(())
}
