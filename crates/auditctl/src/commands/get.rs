//! Owns `auditctl get`: its flags and help, wiring them to the library's reader, and each item's
//! attestation (whether the receiver wrote it, docs/archive.md "Items attested at birth") shown
//! beside it in every format. Must not know how the table is read (`audit_trail::query`) or
//! printed.

use audit_proof::verify::attest::Attestations;
use audit_trail::access::Action;
use audit_trail::item::{ITEM_COLUMNS, TrailItem};
use audit_trail::output::{Column, Record};
use clap::Args;
use futures::StreamExt;
use serde_json::Value;

use crate::commands::words::TrailError;

use super::archive_flags::{ATTESTATIONS_NOT_CHECKED, AttestationKeyFlag};
use super::{Context, Failure, TableArgs, print_items};

/// The item(s) of one messageId (a Query on the table's key).
#[derive(Debug, Args)]
#[command(after_help = "\
Each item says whether the receiver attested it (column and JSON field `attested`): `yes`, `NOT
ATTESTED: <why>` (put in the table behind the function, or changed since), or `not checked` when
no attestation key is given (ATTESTATION_KEY_ID or --attestation-key-id; stack output
AuditAttestationKeyArn).

Example:
  auditctl get order-42 --format jsonl

Environment: TABLE_NAME, ATTESTATION_KEY_ID, ACCESS_QUEUE_URL, AWS_ENDPOINT_URL, AWS_PROFILE,
AWS_REGION.")]
pub struct GetArgs {
    /// The item's messageId (a producer messageId, or the original SQS message id).
    message_id: String,
    #[command(flatten)]
    table: TableArgs,
    #[command(flatten)]
    attestation: AttestationKeyFlag,
}

/// `auditctl get`: the access recorded, the attestation key fetched (when given), then the items
/// of one messageId printed, each with its attestation's verdict; none is a failure that says so
/// (exit 1, nothing on stdout).
pub async fn run(args: GetArgs, context: &Context) -> Result<(), Failure> {
    context
        .access
        .record(Action::Get, &args.table.table, &args.table.table)
        .await?;
    let attestations = args.attestation.fetch(context).await?;
    if attestations.is_none() {
        eprintln!("auditctl get: {ATTESTATIONS_NOT_CHECKED}");
    }
    let reader = context.reader(&args.table.table);
    let mut rows = std::pin::pin!(reader.get(&args.message_id).peekable());
    if rows.as_mut().peek().await.is_none() {
        return Err(Failure::Trail(TrailError::Worded(format!(
            "messageId {} not found in table {}: check the id (`auditctl query --from TIME --to TIME` lists the messageIds of a time), and TABLE_NAME or --table; an item older than the table's TTL is only in the archive",
            args.message_id, args.table.table
        ))));
    }
    let rows = rows.map(move |row| {
        row.map(|item| {
            let attested = verdict(&item, attestations.as_deref());
            Attested { item, attested }
        })
    });
    print_items(rows, &args.table, &reader).await?;
    Ok(())
}

/// An item and whether the receiver attested it, printed as one row.
pub struct Attested {
    item: TrailItem,
    attested: String,
}

/// `yes`, `NOT ATTESTED: <why>`, or `not checked` (no key).
fn verdict(item: &TrailItem, attestations: Option<&Attestations>) -> String {
    let Some(attestations) = attestations else {
        return "not checked".to_owned();
    };
    match attestations.check_line(item.line().as_bytes()) {
        None => "yes".to_owned(),
        Some(unattested) => format!("NOT ATTESTED: {}", unattested.why),
    }
}

/// The item's columns, then `attested`.
const COLUMNS: [Column; ITEM_COLUMNS.len() + 1] = {
    let mut columns = [Column {
        name: "attested",
        table_width: Some(40),
    }; ITEM_COLUMNS.len() + 1];
    let mut i = 0;
    while i < ITEM_COLUMNS.len() {
        columns[i] = ITEM_COLUMNS[i];
        i += 1;
    }
    columns
};

impl Record for Attested {
    const COLUMNS: &'static [Column] = &COLUMNS;
    const DROP_FIRST: &'static [&'static str] = TrailItem::DROP_FIRST;

    fn json(&self) -> Value {
        let mut json = self.item.json();
        if let Value::Object(map) = &mut json {
            map.insert("attested".into(), Value::String(self.attested.clone()));
        }
        json
    }

    /// The item's own line (its numbers' exact digits) with `attested` last.
    fn line(&self) -> String {
        let line = self.item.line();
        let attested = Value::String(self.attested.clone());
        match line.strip_suffix('}') {
            Some(open) if open.len() > 1 => format!("{open},\"attested\":{attested}}}"),
            _ => format!("{{\"attested\":{attested}}}"),
        }
    }

    fn cells(&self) -> Vec<String> {
        let mut cells = self.item.cells();
        cells.push(self.attested.clone());
        cells
    }
}
