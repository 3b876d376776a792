//! Owns what every command shares: the AWS and audit flags, the context a command runs in (the
//! SDK configuration, the access recorder, where requests go), the failure and its exit, and
//! printing rows. Must not know any one command's flags or logic (each is a module here).

pub mod archive;
pub mod archive_flags;
pub mod arguments;
pub mod check_proof;
pub mod choices;
pub mod dlq;
pub mod export;
pub mod get;
pub mod key;
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
use audit_proof::evidence::bundle::BundleError;
use audit_trail::Reader;
use audit_trail::access::{
    AccessError, FailedRead, FailureNotSent, ReadFailure, Recorder, SdkAccessLog,
};
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
    /// Every column of the table, however wide (without it the table fits the terminal, or
    /// COLUMNS, leaving the senders, the address, extra, then what and who out first).
    #[arg(long)]
    pub wide: bool,
}

/// The width to fit the table to: COLUMNS when set, else the terminal's that stdout is; `None`
/// for a pipe or a file (every column).
fn terminal_width() -> Option<usize> {
    if let Some(columns) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c > 0)
    {
        return Some(columns);
    }
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ on stdout writes one `winsize`, which `size` is, and nothing else.
    let asked = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (asked == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// What a command runs with: built once by main from the global flags.
pub struct Context {
    pub config: aws_config::SdkConfig,
    /// Each command that reads the trail or moves dead letters records that first (after its
    /// arguments are checked, before any read): `context.access.record(...)`, with the stack's
    /// table, whose tag names the access queue. Should the command fail after it, main sends the
    /// failure event (`Recorder::outcome`).
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

/// What a command's failure event says of it (`Recorder::outcome`): its kind and its words.
/// `verify` finding problems read everything, and a reader closing the output (`| head`) is not
/// a failed read: neither sends one.
impl FailedRead for Failure {
    fn failure(&self) -> Option<ReadFailure> {
        match self {
            Self::Usage(message) => Some(ReadFailure {
                kind: "usage".into(),
                text: message.clone(),
            }),
            Self::Trail(TrailError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                None
            }
            Self::Trail(error) => Some(ReadFailure {
                kind: error.kind().into(),
                text: error.to_string(),
            }),
            Self::Problems => None,
        }
    }

    fn unrecorded(self, why: FailureNotSent) -> Self {
        match self {
            Self::Usage(message) => Self::Usage(format!("{message}\nnote: {why}")),
            Self::Trail(error) => Self::Trail(TrailError::Unrecorded {
                error: Box::new(error),
                why,
            }),
            Self::Problems => Self::Problems,
        }
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

/// A bundle that cannot be made or written, in auditctl's words: a file that cannot be written
/// is bad usage (exit 2), as a place that is taken.
impl From<BundleError> for Failure {
    fn from(error: BundleError) -> Self {
        match error {
            BundleError::Read(error) => error.into(),
            BundleError::Json { source, .. } => std::io::Error::other(source).into(),
            error @ BundleError::Write { .. } => Failure::usage(error.to_string()),
        }
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

/// Prints rows as they arrive (the table fitted to the terminal unless --wide): flushed at least
/// every 100 ms, with a progress line on stderr when stderr is a terminal, every 200 ms whether
/// rows arrive or not (a long stretch without events is read with no row to show). Returns the
/// rows printed.
pub async fn print_items<R: Record, E: Into<Failure>>(
    rows: impl Stream<Item = Result<R, E>>,
    table: &TableArgs,
    reader: &Reader,
) -> Result<u64, Failure> {
    let format = table.format;
    let mut printer = Printer::new(format.into(), BufWriter::new(std::io::stdout().lock()));
    if format == Format::Table
        && !table.wide
        && let Some(width) = terminal_width()
    {
        let left_out = printer.fit(width);
        if !left_out.is_empty() {
            eprintln!(
                "columns left out to fit {width} characters: {}; --wide shows them, --format jsonl or csv every field",
                left_out.join(", ")
            );
        }
    }
    let progress = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut last = Instant::now();
    let mut shown_progress = false;
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut rows = std::pin::pin!(rows);
    loop {
        let row = tokio::select! {
            row = rows.next() => row,
            _ = tick.tick(), if progress => {
                if started.elapsed() >= Duration::from_millis(200) {
                    eprint!(
                        "\r{} rows, {} requests, {:.1} s ",
                        printer.rows(),
                        reader.stats.requests(),
                        started.elapsed().as_secs_f64()
                    );
                    let _ = std::io::stderr().flush();
                    shown_progress = true;
                }
                continue;
            }
        };
        // The progress line is cleared before a row is printed: on one terminal, the rows
        // start at the line's beginning.
        if shown_progress {
            eprint!("\r\x1b[K");
            let _ = std::io::stderr().flush();
            shown_progress = false;
        }
        let Some(row) = row else { break };
        printer.print(&row.map_err(Into::into)?)?;
        if last.elapsed() >= Duration::from_millis(100) {
            printer.flush()?;
            last = Instant::now();
        }
    }
    printer.finish()?;
    Ok(printer.rows())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_after_the_read_names_its_kind_and_words_and_problems_or_a_closed_pipe_none() {
        let missing = Failure::Trail(TrailError::TableNotFound {
            table: "T".into(),
            at: "region eu-west-1".into(),
        });
        assert_eq!(
            missing.failure(),
            Some(ReadFailure {
                kind: "table_not_found".into(),
                text: "table T not found at region eu-west-1: set TABLE_NAME or --table, or deploy the stack".into(),
            })
        );
        let denied = Failure::Trail(TrailError::Worded(
            words::cause_and_fix("AccessDenied: no", "region eu-west-1").unwrap(),
        ));
        assert_eq!(denied.failure().unwrap().kind, "denied");
        assert_eq!(Failure::usage("two items").failure().unwrap().kind, "usage");
        assert_eq!(Failure::Problems.failure(), None);
        let closed = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert_eq!(Failure::from(closed).failure(), None);
    }

    #[test]
    fn a_failure_record_not_sent_is_said_after_the_commands_own_error() {
        let why = FailureNotSent {
            first: "auditctl-1".into(),
            why: "access queue q not found".into(),
        };
        let Failure::Trail(error) =
            Failure::Trail(TrailError::Worded("it failed".into())).unrecorded(why.clone())
        else {
            panic!("still the command's failure")
        };
        assert_eq!(
            error.to_string(),
            "it failed\nnote: the failure record of this read was not sent, so the trail holds only its access event auditctl-1 (outcome success): access queue q not found"
        );
        assert_eq!(error.kind(), "failed");
        let Failure::Usage(message) = Failure::usage("bad").unrecorded(why) else {
            panic!("still a usage error")
        };
        assert!(
            message.starts_with("bad\nnote: the failure record"),
            "{message}"
        );
    }
}
