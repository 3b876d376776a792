//! Owns what every command shares: the AWS and audit flags, the context a command runs in (the
//! SDK configuration, the access recorder, where requests go), the failure and its exit, and
//! printing rows. Must not know any one command's flags or logic (each is a module here).

pub mod archive;
pub mod archive_flags;
pub mod arguments;
pub mod check_proof;
pub mod choices;
pub mod dlq;
pub mod get;
pub mod prove;
pub mod query;
pub mod repair;
pub mod table;
pub mod ui;
pub mod verify;
pub mod witness;
pub mod words;

use std::io::{BufWriter, IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::commands::choices::Format;
use crate::commands::words::TrailError;
use audit_aws::config::CliOptions;
use audit_model::keys::DEFAULT_TABLE_NAME;
use audit_trail::Reader;
use audit_trail::access::{AccessError, Recorder, SdkAccessLog};
use audit_trail::output::{Printer, Record};
use clap::Args;
use futures::{Stream, StreamExt};

/// Where a command records its own access (access.rs).
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The access queue (stack output AuditAccessQueueUrl): each command's own access event goes
    /// there, once the stack's table (TABLE_NAME) names it in its tag audit:access-queue-arn.
    #[arg(long, global = true, env = "ACCESS_QUEUE_URL")]
    pub access_queue_url: Option<String>,
    /// Do not record this access to the trail (said on stderr).
    #[arg(long, global = true)]
    pub no_audit_event: bool,
}

#[derive(Debug, Args)]
pub struct AwsArgs {
    /// The AWS profile (default: the standard chain: AWS_PROFILE, environment, SSO, instance role).
    #[arg(long, global = true, env = "AWS_PROFILE")]
    pub profile: Option<String>,
    /// The AWS region (default: the profile's, or AWS_REGION).
    #[arg(long, global = true, env = "AWS_REGION")]
    pub region: Option<String>,
    /// A local AWS endpoint, e.g. http://127.0.0.1:5000 for moto.
    #[arg(long, global = true, env = "AWS_ENDPOINT_URL")]
    pub endpoint_url: Option<String>,
}

impl AwsArgs {
    /// The flags over the SDK's standard chain (`audit_aws::config::cli`).
    pub fn options(&self) -> CliOptions {
        CliOptions {
            profile: self.profile.clone(),
            region: self.region.clone(),
            endpoint_url: self.endpoint_url.clone(),
        }
    }
}

/// The table a reading command reads, and how it prints (query, get).
#[derive(Debug, Args)]
pub struct TableArgs {
    /// The audit table.
    #[arg(long, env = "TABLE_NAME", default_value = DEFAULT_TABLE_NAME)]
    pub table: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// What a command runs with: built once by main from the global flags.
pub struct Context {
    pub config: aws_config::SdkConfig,
    /// Each command that reads the trail or moves dead letters records that first (after its
    /// arguments are checked, before any read): `context.access.record(...)`, with the stack's
    /// table, whose tag names the access queue.
    pub access: Recorder<SdkAccessLog>,
    /// Where requests go (endpoint or region), for error messages.
    pub location: String,
}

impl Context {
    /// The audit table `table`, read through DynamoDB.
    pub fn reader(&self, table: &str) -> Reader {
        Reader::new(
            audit_aws::config::dynamodb(&self.config),
            table,
            self.location.clone(),
        )
    }
}

/// A failure: usage (exit 2) or anything else (exit 1).
pub enum Failure {
    Usage(String),
    Trail(TrailError),
    /// `verify` found problems (printed): exit 1 with nothing more to say.
    Problems,
}

impl Failure {
    /// Bad usage found after parsing (exit 2), in the words of `error`.
    pub fn usage(error: impl std::fmt::Display) -> Self {
        Self::Usage(error.to_string())
    }
}

impl From<TrailError> for Failure {
    fn from(error: TrailError) -> Self {
        Self::Trail(error)
    }
}

/// The proof library's errors, in auditctl's words (words.rs).
impl From<audit_proof::Error> for Failure {
    fn from(error: audit_proof::Error) -> Self {
        Self::Trail(error.into())
    }
}

/// The trail library's errors, in auditctl's words (words.rs).
impl From<audit_trail::Error> for Failure {
    fn from(error: audit_trail::Error) -> Self {
        Self::Trail(error.into())
    }
}

/// An access that cannot be recorded: no access queue at all is bad usage (exit 2), any other
/// failure to record exits 1. Either way nothing was read.
impl From<AccessError> for Failure {
    fn from(error: AccessError) -> Self {
        match error {
            AccessError::NotConfigured => Self::usage(error),
            error => Self::Trail(TrailError::Access(error)),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        Self::Trail(TrailError::Output(error))
    }
}

/// Prints rows as they arrive: flushed at least every 100 ms, with a progress line on stderr
/// when stderr is a terminal. Returns the rows printed.
pub async fn print_items<R: Record>(
    rows: impl Stream<Item = Result<R, audit_trail::Error>>,
    format: Format,
    reader: &Reader,
) -> Result<u64, Failure> {
    let mut printer = Printer::new(format.into(), BufWriter::new(std::io::stdout().lock()));
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
