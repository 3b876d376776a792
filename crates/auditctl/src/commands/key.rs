//! Owns `auditctl key`: the keys a proof is checked against, one command away: the log's public
//! key (the digest key's, from KMS) as PEM, its ARN, KMS key id and note key id, the log's origin,
//! the witness keys given, and the `check-proof` line that uses them. Must not know how a proof is
//! checked (`audit_check_proof`) or how KMS is read (`audit_proof::verify::kms`).

use audit_model::note::{ecdsa_key_id, origin};
use audit_proof::tlog::witness_key_arg;
use audit_proof::verify::key::TrustedKey;
use audit_proof::verify::kms::KmsKey;
use audit_proof::verify::ports::KeySource;
use clap::Args;

use super::archive_flags::LogFlags;
use super::{Context, Failure};

const KEY_HELP: &str = "\
Prints what `auditctl check-proof` checks a proof against, read from the stack: the log's public
key (the digest key's, from KMS GetPublicKey: never from the bucket) as PEM, its ARN, its KMS key
id and the key id its checkpoint signatures carry, the log's origin (audit-receiver/<bucket>),
the witness keys given, and the check-proof line that uses them. With --pem, the PEM alone, for
a file:

  auditctl key --pem > digest-key.pem
  auditctl check-proof order-42.proof.json --public-key digest-key.pem --origin audit-receiver/$ARCHIVE_BUCKET

It reads no event (its access is not recorded) and needs kms:GetPublicKey on the digest key
(AuditReaderPolicy grants it).

Exit status: 0 printed, 1 failure (the message names the fix), 2 bad usage.

Environment: DIGEST_KEY_ID, ARCHIVE_BUCKET, AWS_ENDPOINT_URL, AWS_PROFILE, AWS_REGION.";

/// The log's public key (PEM) and what else a proof is checked against.
#[derive(Debug, Args)]
#[command(after_help = KEY_HELP)]
pub struct KeyArgs {
    /// Print the PEM alone.
    #[arg(long)]
    pem: bool,
    /// A witness whose cosignature a proof must carry: its key (<name>+<key id>+<base64 key>, as
    /// `auditctl witness --init` prints it) or a file holding it, printed with its key id.
    /// Repeatable.
    #[arg(long, value_name = "KEY")]
    witness_key: Vec<String>,
    #[command(flatten)]
    log: LogFlags,
}

/// The DER SubjectPublicKeyInfo as a PEM public key (the proof library's, which the bundle uses).
pub use audit_proof::public_key_pem as pem;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `auditctl key`: the witness keys checked, the digest key read from KMS and checked, then
/// printed.
pub async fn run(args: KeyArgs, context: &Context) -> Result<(), Failure> {
    let witnesses = args
        .witness_key
        .iter()
        .map(|arg| witness_key_arg(arg).map_err(Failure::usage))
        .collect::<Result<Vec<_>, _>>()?;
    let key_id = args.log.key_id()?;
    let info = KmsKey::new(&context.config, key_id, context.location.clone())
        .public_key()
        .await?;
    let der = info.der.clone();
    let arn = info.arn.clone();
    TrustedKey::new(info)?;
    let pem = pem(&der);
    if args.pem {
        print!("{pem}");
        return Ok(());
    }
    let kms_id = arn.rsplit('/').next().unwrap_or(&arn);
    println!("key ARN      {arn}");
    println!("KMS key id   {kms_id}");
    println!(
        "note key id  {} (what the log's checkpoint signatures name)",
        hex(&ecdsa_key_id(&der))
    );
    let origin = args.log.bucket.given().map(|bucket| origin(&bucket));
    match &origin {
        Some(origin) => println!("origin       {origin}"),
        None => println!(
            "origin       audit-receiver/<the archive bucket>: set ARCHIVE_BUCKET or --bucket (stack output AuditArchiveBucketName) to print it"
        ),
    }
    if witnesses.is_empty() {
        println!("witnesses    none given (--witness-key)");
    }
    for witness in &witnesses {
        println!(
            "witness      {} (key id {}): {}",
            witness.name,
            hex(&witness.key_id()),
            witness.vkey()
        );
    }
    let origin = origin.unwrap_or_else(|| "audit-receiver/$ARCHIVE_BUCKET".to_owned());
    let witness_flags: String = witnesses
        .iter()
        .map(|w| format!(" --witness-key {}", w.vkey()))
        .collect();
    println!(
        "check with   auditctl key --pem > digest-key.pem && auditctl check-proof PROOF.json --public-key digest-key.pem --origin {origin}{witness_flags}"
    );
    print!("{pem}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pem_is_the_der_in_base64_lines_of_64_that_the_offline_check_reads_back() {
        let signer = audit_aws::kms::MemoryKey::new("arn:k");
        let der = signer.public_key().der;
        let text = pem(&der);
        assert!(text.starts_with("-----BEGIN PUBLIC KEY-----\n"), "{text}");
        assert!(text.ends_with("\n-----END PUBLIC KEY-----\n"), "{text}");
        assert!(text.lines().all(|line| line.len() <= 64), "{text}");
        audit_proof::tlog::LogKey::from_pem(&text).expect("the offline check reads it");
    }
}
