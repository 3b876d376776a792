//! Owns `auditctl witness`: its flags and help, the key file (made with --init, 0600, never
//! overwritten), the state file (written to a temporary file, then renamed), the log's key (PEM
//! or KMS) and the exit. Must not know how checkpoints are checked (audit_proof::witness).

use super::archive_flags::LogFlags;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::commands::words::TrailError;
use audit_proof::archive::S3Archive;
use audit_proof::tlog::{LogKey, LogReader};
use audit_proof::verify::kms::KmsKey;
use audit_proof::verify::ports::KeySource;
use audit_proof::witness::{WitnessError, WitnessSigner, WitnessState, check_name};
use clap::Args;

use super::{Context, Failure};

const WITNESS_HELP: &str = "\
A witness keeps the last checkpoint of the transparency log it accepted (--state), and on each run
checks every newer checkpoint in the archive bucket before it cosigns it:
  - the log's signature holds (the digest key's public key: --public-key, or KMS GetPublicKey of
    DIGEST_KEY_ID), and its origin is the log's (--origin, by default audit-receiver/<bucket>;
    never taken from a checkpoint, not even on the first run);
  - the checkpoint of the accepted size is still there with the accepted root (else a fork: two
    checkpoints of one size with different roots; or, when it is gone or the newest is smaller,
    a rollback);
  - an RFC 9162 consistency proof, made from the log's tiles, shows that it extends the accepted
    tree.
Only when every new checkpoint holds does it cosign them (c2sp.org/tlog-cosignature: Ed25519 over
the checkpoint's body as read, with a timestamp), each stored at log/cosignatures/<size>/<key id> (If-None-Match),
and advance the state. Otherwise it prints REFUSED: <why> on stderr and exits 1, with nothing
cosigned and the state unchanged. The first run (no state file yet) trusts the first checkpoint
in the bucket once its signature holds, and says so.

Run it on a schedule, as someone who cannot sign for the log (another account, an auditor); it
needs AuditWitnessPolicy (s3:ListBucket and s3:GetObject on log/, s3:PutObject on
log/cosignatures/*, kms:GetPublicKey) and records no access event (it reads no audit event).
Auditors then ask for its cosignature: auditctl verify --witness-key KEY, auditctl check-proof
--witness-key KEY.

--init makes the key: KEYFILE (mode 0600) holds PRIVATE+KEY+<name>+<key id>+<base64 seed>,
KEYFILE.pub and stdout its public key (the vkey <name>+<key id>+<base64 key> that --witness-key
takes). It never overwrites a key file.

Examples:
  auditctl witness --init --key witness.key --name witness.example.com/w1
  auditctl witness --state witness.json --key witness.key
  auditctl witness --state witness.json --key witness.key --public-key digest-key.pem --bucket B

Exit status: 0 cosigned or nothing new, 1 refused or failed, 2 bad usage.

Environment: ARCHIVE_BUCKET, DIGEST_KEY_ID, AWS_ENDPOINT_URL, AWS_PROFILE, AWS_REGION.";

/// Cosigns the log's new checkpoints once each extends the last one accepted (or, with --init,
/// makes the witness's key).
#[derive(Debug, Args)]
#[command(after_help = WITNESS_HELP)]
pub struct WitnessArgs {
    /// Make a new key at --key (and --key.pub) and print its public key.
    #[arg(long, conflicts_with_all = ["state", "public_key"])]
    init: bool,
    /// The witness's private key file (written by --init).
    #[arg(long, value_name = "KEYFILE")]
    key: PathBuf,
    /// With --init: the key's name [default: witness.audit-receiver.local/<user or host>].
    #[arg(long, value_name = "NAME", requires = "init")]
    name: Option<String>,
    /// The witness's state: the last checkpoint it accepted (JSON; made by the first run).
    #[arg(long, value_name = "PATH", required_unless_present = "init")]
    state: Option<PathBuf>,
    /// The log's public key, a PEM file (the digest key's, from KMS GetPublicKey); without it,
    /// KMS GetPublicKey of --key-id.
    #[arg(long, value_name = "PEM")]
    public_key: Option<PathBuf>,
    /// The log this witness follows: the origin every checkpoint must have [default:
    /// audit-receiver/<the bucket>].
    #[arg(long, value_name = "ORIGIN", conflicts_with = "init")]
    origin: Option<String>,
    /// The bucket, and the digest key when no --public-key.
    #[command(flatten)]
    log: LogFlags,
}

pub async fn run(args: WitnessArgs, context: &Context) -> Result<(), Failure> {
    if args.init {
        return init(&args.key, args.name);
    }
    let Some(state_path) = args.state else {
        return Err(Failure::usage("--state is required (or --init)"));
    };
    let bucket = args.log.bucket()?;
    let signer = WitnessSigner::parse(&read(&args.key, "the witness's key")?).map_err(fail)?;
    let state = match std::fs::read_to_string(&state_path) {
        Ok(text) => Some(
            WitnessState::parse(&text)
                .map_err(|e| fail(format!("{}: {e}", state_path.display())))?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(fail(format!("reading {}: {e}", state_path.display()))),
    };
    // The log's key and what it is: the PEM file, or the key's ARN (the key id resolved once).
    let (log, key_named) = match args.public_key {
        Some(pem) => (
            LogKey::from_pem(&read(&pem, "the log's public key")?)
                .map_err(|e| fail(format!("{}: {e}", pem.display())))?,
            pem.display().to_string(),
        ),
        None => {
            let key_id = args.log.key_id_or("--key-id (or --public-key)")?;
            let info = KmsKey::new(&context.config, key_id, context.location.clone())
                .public_key()
                .await?;
            (
                LogKey::from_der(&info.der).map_err(|e| fail(e.to_string()))?,
                info.arn,
            )
        }
    };
    let archive = S3Archive::new(&context.config, &bucket, context.location.clone());
    let reader = LogReader { archive: &archive };
    let now = chrono::Utc::now();
    let origin = args
        .origin
        .unwrap_or_else(|| audit_model::note::origin(&bucket));
    let done = match audit_proof::witness::run(&reader, &log, &origin, &signer, state.as_ref(), now)
        .await
    {
        Ok(done) => done,
        Err(WitnessError::Refused(refusal)) => {
            eprintln!("REFUSED: {refusal}");
            eprintln!(
                "Nothing was cosigned and {} is unchanged: find out why before anything else (docs/operations.md \"Witnesses\").",
                state_path.display()
            );
            return Err(Failure::Problems);
        }
        Err(WitnessError::Failed(error)) => return Err(error.into()),
    };
    for passed in &done.passed_over {
        eprintln!(
            "passed over {}: not a checkpoint the log's key signed for size {} ({}); someone wrote it under log/checkpoints/: find who (CloudTrail S3 data events)",
            audit_model::note::checkpoint_key(passed.size),
            passed.size,
            passed.why
        );
    }
    let mut out = std::io::stdout().lock();
    if let Some(first) = done.trusted {
        writeln!(
            out,
            "First run: trusting the checkpoint of size {first} on first sight (the log's signature holds); every later one must extend it."
        )?;
    }
    for cosigned in &done.cosigned {
        writeln!(
            out,
            "cosigned checkpoint {}{}",
            cosigned.size,
            if cosigned.already {
                " (already cosigned by this key)"
            } else {
                ""
            }
        )?;
    }
    match (&done.state, done.cosigned.is_empty()) {
        (None, _) => writeln!(
            out,
            "No checkpoint in s3://{bucket}/log/checkpoints/ yet: nothing to cosign."
        )?,
        (Some(state), true) => writeln!(
            out,
            "No new checkpoint after size {} (root {}).",
            state.size, state.root
        )?,
        (Some(state), false) => {
            save(&state_path, state)?;
            writeln!(
                out,
                "Accepted size {} (root {}) of {}, signed by the log's key {key_named}; state in {}.",
                state.size,
                state.root,
                state.origin,
                state_path.display()
            )?;
        }
    }
    Ok(())
}

fn fail(message: impl Into<String>) -> Failure {
    Failure::Trail(TrailError::Worded(message.into()))
}

fn read(path: &Path, what: &str) -> Result<String, Failure> {
    std::fs::read_to_string(path)
        .map_err(|e| fail(format!("reading {what} {}: {e}", path.display())))
}

/// The state, written whole to a temporary file next to it, then renamed over it.
fn save(path: &Path, state: &WitnessState) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(state)
        .map_err(|e| fail(format!("the witness's state: {e}")))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| fail(format!("creating {}: {e}", dir.display())))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let written = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        fail(format!(
            "writing the witness's state {}: {e}",
            path.display()
        ))
    })
}

/// `--init`: a new key at `path` (0600, never over an existing file), its vkey in `path.pub`
/// and on stdout.
fn init(path: &Path, name: Option<String>) -> Result<(), Failure> {
    let name = name.unwrap_or_else(default_name);
    check_name(&name).map_err(Failure::usage)?;
    let signer = WitnessSigner::generate(&name).map_err(fail)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| fail(format!("creating {}: {e}", dir.display())))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            fail(format!(
                "{} exists: a witness key is never overwritten (its state and cosignatures belong to it); choose another --key",
                path.display()
            ))
        } else {
            fail(format!("creating {}: {e}", path.display()))
        }
    })?;
    file.write_all(signer.key_file().as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| fail(format!("writing {}: {e}", path.display())))?;
    let vkey = signer.key.vkey();
    let mut public = path.as_os_str().to_owned();
    public.push(".pub");
    let public = PathBuf::from(public);
    std::fs::write(&public, format!("{vkey}\n"))
        .map_err(|e| fail(format!("writing {}: {e}", public.display())))?;
    eprintln!(
        "Wrote the witness key {} (keep it secret) and its public key {}:",
        path.display(),
        public.display()
    );
    println!("{vkey}");
    Ok(())
}

/// `witness.audit-receiver.local/<user or host>`, with only characters a key name may hold.
fn default_name() -> String {
    let who = ["USER", "LOGNAME", "HOSTNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .filter(|s| !s.trim().is_empty())
        })
        .unwrap_or_else(|| "witness".to_owned());
    let who: String = who
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-._".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("witness.audit-receiver.local/{who}")
}
