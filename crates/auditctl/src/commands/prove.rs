//! Owns `auditctl prove` and `auditctl consistency`: their flags and help, the event's times read
//! from the table, the log's key from KMS, and printing the proof with what was read. Must not
//! know how the index is searched or a proof made (`audit_proof::prove`).

use std::io::Write;

use crate::commands::words::TrailError;
use audit_model::keys::DEFAULT_TABLE_NAME;
use audit_model::note::origin;
use audit_proof::archive::S3Archive;
use audit_proof::prove::{Counted, ProveError, Wanted};
use audit_proof::tlog::{LogKey, LogReader, witness_key_args};
use audit_proof::verify::key::TrustedKey;
use audit_proof::verify::kms::KmsKey;
use audit_proof::verify::ports::KeySource;
use audit_trail::access::Action;
use audit_trail::item::TrailItem;
use chrono::{DateTime, Utc};
use clap::Args;
use futures::TryStreamExt;

use super::archive_flags::{ArchiveFlags, LogFlags};
use super::{Context, Failure};

const PROVE_HELP: &str = "\
Prints a self-contained JSON proof that one event is in the transparency log: its line exactly as
archived, its leaf index, the tree size, the inclusion path (RFC 9162) and the checkpoint of that
size (signed by the digest key, with the witnesses' cosignatures). `auditctl check-proof` checks it
with no AWS access; so does the Python script of docs/operations.md \"Proving the trail\".

How the event is found without reading its period: its receivedAt is read from the table; the
archive object holding it was written in the digest period of receivedAt (less 60 s of clock skew)
or a later one, up to 24 h 15 min later (a stream retried to its end). For each of those periods
in order it reads the period's index (log/index/p<start>.tsv.gz: messageId, auditTime, leaf index,
object, line) until the event's row; then that one archive object (the line, its leaf hash), the
checkpoint and the few tiles the path needs. It stops at the first period not sealed yet, naming the
event's period (that of its receivedAt) and the time by which the archiver seals it. An event no longer in the table (expired) is found from --audit-time.

The tree size: --tree-size, else the largest that a --witness-key witness has cosigned (its own
cosignature, verified with that key), else the newest checkpoint. The proof is checked (signature, path, line) before it is printed. What was read
(objects, bytes, listings) is said on stderr.

Examples:
  auditctl prove order-42 > order-42.proof.json
  auditctl prove order-42 --audit-time 2026-11-22T10:00:00Z --out order-42.proof.json

Exit status: 0 printed, 1 failure (the message names the fix), 2 bad usage.

Its access is recorded first (action auditctl.prove; see auditctl --help).

Environment: TABLE_NAME, ARCHIVE_BUCKET, DIGEST_KEY_ID, DIGEST_PERIOD_SECONDS, ACCESS_QUEUE_URL,
AWS_ENDPOINT_URL, AWS_PROFILE, AWS_REGION.";

/// The log's key: the digest key's public key from KMS (never from the bucket), checked, and its
/// ARN (`key_id` resolved once: an alias is printed as the key it named) and DER.
pub(crate) async fn log_key(
    context: &Context,
    key_id: String,
) -> Result<(LogKey, String, Vec<u8>), Failure> {
    let info = KmsKey::new(&context.config, key_id, context.location.clone())
        .public_key()
        .await?;
    let der = info.der.clone();
    let arn = info.arn.clone();
    TrustedKey::new(info)?;
    let key = LogKey::from_der(&der).map_err(|detail| {
        Failure::Trail(TrailError::KeyUnsuitable {
            key: arn.clone(),
            detail: detail.to_string(),
        })
    })?;
    Ok((key, arn, der))
}

/// The archive bucket, its reads counted.
pub(crate) fn archive(
    context: &Context,
    bucket: &str,
) -> S3Archive<Counted<audit_aws::s3::S3Bucket>> {
    let client = audit_aws::config::s3(
        &context.config,
        audit_aws::config::ClientOptions::AS_CONFIGURED,
    );
    S3Archive::over(
        Counted::new(audit_aws::s3::S3Bucket::new(client, bucket.to_owned())),
        bucket,
        context.location.clone(),
    )
}

/// Proves one event: prints its JSON inclusion proof (checked before it is printed).
#[derive(Debug, Args)]
#[command(after_help = PROVE_HELP)]
pub struct ProveArgs {
    /// The event's messageId.
    message_id: String,
    /// The event's auditTime (RFC 3339): which item when the messageId has several; where to
    /// look when the item is no longer in the table.
    #[arg(long, value_name = "TIME")]
    audit_time: Option<String>,
    /// The tree size to prove it in (a size with a checkpoint) [default: the largest cosigned by
    /// a --witness-key witness, else the newest].
    #[arg(long, value_name = "N")]
    tree_size: Option<u64>,
    /// A witness whose cosignature chooses the tree size: its key (<name>+<key id>+<base64 key>,
    /// as `auditctl witness --init` prints it) or a file holding it. Repeatable.
    #[arg(long, value_name = "KEY")]
    witness_key: Vec<String>,
    /// Write the proof to FILE rather than to stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<std::path::PathBuf>,
    /// The audit table (the event's receivedAt; its tag names the access queue).
    #[arg(long, env = "TABLE_NAME", value_name = "TABLE", default_value = DEFAULT_TABLE_NAME)]
    table: String,
    #[command(flatten)]
    archive: ArchiveFlags,
}

fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text.trim())
        .ok()
        .map(|t| t.to_utc())
}

/// The event's auditTime and the time its search starts from (receivedAt, else the auditTime).
fn choose(
    message_id: &str,
    table: &str,
    items: &[TrailItem],
    given: Option<(&str, DateTime<Utc>)>,
) -> Result<(String, DateTime<Utc>), ProveError> {
    let times = || {
        items
            .iter()
            .map(|i| i.audit_time.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let item = match given {
        Some((text, at)) => match items.iter().find(|i| parse_time(&i.audit_time) == Some(at)) {
            Some(item) => item,
            None if items.is_empty() => return Ok((text.to_owned(), at)),
            None => {
                return Err(ProveError::NoSuchTime {
                    message_id: message_id.to_owned(),
                    wanted: text.to_owned(),
                    times: times(),
                });
            }
        },
        None => match items {
            [] => {
                return Err(ProveError::NotInTable {
                    message_id: message_id.to_owned(),
                    table: table.to_owned(),
                });
            }
            [item] => item,
            _ => {
                return Err(ProveError::Ambiguous {
                    message_id: message_id.to_owned(),
                    count: items.len(),
                    times: times(),
                });
            }
        },
    };
    let anchor = parse_time(&item.text("receivedAt"))
        .or_else(|| parse_time(&item.audit_time))
        .unwrap_or_else(Utc::now);
    Ok((item.audit_time.clone(), anchor))
}

/// `auditctl prove`: the access recorded, the item's times read, the indexes searched, the proof
/// made, checked and printed; what was read on stderr.
pub async fn run(args: ProveArgs, context: &Context) -> Result<(), Failure> {
    let given = match &args.audit_time {
        Some(text) => Some((
            text.as_str(),
            parse_time(text).ok_or_else(|| {
                Failure::usage(format!(
                    "--audit-time {text:?} is not an RFC 3339 time with an offset, e.g. 2026-11-22T10:00:00Z"
                ))
            })?,
        )),
        None => None,
    };
    let witnesses = witness_key_args(&args.witness_key).map_err(Failure::usage)?;
    let bucket = args.archive.bucket()?;
    let key_id = args.archive.key_id()?;
    context
        .access
        .record(Action::Prove, &bucket, &args.table)
        .await?;
    let reader = context.reader(&args.table);
    let items: Vec<TrailItem> = reader.get(&args.message_id).try_collect().await?;
    // Several items and no --audit-time, or none at the one given: the caller must say which.
    let (audit_time, anchor) =
        choose(&args.message_id, &args.table, &items, given).map_err(|e| match e {
            ProveError::Ambiguous { .. } | ProveError::NoSuchTime { .. } => {
                Failure::usage(TrailError::Prove(e))
            }
            other => Failure::Trail(other.into()),
        })?;
    let length = args.archive.period;
    let wanted = Wanted::around(args.message_id.clone(), audit_time, anchor, length);
    let (key, arn, _) = log_key(context, key_id).await?;
    let archive = archive(context, &bucket);
    let log = LogReader { archive: &archive };
    let found = log.locate(&wanted, Utc::now().timestamp()).await?;
    let proof = log
        .prove(&found, &key, &origin(&bucket), &witnesses, args.tree_size)
        .await?;
    let mut text = serde_json::to_string_pretty(&proof)
        .map_err(|e| TrailError::Output(std::io::Error::other(e)))?;
    text.push('\n');
    match &args.out {
        Some(path) => std::fs::write(path, &text).map_err(|e| {
            Failure::usage(format!("cannot write the proof to {}: {e}", path.display()))
        })?,
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
    }
    eprintln!(
        "proved messageId {}: leaf {} of the tree of {} (object {} line {}, found in the index of the {} period(s) searched); {}; the checkpoint signed by the digest key {arn}",
        proof.message_id,
        proof.leaf_index,
        proof.tree_size,
        proof.object,
        proof.line_number,
        found.searched,
        archive.count()
    );
    Ok(())
}

const CONSISTENCY_HELP: &str = "\
Prints the RFC 9162 consistency proof that the tree of --old-size leaves is a prefix of the tree of
--new-size leaves (default: the newest checkpoint), as JSON: oldSize, newSize, oldRoot and newRoot
(hex), proof (hex hashes), checkpoint (the signed note of newSize, with its cosignatures) and
oldCheckpoint (the one of oldSize, when there is one; else null). It reads the checkpoint of
newSize (its signature checked with the public key of DIGEST_KEY_ID from KMS) and only the tiles
the proof and both roots need, and checks the proof before printing it. When a checkpoint of
oldSize exists, its root must be the old root the tiles give: else `checkpoint inconsistent`
(exit 1), the log signed two histories.

It reads hashes only, no event: its access is not recorded.

Example:
  auditctl consistency --old-size 1000 > consistency.json

Exit status: 0 printed, 1 failure or inconsistency, 2 bad usage.

Environment: ARCHIVE_BUCKET, DIGEST_KEY_ID, AWS_ENDPOINT_URL, AWS_PROFILE, AWS_REGION.";

/// Proves that a newer tree extends an older one (RFC 9162 consistency proof).
#[derive(Debug, Args)]
#[command(after_help = CONSISTENCY_HELP)]
pub struct ConsistencyArgs {
    /// The older tree's size.
    #[arg(long, value_name = "M")]
    old_size: u64,
    /// The newer tree's size (a size with a checkpoint) [default: the newest checkpoint].
    #[arg(long, value_name = "N")]
    new_size: Option<u64>,
    #[command(flatten)]
    log: LogFlags,
}

/// `auditctl consistency`: the proof made from the tiles, checked, printed.
pub async fn run_consistency(args: ConsistencyArgs, context: &Context) -> Result<(), Failure> {
    if let Some(new) = args.new_size
        && args.old_size > new
    {
        return Err(Failure::usage(TrailError::Prove(
            ProveError::SizesOutOfOrder {
                old: args.old_size,
                new,
            },
        )));
    }
    let bucket = args.log.bucket()?;
    let (key, arn, _) = log_key(context, args.log.key_id()?).await?;
    let archive = archive(context, &bucket);
    let log = LogReader { archive: &archive };
    let proof = log
        .consistency(args.old_size, args.new_size, &key, &origin(&bucket))
        .await?;
    let mut text = serde_json::to_string_pretty(&proof)
        .map_err(|e| TrailError::Output(std::io::Error::other(e)))?;
    text.push('\n');
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    eprintln!(
        "the tree of {} extends the tree of {}; {}; the checkpoint signed by the digest key {arn}",
        proof.new_size,
        proof.old_size,
        archive.count()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;

    fn item(time: &str, received: &str) -> TrailItem {
        TrailItem::from(std::collections::HashMap::from([
            ("messageId".to_owned(), AttributeValue::S("m".to_owned())),
            ("auditTime".to_owned(), AttributeValue::S(time.to_owned())),
            (
                "receivedAt".to_owned(),
                AttributeValue::S(received.to_owned()),
            ),
        ]))
    }

    #[test]
    fn the_search_starts_from_receivedat_or_the_given_audit_time() {
        let a = item("2026-11-22T10:00:00.000Z", "2026-11-22T10:00:05.000Z");
        let b = item("2026-11-22T11:00:00.000Z", "2026-11-22T11:00:07.000Z");
        let (time, anchor) = choose("m", "T", std::slice::from_ref(&a), None).unwrap();
        assert_eq!(time, "2026-11-22T10:00:00.000Z");
        assert_eq!(anchor, parse_time("2026-11-22T10:00:05Z").unwrap());
        let both = [a.clone(), b.clone()];
        assert!(matches!(
            choose("m", "T", &both, None),
            Err(ProveError::Ambiguous { count: 2, .. })
        ));
        let given = parse_time("2026-11-22T12:00:00+01:00").unwrap();
        let (time, anchor) =
            choose("m", "T", &both, Some(("2026-11-22T12:00:00+01:00", given))).unwrap();
        assert_eq!(time, "2026-11-22T11:00:00.000Z");
        assert_eq!(anchor, parse_time("2026-11-22T11:00:07Z").unwrap());
        let other = parse_time("2026-11-22T12:00:00Z").unwrap();
        assert!(matches!(
            choose("m", "T", &both, Some(("2026-11-22T12:00:00Z", other))),
            Err(ProveError::NoSuchTime { .. })
        ));
        // Expired: the given time is the start.
        assert_eq!(
            choose("m", "T", &[], Some(("2026-11-22T12:00:00Z", other))).unwrap(),
            ("2026-11-22T12:00:00Z".to_owned(), other)
        );
        let error = choose("m", "T", &[], None).unwrap_err();
        assert!(matches!(error, ProveError::NotInTable { .. }), "{error}");
        let words = TrailError::Prove(error).to_string();
        assert!(words.contains("--audit-time"), "{words}");
    }
}
