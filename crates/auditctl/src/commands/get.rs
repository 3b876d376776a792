//! Owns `auditctl get`: its flags and help, and wiring them to the library's reader. Must not
//! know how the table is read (`audit_trail::query`) or printed.

use audit_trail::access::Action;
use clap::Args;
use futures::StreamExt;

use crate::commands::words::TrailError;

use super::{Context, Failure, TableArgs, print_items};

/// The item(s) of one messageId (a Query on the table's key).
#[derive(Debug, Args)]
#[command(after_help = "\
Example:
  auditctl get order-42 --format jsonl

Environment: TABLE_NAME, ACCESS_QUEUE_URL, AWS_ENDPOINT_URL, AWS_PROFILE, AWS_REGION.")]
pub struct GetArgs {
    /// The item's messageId (a producer messageId, or the original SQS message id).
    message_id: String,
    #[command(flatten)]
    table: TableArgs,
}

/// `auditctl get`: the access recorded, then the items of one messageId printed; none is a
/// failure that says so (exit 1, nothing on stdout).
pub async fn run(args: GetArgs, context: &Context) -> Result<(), Failure> {
    context
        .access
        .record(Action::Get, &args.table.table, &args.table.table)
        .await?;
    let reader = context.reader(&args.table.table);
    let mut rows = std::pin::pin!(reader.get(&args.message_id).peekable());
    if rows.as_mut().peek().await.is_none() {
        return Err(Failure::Trail(TrailError::Worded(format!(
            "messageId {} not found in table {}: check the id (`auditctl query --from TIME --to TIME` lists the messageIds of a time), and TABLE_NAME or --table; an item older than the table's TTL is only in the archive",
            args.message_id, args.table.table
        ))));
    }
    print_items(rows, &args.table, &reader).await?;
    Ok(())
}
