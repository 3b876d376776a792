//! Owns `auditctl check-proof` as one of auditctl's commands: the command itself (flags, help,
//! words) is `audit_check_proof`'s, the same as the `audit-check-proof` binary's; this maps its
//! outcome to auditctl's exit. Runs before any AWS configuration is built and needs none.

pub use audit_check_proof::CheckProofArgs;
use audit_check_proof::Outcome;

use super::Failure;

/// `auditctl check-proof`: exit 2 when the files cannot be read, 1 when the proof does not hold.
pub fn run(args: CheckProofArgs) -> Result<(), Failure> {
    audit_check_proof::run(args).map_err(|outcome| match outcome {
        Outcome::Usage(message) => Failure::Usage(message),
        Outcome::Failed => Failure::Problems,
    })
}
