//! Owns the offline check of a proof as a command: its flags and help, reading the proof, the
//! log's PEM key and the witnesses' keys from files (or the command line), and the verdict's
//! words. Runs with no AWS configuration. Must not know how a proof is checked
//! (`audit_proof::check_proof`) nor how the binary that runs it exits.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use audit_model::note::{Proof, WitnessKey};
use audit_proof::{
    BundleVerdict, CheckError, LogKey, Verdict, check_bundle, check_proof, witness_key_arg,
};
use chrono::DateTime;
use clap::Args;

const CHECK_PROOF_HELP: &str = "\
Checks a proof printed by `auditctl prove`, offline (no AWS configuration, no network):
  - the checkpoint's signature by the log's key (--public-key: the digest key's public key, PEM,
    as docs/operations.md makes it with `aws kms get-public-key`), its key id the first four
    bytes of SHA-256 of the key's DER;
  - the checkpoint's origin being the log's (--origin: audit-receiver/<the stack's archive
    bucket>): a proof of another log signed by the same key fails;
  - the line's leaf hash (SHA-256 of 0x00 and the line) up the inclusion path (RFC 9162) to the
    checkpoint's root, at the proof's leaf index in a tree of its size;
  - the line's messageId and auditTime being the proof's;
  - each --witness-key's Ed25519 cosignature on the checkpoint (c2sp.org/tlog-cosignature).

Prints `OK: ...` (messageId, leaf index, tree size, the log's origin, the witnesses whose
cosignatures hold) or `FAILED: <reason>`.

Given a directory (or a .tar.gz or .zip of one), checks it as an evidence bundle of `auditctl export --evidence`
(docs/archive.md \"Evidence for auditors\"): checkpoint.txt's signature, origin and each
--witness-key's cosignature; every line of events.jsonl, byte for byte, against its proof in
proofs.jsonl (the same checks as above, in checkpoint.txt's tree), in log order, as many as the
manifest says; and, where the manifest claims completeness, that the events are every leaf of
their run and recompute, with its range proof, the roots of the checkpoints at both ends. Each
failure is printed on its own `FAILED: ` line.

Examples:
  auditctl check-proof order-42.proof.json --public-key digest-key.pem \\
    --origin audit-receiver/$ARCHIVE_BUCKET
  auditctl check-proof - --public-key digest-key.pem --origin audit-receiver/$ARCHIVE_BUCKET \\
    --witness-key \"$WITNESS_KEY\" < proof.json
  auditctl check-proof q3-bundle --public-key digest-key.pem --origin audit-receiver/$ARCHIVE_BUCKET

Exit status: 0 the proof holds, 1 it does not (the reason is printed), 2 bad usage (a file that
cannot be read, a PEM that is not a public key, a witness key that is not one).";

/// Checks an event's proof offline: the checkpoint's signature, the inclusion path, cosignatures.
#[derive(Debug, Args)]
#[command(after_help = CHECK_PROOF_HELP)]
pub struct CheckProofArgs {
    /// The proof (JSON, from `auditctl prove`), - for stdin, or an evidence bundle's directory
    /// (`auditctl export --evidence`).
    #[arg(value_name = "FILE")]
    proof: String,
    /// The log's public key: a PEM file (-----BEGIN PUBLIC KEY-----), the digest key's
    /// (`auditctl key --pem > digest-key.pem` writes the stack's).
    #[arg(long, value_name = "PEM")]
    public_key: Option<PathBuf>,
    /// The log's origin, the first line of its checkpoints: audit-receiver/<the stack's archive
    /// bucket> (`AuditArchiveBucket`). A proof of any other log fails.
    #[arg(long, value_name = "ORIGIN")]
    origin: String,
    /// A witness whose cosignature must be on the checkpoint: its verifier key
    /// (name+keyid+base64, as `auditctl witness --init` prints it) or a file holding one.
    /// Repeatable.
    #[arg(long, value_name = "KEY")]
    witness_key: Vec<String>,
}

/// How to get the log's key, said wherever it is missing or unreadable.
const GET_KEY: &str = "`auditctl key --pem > digest-key.pem` writes the stack's (it reads DIGEST_KEY_ID or --key-id from KMS; `auditctl key` prints the --origin too; docs/auditctl.md \"key\")";

/// What to do when the proof is not signed by the key given.
const WRONG_KEY: &str = "is --public-key the key of the stack that made the proof? `auditctl key --pem > digest-key.pem`, run with that stack's DIGEST_KEY_ID, writes its key";

/// Why the command did not say OK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Bad usage (exit 2): a file that cannot be read, a key that is not one; in these words.
    Usage(String),
    /// The proof does not hold (exit 1): `FAILED: <reason>` was printed.
    Failed,
}

fn read(path: &Path, what: &str) -> Result<String, Outcome> {
    std::fs::read_to_string(path)
        .map_err(|e| Outcome::Usage(format!("cannot read {what} {}: {e}", path.display())))
}

/// The log's key and the witnesses' keys, read (`Outcome::Usage` when they cannot be).
fn keys(args: &CheckProofArgs) -> Result<(LogKey, Vec<WitnessKey>), Outcome> {
    let public_key = args.public_key.as_ref().ok_or_else(|| {
        Outcome::Usage(format!(
            "--public-key <PEM> not provided: the log's public key, the digest key's; {GET_KEY}"
        ))
    })?;
    let pem = read(public_key, "the public key").map_err(|outcome| match outcome {
        Outcome::Usage(e) => Outcome::Usage(format!("{e}; {GET_KEY}")),
        outcome => outcome,
    })?;
    let key = LogKey::from_pem(&pem).map_err(|e| {
        Outcome::Usage(format!(
            "--public-key {}: {e}; {GET_KEY}",
            public_key.display()
        ))
    })?;
    let witnesses = args
        .witness_key
        .iter()
        .map(|k| witness_key_arg(k).map_err(|e| Outcome::Usage(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((key, witnesses))
}

/// An evidence bundle's directory checked: `OK: ...`, or each problem on a `FAILED: ` line.
fn run_bundle(args: &CheckProofArgs) -> Result<(), Outcome> {
    let (key, witnesses) = keys(args)?;
    let path = Path::new(&args.proof);
    let packed_files = if let Some(packing) = packed(&args.proof) {
        Some(unpack(path, packing).map_err(|e| {
            Outcome::Usage(format!("cannot read the bundle {}: {e}", path.display()))
        })?)
    } else {
        None
    };
    let mut read = |name: &str| {
        // A name from the manifest stays inside the bundle.
        if name.split('/').any(|part| part == ".." || part.is_empty()) {
            return Err(format!("{name:?} is not a file of the bundle"));
        }
        match &packed_files {
            Some(files) => files
                .get(name)
                .cloned()
                .ok_or_else(|| "not in the packed bundle".to_owned()),
            None => std::fs::read(path.join(name)).map_err(|e| e.to_string()),
        }
    };
    match check_bundle(&mut read, &key, &witnesses, &args.origin) {
        Ok(verdict) => {
            println!("OK: {}", bundle_words(&verdict));
            Ok(())
        }
        Err(problems) => {
            for problem in problems {
                let reason = match problem {
                    audit_proof::BundleProblem::Checkpoint {
                        file,
                        source: e @ CheckError::NotSignedByKey { .. },
                    } => format!("{file}: {e}; {WRONG_KEY}"),
                    problem => problem.to_string(),
                };
                println!("FAILED: {reason}");
            }
            Err(Outcome::Failed)
        }
    }
}

/// How an evidence bundle is packed, by its path's ending: a .tar.gz (or .tgz), a .zip, or a
/// directory. The one rule `auditctl export --evidence` writes by and `check-proof` reads by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packing {
    TarGz,
    Zip,
    Directory,
}

/// How the bundle at `path` is packed, by its ending.
pub fn packing(path: &Path) -> Packing {
    let name = path.to_string_lossy();
    if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        Packing::TarGz
    } else if name.ends_with(".zip") {
        Packing::Zip
    } else {
        Packing::Directory
    }
}

/// Whether the argument names a bundle packed as .tar.gz or .zip.
fn packed(arg: &str) -> Option<Packing> {
    Some(packing(Path::new(arg))).filter(|p| *p != Packing::Directory)
}

/// The files of a packed bundle by name (a leading `./` left out).
fn unpack(path: &Path, packing: Packing) -> std::io::Result<HashMap<String, Vec<u8>>> {
    let file = std::fs::File::open(path)?;
    if packing == Packing::Zip {
        return unzip(file);
    }
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut files = HashMap::new();
    for entry in archive.entries()? {
        let mut entry = entry?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry.path()?.to_string_lossy().into_owned();
        let name = name.strip_prefix("./").unwrap_or(&name).to_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes)?;
        files.insert(name, bytes);
    }
    Ok(files)
}

/// The files of a .zip bundle by name (a leading `./` left out; directories passed over).
fn unzip(file: std::fs::File) -> std::io::Result<HashMap<String, Vec<u8>>> {
    let mut archive = zip::ZipArchive::new(file).map_err(std::io::Error::other)?;
    let mut files = HashMap::new();
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(std::io::Error::other)?;
        if !entry.is_file() {
            continue;
        }
        let name = entry.name().map_err(std::io::Error::other)?.into_owned();
        let name = name.strip_prefix("./").unwrap_or(&name).to_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes)?;
        files.insert(name, bytes);
    }
    Ok(files)
}

/// What a bundle that holds proves, in the words after `OK: `.
fn bundle_words(verdict: &BundleVerdict) -> String {
    let complete = match verdict.complete {
        Some((start, end)) => format!(
            "complete: every leaf from {start} to {end}, the periods' events, is in the bundle"
        ),
        None => "inclusion only (no completeness claimed: see the manifest's notProven)".to_owned(),
    };
    format!(
        "{} event(s) each proven in the tree of size {} of {}; {complete}; {} event(s) listed as unproven; cosigned by: {}",
        verdict.events,
        verdict.tree_size,
        verdict.origin,
        verdict.unproven,
        cosigned(&verdict.cosigned)
    )
}

/// The files read (`Outcome::Usage` when they cannot be), then the verdict printed.
pub fn run(args: CheckProofArgs) -> Result<(), Outcome> {
    if args.proof != "-" && (Path::new(&args.proof).is_dir() || packed(&args.proof).is_some()) {
        return run_bundle(&args);
    }
    let text = if args.proof == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| Outcome::Usage(format!("cannot read the proof from stdin: {e}")))?
    } else {
        read(Path::new(&args.proof), "the proof")?
    };
    let (key, witnesses) = keys(&args)?;
    let verdict = serde_json::from_str::<Proof>(&text)
        .map_err(|e| format!("not a proof from `auditctl prove`: {e}"))
        .and_then(|proof| {
            check_proof(&proof, &key, &witnesses).map_err(|e| match e {
                CheckError::NotSignedByKey { .. } => format!("{e}; {WRONG_KEY}"),
                e => e.to_string(),
            })
        })
        .and_then(|verdict| {
            if verdict.origin == args.origin {
                Ok(verdict)
            } else {
                Err(format!(
                    "the checkpoint is of the log {:?}, not of {:?} (--origin)",
                    verdict.origin, args.origin
                ))
            }
        });
    match verdict {
        Ok(verdict) => {
            println!("OK: {}", words(&verdict));
            Ok(())
        }
        Err(reason) => {
            println!("FAILED: {reason}");
            Err(Outcome::Failed)
        }
    }
}

/// What a proof that holds proves, in the words after `OK: `.
fn words(verdict: &Verdict) -> String {
    let cosigned = cosigned(&verdict.cosigned);
    format!(
        "messageId {} is leaf {} of the tree of size {} of {}; cosigned by: {cosigned}",
        verdict.message_id, verdict.leaf_index, verdict.tree_size, verdict.origin
    )
}

/// The witnesses whose cosignatures hold, with when they cosigned.
fn cosigned(cosigned: &[(String, u64)]) -> String {
    if cosigned.is_empty() {
        "no witness asked for".to_owned()
    } else {
        cosigned
            .iter()
            .map(|(name, at)| {
                let when = i64::try_from(*at)
                    .ok()
                    .and_then(|t| DateTime::from_timestamp(t, 0))
                    .map(|t| t.to_rfc3339())
                    .unwrap_or_else(|| at.to_string());
                format!("{name} (at {when})")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundles_packing_is_its_paths_ending() {
        for (path, want) in [
            ("q3.tar.gz", Packing::TarGz),
            ("out/q3.tgz", Packing::TarGz),
            ("q3.zip", Packing::Zip),
            ("q3", Packing::Directory),
            ("q3.zip/", Packing::Directory),
            ("q3.gz", Packing::Directory),
        ] {
            assert_eq!(packing(Path::new(path)), want, "{path}");
        }
        assert_eq!(packed("q3.zip"), Some(Packing::Zip));
        assert_eq!(packed("q3"), None);
    }
}
