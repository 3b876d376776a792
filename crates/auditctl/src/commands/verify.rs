//! Owns `auditctl verify`: its flags and help, wiring archive, trusted key and table to the walk,
//! and the exit it makes of the summary. Must not know how the trail is checked (audit_proof::verify).

use super::archive_flags::{ATTESTATIONS_NOT_CHECKED, ArchiveFlags};
use std::io::{BufWriter, IsTerminal};

use crate::commands::table::DynamoTable;
use audit_model::keys::DEFAULT_TABLE_NAME;
use audit_model::range::TimeRange;
use audit_proof::archive::S3Archive;
use audit_proof::tlog::witness_key_args;
use audit_proof::verify::key::TrustedKey;
use audit_proof::verify::kms::KmsKey;
use audit_proof::verify::ports::KeySource;
use audit_proof::verify::report::Console;
use audit_proof::verify::{ARCHIVE_LAG_SECONDS, Settings, walk};
use audit_trail::access::Action;
use audit_trail::filter::{Fields, Plan};
use clap::Args;

use super::{Context, Failure};

const VERIFY_HELP: &str = "\
Walks the digests of every period from the one holding --from to the one holding --to (both
included; times as for query) and checks:
  - the chain: every period's digest present (from the chain's first digest on: the first digest
    in the bucket the digest key signed; a key planted before it is reported, never the start),
    each linked to the previous period's (the one before the range too), none written over or
    deleted; a digest at an alternate name (p<start>-<n>.json) is followed where the next digest
    links to it;
  - each digest's signature, with the public key of DIGEST_KEY_ID fetched from KMS (never taken
    from next to the digest), and its fields (period, bucket, events);
  - each object it lists: that version's SHA-256, size and events (lines after gunzip), and no
    record (event, or tamper record) in two listed objects of the range;
  - that no listed object was overwritten (a newer version) or deleted (a delete marker), and that
    no other object sits in a sealed period's place or in the range's partitions (unless a later
    digest lists it as late: counted); each object a digest lists as unattested is reported;
  - every tamper record (a MODIFY, or a REMOVE not by TTL) of the range: the item was tampered
    with, even if it was restored since;
  - the transparency log, for the digests that carry its tree: each period's leaves (every line
    of its listed objects, in the digest's order) appended to the tree give the digest's size and
    root, and the tiles under log/tile/ hold them (leaf missing); each digest's checkpoint is
    there, signed by the digest key, with the digest's size and root, and extends the previous
    checkpoint of the range by a consistency proof made from the tiles (checkpoint inconsistent);
    with --witness-key, each checkpoint carries that witness's valid cosignature (cosignature
    missing). Digests sealed before the log began carry no tree: the summary says where it
    begins.
With --table it also compares the table with the archive: every archived event of the range's
periods is still in the table unchanged (unless expired by TTL), and every item with auditTime in
the range is among the archived events (looked for in the periods after its receivedAt, up to
--archive-lag later, then up to 24 hours and 15 minutes later: archived late, counted).
With the receiver's attestation key (ATTESTATION_KEY_ID or --attestation-key-id; its ARN is
printed with the verdict) every archived trail line of the range, and with --table every item of
the table in the range, must carry the receiver's attestation: one that does not (put in the
table behind the function, or changed) is `item not attested`, once per messageId, with why.
Without the key, attestations are not checked, and the summary says so.

Each problem is printed as it is found, one line each: KIND  KEY-OR-MESSAGE-ID  DETAIL, with KIND
one of: digest missing, chain broken, signature invalid, object changed, object missing, object
not in digest, object not attested, event duplicated, trail not sealed, item changed, item
modified, item missing, item not archived, item not attested, checkpoint inconsistent, leaf
missing, cosignature missing. A summary follows: the digest the chain is trusted
from and why, then what was checked. A period whose digest is absent less than --grace after it
could be sealed is \"not sealed yet\" (counted, not a problem); periods before the chain's first
digest are \"before the trail\": a problem (trail not sealed) when they hold objects or items, so
that a trail never sealed, or a wrong --bucket or --period-seconds, never passes.

Memory: one period's objects at a time (without --table); with --table also about 40 bytes per
archived event of the range (a 16-byte key in a set).

Examples:
  auditctl verify --from 2026-11-22T00:00:00Z --to 2026-11-22T23:59:59.999Z
  auditctl verify --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z --table
  auditctl verify --from 2026-11-22T10:00:00Z --to 2026-11-22T10:59:59Z | grep '^object'
  auditctl verify --from 2026-11-22T00:00:00Z --to 2026-11-22T23:59:59Z --witness-key witness.pub

Exit status: 0 when everything holds, 1 when anything does not (or cannot be read), 2 bad usage.

Its access is recorded first (see auditctl --help): the access queue is checked against the tag of
the table --table-name (TABLE_NAME), with or without --table.

Environment: ARCHIVE_BUCKET, DIGEST_KEY_ID, ATTESTATION_KEY_ID, DIGEST_PERIOD_SECONDS, TABLE_NAME
(--table-name),
ACCESS_QUEUE_URL, AWS_ENDPOINT_URL, AWS_PROFILE, AWS_REGION.";

/// Proves the trail unchanged: the chain of signed digests over the range, every object they
/// list, nothing overwritten, deleted or slipped in; with --table, the table against the
/// archive.
#[derive(Debug, Args)]
#[command(after_help = VERIFY_HELP)]
pub struct VerifyArgs {
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
    #[command(flatten)]
    archive: ArchiveFlags,
    /// Seconds after a period could be sealed (its end + 30 s) during which its absent digest is
    /// "not sealed yet" rather than missing [default: 600 + the period].
    #[arg(long, value_name = "SECONDS")]
    grace: Option<u32>,
    /// With --table: seconds after an item's receivedAt within which the archiver archives it
    /// (how far beyond --to, and after each item, the archive is read).
    #[arg(long, value_name = "SECONDS", default_value_t = ARCHIVE_LAG_SECONDS as u32)]
    archive_lag: u32,
    /// The audit table: compared with --table; its tag names the access queue either way.
    #[arg(long, env = "TABLE_NAME", value_name = "TABLE", default_value = DEFAULT_TABLE_NAME)]
    table_name: String,
    /// Object reads in flight at most.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=64))]
    concurrency: u16,
    /// A witness whose cosignature every checkpoint of the range must carry: its key
    /// (<name>+<key id>+<base64 key>, as `auditctl witness --init` prints it) or a file holding
    /// it. Repeatable.
    #[arg(long, value_name = "KEY")]
    witness_key: Vec<String>,
}

/// `auditctl verify`: its settings checked, its access recorded, the key fetched and checked, then
/// the walk, printing each problem as it is found and the summary last.
pub async fn run(args: VerifyArgs, context: &Context) -> Result<(), Failure> {
    let range = TimeRange::parse(&args.from, &args.to).map_err(Failure::usage)?;
    let witnesses = witness_key_args(&args.witness_key).map_err(Failure::usage)?;
    let length = args.archive.period;
    let bucket = args.archive.bucket()?;
    let key_id = args.archive.key_id()?;
    let time_plan = Plan::new(None, Fields::default()).map_err(Failure::usage)?;
    // The table's tag names the stack's access queue, with or without --table.
    context
        .access
        .record(Action::Verify, &bucket, &args.table_name)
        .await?;
    let (config, location) = (&context.config, &context.location);
    // The public key from KMS, never from next to a digest.
    let key = TrustedKey::new(
        KmsKey::new(config, key_id, location.clone())
            .public_key()
            .await?,
    )?;
    // The receiver's attestation key, when given: fetched once as the digest key is.
    let attestations = args.archive.attestation.fetch(context).await?;
    let archive = S3Archive::new(config, &bucket, location.clone());
    let table = if args.table {
        let reader = context.reader(&args.table_name);
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
        attestations,
    };
    let mut console = Console::new(
        BufWriter::new(std::io::stdout().lock()),
        std::io::stderr().is_terminal(),
    );
    let walked = walk::verify_with_witnesses(
        &archive,
        &key,
        table.as_ref(),
        &settings,
        witnesses,
        &mut console,
    )
    .await;
    console.clear();
    let mut summary = match walked {
        Ok(summary) => summary,
        // `auditctl verify | head`: what was printed stands, and so do its problems.
        Err(audit_proof::Error::Output(e))
            if e.kind() == std::io::ErrorKind::BrokenPipe && console.printed() > 0 =>
        {
            return Err(Failure::Problems);
        }
        Err(error) => return Err(error.into()),
    };
    if summary.attestations.is_none() {
        summary.attestations_unchecked = ATTESTATIONS_NOT_CHECKED.to_owned();
    }
    console.finish(&summary)?;
    if summary.holds() {
        Ok(())
    } else {
        Err(Failure::Problems)
    }
}
