//! auditctl, the operator's command line: reads the audit trail in time order, works the
//! dead-letter queue and proves the trail unchanged. Parses the arguments and wires them: the
//! SDK configuration, the access recorder, one command (`commands/`), the exit status.

mod commands;

use std::process::ExitCode;

use crate::commands::words::TrailError;
use audit_trail::access::{Recorder, SdkAccessLog};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use commands::{
    AuditArgs, AwsArgs, Context, Failure, archive, check_proof, dlq, export, get, key, prove,
    query, ui, verify, witness,
};

const AFTER_HELP: &str = "\
Environment (a flag wins over its variable):
  TABLE_NAME              the audit table (--table; --table-name for verify): the stack's table,
                          whose tags name the access queue and the receiver's role
  ACCESS_QUEUE_URL        the access queue, where each command records its own access
                          (--access-queue-url; stack output AuditAccessQueueUrl)
  AUDIT_QUEUE_URL         the audit queue, the target of dlq redrive (--queue-url; stack output
                          AuditQueueUrl)
  DEAD_LETTER_QUEUE_URL   the dead-letter queue (--dlq-url; stack output AuditDeadLetterQueueUrl)
  ARCHIVE_BUCKET          the archive bucket, for verify, prove, consistency and witness
                          (--bucket; stack output AuditArchiveBucketName)
  ARCHIVER_FUNCTION       the archiver function, for archive repair (--archiver-function; stack
                          output AuditArchiverFunctionArn)
  DIGEST_KEY_ID           the digest signing key, for verify, prove, consistency and witness
                          (--key-id; stack output AuditDigestKeyArn)
  DIGEST_PERIOD_SECONDS   the digest period, for verify and prove (--period-seconds; 3600 in AWS)
  AWS_ENDPOINT_URL        a local endpoint such as moto (--endpoint-url)
  AWS_PROFILE, AWS_REGION and the other standard AWS variables and files (--profile, --region)

Examples:
  auditctl query --from 2026-11-22T00:00:00Z --to 2026-11-22T23:59:59.999Z
  auditctl query --from 2026-11-22T10:00:00+01:00 --to 2026-11-23T10:00:00+01:00 --desc --limit 20
  auditctl query --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z --format csv > november.csv
  auditctl get order-42 --format jsonl
  auditctl dlq list
  auditctl dlq redrive --reason throttled --rate 50
  auditctl verify --from 2026-11-22T00:00:00Z --to 2026-11-22T23:59:59.999Z --table
  auditctl archive repair --from 2026-11-22T10:00:00Z --to 2026-11-22T10:59:59.999Z
  auditctl prove order-42 --out order-42.proof.json
  auditctl export --from 2026-07-01T00:00:00Z --to 2026-09-30T23:59:59Z --evidence q3
  auditctl key --pem > digest-key.pem   (the log's public key, for check-proof)
  auditctl check-proof order-42.proof.json --public-key digest-key.pem   (offline: no AWS)
  auditctl ui
  auditctl witness --state witness.json --key witness.key

Access to the trail is itself recorded: query, get, dlq list, dlq redrive, verify, archive repair,
prove and export first send an audit event of their own (actor = the caller's ARN and
callerUserId = its user id, from sts:GetCallerIdentity; action auditctl.query, auditctl.get,
auditctl.dlq.list, auditctl.dlq.redrive, auditctl.verify, auditctl.archive.repair,
auditctl.prove or auditctl.export; the arguments given) to the
access queue. The access queue must be the stack's: the one the table (TABLE_NAME) names in its tag
audit:access-queue-arn. If it is not, or the event cannot be sent, the command reads nothing and exits 1. Without an
access queue it reads nothing and exits 2, unless --no-audit-event says the read goes unrecorded on
purpose (said on stderr).

Exit status: 0 success, 1 failure (the message names the fix; for verify: a problem found), 2 bad
usage.";

/// Reads the audit trail in time order and works the dead-letter queue.
#[derive(Debug, Parser)]
#[command(name = "auditctl", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(flatten)]
    aws: AwsArgs,
    #[command(flatten)]
    audit: AuditArgs,
    #[command(subcommand)]
    command: Command,
}

/// The commands, in the order the help lists them; each is a module of `commands/` holding its
/// flags, its help and its `run`.
#[derive(Debug, Subcommand)]
enum Command {
    Query(query::QueryArgs),
    Get(get::GetArgs),
    Dlq(dlq::DlqArgs),
    Verify(verify::VerifyArgs),
    Archive(archive::ArchiveArgs),
    Prove(prove::ProveArgs),
    Export(export::ExportArgs),
    CheckProof(check_proof::CheckProofArgs),
    Key(key::KeyArgs),
    Consistency(prove::ConsistencyArgs),
    Ui(ui::UiArgs),
    Witness(witness::WitnessArgs),
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // clap exits 2 on bad usage. Built first, so that each subcommand holds the global flags
    // that given_arguments reads.
    let mut command = Cli::command();
    command.build();
    let matches = command.get_matches_mut();
    let cli = Cli::from_arg_matches(&matches)
        .map_err(|e| e.format(&mut Cli::command()))
        .unwrap_or_else(|e| e.exit());
    let arguments = commands::arguments::given_arguments(&command, &matches);
    match run(cli, arguments).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Trail(TrailError::Output(e)))
            if e.kind() == std::io::ErrorKind::BrokenPipe =>
        {
            ExitCode::SUCCESS // `auditctl query ... | head`
        }
        Err(Failure::Usage(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Problems) => ExitCode::FAILURE,
        Err(Failure::Trail(error)) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The SDK configuration from the global flags, the access recorder, then the command
/// (`check-proof` before any of it: it needs no AWS configuration).
async fn run(
    cli: Cli,
    arguments: serde_json::Map<String, serde_json::Value>,
) -> Result<(), Failure> {
    if let Command::CheckProof(args) = cli.command {
        return check_proof::run(args);
    }
    let config = audit_aws::config::cli(&cli.aws.options()).await;
    let access = Recorder::new(
        cli.audit
            .access_queue_url
            .map(|url| SdkAccessLog::new(&config, url)),
        cli.audit.no_audit_event,
        arguments,
    );
    let context = Context {
        location: audit_aws::config::location(&config),
        config,
        access,
    };
    let at = context.location.clone();
    // The viewer records each request's access, and its failure, itself (`Recorder::read`).
    if let Command::Ui(args) = cli.command {
        return ui::run(args, context)
            .await
            .map_err(|failure| name_the_fix(failure, &at));
    }
    let result = match cli.command {
        Command::Query(args) => query::run(args, &context).await,
        Command::Get(args) => get::run(args, &context).await,
        Command::Dlq(args) => dlq::run(args, &context).await,
        Command::Verify(args) => verify::run(args, &context).await,
        Command::Archive(args) => archive::run(args, &context).await,
        Command::Prove(args) => prove::run(args, &context).await,
        Command::Export(args) => export::run(args, &context).await,
        Command::CheckProof(args) => check_proof::run(args),
        Command::Key(args) => key::run(args, &context).await,
        Command::Consistency(args) => prove::run_consistency(args, &context).await,
        Command::Witness(args) => witness::run(args, &context).await,
        Command::Ui(_) => unreachable!("auditctl ui returned above"),
    };
    // A failure after the access was recorded sends its failure event (docs/auditctl.md "Access
    // to the trail is itself recorded"), in the words the person reads.
    let result = result.map_err(|failure| name_the_fix(failure, &at));
    context.access.outcome(result).await
}

/// A failure of the credentials, the endpoint, the caller's policy or AWS's rate, said with its
/// cause and fix first (`words::cause_and_fix`); any other failure as it is.
fn name_the_fix(failure: Failure, at: &str) -> Failure {
    match failure {
        Failure::Trail(TrailError::Output(e)) => Failure::Trail(TrailError::Output(e)),
        Failure::Trail(error) => {
            let message = error.to_string();
            match commands::words::cause_and_fix(&message, at) {
                Some(worded) => Failure::Trail(TrailError::Worded(worded)),
                None => Failure::Trail(error),
            }
        }
        failure => failure,
    }
}
