//! `audit-check-proof`: `auditctl check-proof` on its own, for an auditor who checks a proof
//! without building the AWS SDK. Wires the arguments to `audit_check_proof::run` and its exit.

use std::process::ExitCode;

use audit_check_proof::{CheckProofArgs, Outcome, run};
use clap::Parser;

/// Checks a proof printed by `auditctl prove`, offline.
#[derive(Debug, Parser)]
#[command(name = "audit-check-proof", version)]
struct Cli {
    #[command(flatten)]
    args: CheckProofArgs,
}

fn main() -> ExitCode {
    match run(Cli::parse().args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Outcome::Failed) => ExitCode::FAILURE,
        Err(Outcome::Usage(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}
