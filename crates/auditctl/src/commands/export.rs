//! Owns `auditctl export --evidence`: its flags and help, the filters as a test on an archived
//! line, the access recorded, the log's key from KMS, and writing the bundle's files. Must not
//! know how the bundle's contents are found or proven (`audit_proof::evidence`) nor checked.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use audit_model::evidence::{
    CHECKPOINT, EVENTS, EVIDENCE_FORMAT, MANIFEST, Manifest, PROOFS, PUBLIC_KEY, Query, UNPROVEN,
};
use audit_model::keys::DEFAULT_TABLE_NAME;
use audit_model::message::EventOutcome;
use audit_model::note::origin;
use audit_model::range::TimeRange;
use audit_proof::evidence::Ask;
use audit_proof::tlog::{LogReader, witness_key_args};
use audit_trail::access::Action;
use audit_trail::filter;
use chrono::{DateTime, SecondsFormat, Utc};
use clap::Args;
use serde_json::{Map, Value};

use super::archive_flags::ArchiveFlags;
use super::key::pem;
use super::prove::{archive, log_key};
use super::{Context, Failure};
use crate::commands::words::TrailError;

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
    fn filters(&self) -> Vec<(&'static str, String)> {
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

/// Whether the archived line has each filter's field equal to its value (an IP in its
/// canonical form).
fn matches(line: &Value, filters: &[(&str, String)]) -> bool {
    filters.iter().all(|(name, want)| {
        let got = line.get(*name).and_then(Value::as_str);
        match (*name, got) {
            ("sourceIp", Some(got)) => got
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.to_string() == *want),
            (_, got) => got == Some(want.as_str()),
        }
    })
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    std::fs::write(path, bytes)
        .map_err(|e| Failure::usage(format!("cannot write {}: {e}", path.display())))
}

/// How the bundle is written, by PATH's ending: a .tar.gz, a .zip, or a directory.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Packing {
    TarGz,
    Zip,
    Directory,
}

fn packing(path: &Path) -> Packing {
    let name = path.to_string_lossy();
    if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        Packing::TarGz
    } else if name.ends_with(".zip") {
        Packing::Zip
    } else {
        Packing::Directory
    }
}

/// The bundle's files as one zip archive (deflate), each at its name (no directory above them).
fn write_zip(path: &Path, files: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    use std::io::Write;
    let file = std::fs::File::create(path)?;
    let mut zip = zip::ZipWriter::new(file);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o644);
    for (name, bytes) in files {
        zip.start_file(name.as_str(), options)
            .map_err(std::io::Error::other)?;
        zip.write_all(bytes)?;
    }
    zip.finish().map_err(std::io::Error::other)?.sync_all()
}

/// The bundle's files as one gzip'd tar, each at its name (no directory above them).
fn write_tar_gz(path: &Path, files: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    let file = std::fs::File::create(path)?;
    let gzip = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gzip);
    for (name, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(Utc::now().timestamp().max(0) as u64);
        header.set_cksum();
        tar.append_data(&mut header, name, bytes.as_slice())?;
    }
    tar.into_inner()?.finish()?.sync_all()
}

fn jsonl<T: AsRef<str>>(lines: &[T]) -> String {
    lines.iter().fold(String::new(), |mut text, line| {
        text.push_str(line.as_ref());
        text.push('\n');
        text
    })
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
    let keep = |line: &Value| matches(line, &filters);
    let length = args.archive.period;
    let log_origin = origin(&bucket);
    let ask = Ask {
        first: length.period_of(from),
        last: length.period_of(to),
        keep: &keep,
        filtered: !filters.is_empty(),
        key: &key,
        origin: &log_origin,
        witnesses: &witnesses,
        tree_size: args.tree_size,
        now: Utc::now().timestamp(),
    };
    let evidence = log.evidence(&ask).await?;
    let proofs = evidence
        .proofs
        .iter()
        .map(serde_json::to_string)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TrailError::Output(std::io::Error::other(e)))?;
    let mut files: Vec<(String, Vec<u8>)> = vec![
        (EVENTS.to_owned(), jsonl(&evidence.events).into_bytes()),
        (PROOFS.to_owned(), jsonl(&proofs).into_bytes()),
        (
            UNPROVEN.to_owned(),
            jsonl(&evidence.unproven_lines).into_bytes(),
        ),
        (
            CHECKPOINT.to_owned(),
            evidence.checkpoint.clone().into_bytes(),
        ),
        (PUBLIC_KEY.to_owned(), pem(&der).into_bytes()),
    ];
    for (file, text) in &evidence.checkpoints {
        files.push((file.clone(), text.clone().into_bytes()));
    }
    let manifest = Manifest {
        format: EVIDENCE_FORMAT.to_owned(),
        made_at: Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
        made_by,
        origin: log_origin.clone(),
        key_arn: arn.clone(),
        query: Query {
            from: range.from.clone(),
            to: range.to.clone(),
            filters: filters
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Value::String(v.clone())))
                .collect::<Map<_, _>>(),
            period_seconds: length.seconds(),
        },
        periods: evidence.periods,
        events: evidence.events.len() as u64,
        unproven_events: evidence.unproven.len() as u64,
        tree_size: evidence.tree_size,
        proven: evidence.proven,
        not_proven: evidence.not_proven,
        completeness: evidence.completeness.clone(),
        unproven: evidence.unproven,
    };
    let mut text = serde_json::to_string_pretty(&manifest)
        .map_err(|e| TrailError::Output(std::io::Error::other(e)))?;
    text.push('\n');
    files.push((MANIFEST.to_owned(), text.into_bytes()));
    if packed {
        match packing {
            Packing::Zip => write_zip(dir, &files),
            _ => write_tar_gz(dir, &files),
        }
        .map_err(|e| Failure::usage(format!("cannot write {}: {e}", dir.display())))?;
    } else {
        for (file, bytes) in &files {
            let path = dir.join(file);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| {
                    Failure::usage(format!("cannot make {}: {e}", parent.display()))
                })?;
            }
            write(&path, bytes)?;
        }
    }
    eprintln!(
        "wrote {name}: {} event(s) proven in the tree of {}{}, {} unproven (period not sealed yet); {}; check with: auditctl check-proof {name} --public-key {name}/{PUBLIC_KEY} --origin {log_origin}",
        manifest.events,
        manifest.tree_size,
        match &evidence.completeness {
            Some(c) => format!(", complete (leaves {} to {})", c.start, c.end),
            None => ", inclusion only".to_owned(),
        },
        manifest.unproven_events,
        archive.count()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_keeps_lines_whose_field_is_the_value() {
        let line: Value = serde_json::json!({"actor": "alice", "sourceIp": "2001:DB8::1"});
        assert!(matches(&line, &[]));
        assert!(matches(&line, &[("actor", "alice".to_owned())]));
        assert!(!matches(&line, &[("actor", "bob".to_owned())]));
        assert!(matches(&line, &[("sourceIp", "2001:db8::1".to_owned())]));
        assert!(!matches(&line, &[("action", "x".to_owned())]));
    }
}
