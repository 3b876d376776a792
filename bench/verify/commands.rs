//! Owns running `auditctl verify`, `prove` and `check-proof` over the archive and what each
//! gave. Must not know how the archive was written or the bounds measured.

use super::*;

/// What `auditctl verify` did.
pub(crate) struct Verified {
    pub(crate) wall: f64,
    pub(crate) usage: Usage,
    pub(crate) moto_cpu: Option<Duration>,
    pub(crate) summary: String,
}

/// `command` pointed at the archive on `moto`: its endpoint and region, test credentials (none
/// from the environment), the bucket, the digest key and the period length.
pub(crate) fn on_archive(command: &mut Command, moto: &Moto, key_arn: &str, period: PeriodLength) {
    command
        .env("AWS_ENDPOINT_URL", &moto.endpoint)
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .env("ARCHIVE_BUCKET", BUCKET)
        .env("DIGEST_KEY_ID", key_arn)
        .env("DIGEST_PERIOD_SECONDS", period.seconds().to_string());
}

pub(crate) fn run_verify(
    auditctl: &Path,
    moto: &Moto,
    key_arn: &str,
    attestation_key: Option<&str>,
    plan: &Plan,
    period: PeriodLength,
    events: u64,
) -> Verified {
    let at = |seconds: i64, millis: i64| {
        DateTime::from_timestamp_millis(seconds * 1000 + millis)
            .expect("a time")
            .to_rfc3339_opts(SecondsFormat::Millis, true)
    };
    let from = at(FIRST_PERIOD, 0);
    let to = at(plan.end(period), -1);
    eprintln!(
        "verify: {} verify --from {from} --to {to} --no-audit-event",
        auditctl.display()
    );
    let moto_before = moto_cpu();
    let started = Instant::now();
    // Through a fresh copy of this binary: see `measure_child`.
    let mut command = measured(auditctl);
    command
        .args(["verify", "--from", &from, "--to", &to, "--no-audit-event"])
        .env("ATTESTATION_KEY_ID", attestation_key.unwrap_or(""))
        .env_remove("AUDIT_QUEUE_URL");
    on_archive(&mut command, moto, key_arn, period);
    let Measured {
        usage,
        wall,
        stdout,
        stderr,
    } = run_measured(command);
    let moto_cpu = moto_before
        .zip(moto_cpu())
        .map(|(a, b)| b.saturating_sub(a));
    eprintln!(
        "  verify: {wall:.2} s from its start to its exit, {:.2} s with the measuring process",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        usage.code,
        Some(0),
        "auditctl verify failed:\n{stdout}\n{stderr}"
    );
    let checked = stdout
        .lines()
        .find_map(|l| l.strip_prefix("events"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok());
    assert_eq!(
        checked,
        Some(events),
        "auditctl verify's summary does not count {events} events:\n{stdout}"
    );
    Verified {
        wall,
        usage,
        moto_cpu,
        summary: stdout,
    }
}

/// What proving gave: each proof's wall time and what prove read (its stderr's last words), and
/// each check-proof's wall time.
pub(crate) struct Proved {
    prove_walls: Vec<f64>,
    reads: Vec<String>,
    check_walls: Vec<f64>,
    proof_bytes: usize,
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

/// The digest key's public key from moto's KMS, as a PEM file under `work` (what an auditor
/// gets from `auditctl key --pem`).
pub(crate) async fn key_pem(moto: &Moto, key_arn: &str, work: &Path) -> PathBuf {
    let der = moto
        .kms()
        .get_public_key()
        .key_id(key_arn)
        .send()
        .await
        .expect("the key's public key")
        .public_key
        .expect("a public key")
        .into_inner();
    std::fs::create_dir_all(work).expect("target/bench");
    let pem = work.join("prove-key.pem");
    let encoded = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&der)
    };
    let lines: Vec<&str> = encoded
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    std::fs::write(
        &pem,
        format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            lines.join("\n")
        ),
    )
    .expect("the key's PEM");
    pem
}

/// `auditctl prove` for `count` events spread over the archive (the table exists and is empty:
/// prove finds each event from its --audit-time, as for an expired item), each proof checked with
/// `auditctl check-proof` against the key's public key from KMS.
pub(crate) async fn run_prove(
    auditctl: &Path,
    moto: &Moto,
    key_arn: &str,
    plan: &Plan,
    period: PeriodLength,
    count: u64,
    work: &Path,
) -> Proved {
    let events: u64 = plan.objects.iter().map(|o| o.events).sum();
    moto.create_table().await;
    let pem = key_pem(moto, key_arn, work).await;
    let mut proved = Proved {
        prove_walls: Vec::new(),
        reads: Vec::new(),
        check_walls: Vec::new(),
        proof_bytes: 0,
    };
    for n in 0..count {
        let event = (n * events / count + n * 7919) % events;
        let item = planned_item(plan, event);
        let text = |field: &str| item[field]["S"].as_str().unwrap_or_default().to_owned();
        let (message_id, audit_time) = (text("messageId"), text("auditTime"));
        let out = work.join(format!("proof-{n}.json"));
        let started = Instant::now();
        let mut command = Command::new(auditctl);
        command
            .args([
                "--no-audit-event",
                "prove",
                &message_id,
                "--audit-time",
                &audit_time,
            ])
            .arg("--out")
            .arg(&out)
            .env("TABLE_NAME", moto::TABLE);
        on_archive(&mut command, moto, key_arn, period);
        let output = command.output().expect("auditctl prove");
        let wall = started.elapsed().as_secs_f64();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "auditctl prove {message_id} failed:\n{stderr}"
        );
        proved.prove_walls.push(wall);
        proved.reads.push(
            stderr
                .trim()
                .rsplit("; ")
                .next()
                .unwrap_or_default()
                .to_owned(),
        );
        proved.proof_bytes = std::fs::metadata(&out).map_or(0, |m| m.len() as usize);
        let started = Instant::now();
        let output = Command::new(auditctl)
            .arg("check-proof")
            .arg(&out)
            .arg("--public-key")
            .arg(&pem)
            .args(["--origin", &origin(BUCKET)])
            .env_clear()
            .output()
            .expect("auditctl check-proof");
        proved.check_walls.push(started.elapsed().as_secs_f64());
        assert!(
            output.status.success(),
            "check-proof refused {message_id}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    eprintln!(
        "  prove: {count} events, median {:.3} s (max {:.3} s); check-proof median {:.1} ms (max {:.1} ms); a proof is {} bytes",
        median(&proved.prove_walls),
        proved.prove_walls.iter().copied().fold(0.0, f64::max),
        median(&proved.check_walls) * 1e3,
        proved.check_walls.iter().copied().fold(0.0, f64::max) * 1e3,
        proved.proof_bytes
    );
    for read in &proved.reads {
        eprintln!("    prove read: {read}");
    }
    proved
}

/// The `--prove-only` stand-in: written and sealed by the archiver's code in its in-memory bucket
/// twin (moto's listings walk every key of the bucket, so sealing thousands of periods on moto
/// grows with the square of the archive), signed by moto's KMS key; then everything `prove` reads
/// (the objects under `trail/`, `digest/` and `log/`, with their metadata; not the run markers
/// under `state/`) copied to moto's bucket, where `auditctl prove` reads it over HTTP.
pub(crate) async fn prove_standin(
    options: &Options,
    moto: &Moto,
    key_arn: &str,
    plan: &Plan,
    events: u64,
    auditctl: &Path,
    work: &Path,
) {
    let period = options.period;
    let memory = MemoryBucket::new();
    let written = write_into(&memory, plan, period, None).await;
    eprintln!(
        "  written in memory in {:.1} s: {:.1} MB gzip",
        written.seconds,
        written.bytes as f64 / 1e6
    );
    let sealed = seal_in(&memory, moto, key_arn, plan, period).await;
    eprintln!(
        "  sealed {} digests in {:.1} s; the log: {} leaves, {} PUTs, {:.1} MB ({:.0} PUTs and {:.1} MB per million events)",
        sealed.digests,
        sealed.seconds,
        sealed.leaves,
        sealed.log_puts,
        sealed.log_bytes as f64 / 1e6,
        sealed.log_puts as f64 * 1e6 / events as f64,
        sealed.log_bytes as f64 / events as f64
    );
    assert_eq!(sealed.leaves, events, "a leaf per event");
    let started = Instant::now();
    let keys: Vec<String> = ["trail/", "digest/", "log/"]
        .iter()
        .flat_map(|prefix| memory.keys(prefix))
        .collect();
    let s3 = moto.s3();
    futures::stream::iter(keys.iter())
        .map(|key| {
            let (s3, memory) = (&s3, &memory);
            async move {
                let Some(version) = memory.current(key) else {
                    return;
                };
                let mut put = s3
                    .put_object()
                    .bucket(BUCKET)
                    .key(key)
                    .body(version.body.clone().into())
                    .checksum_algorithm(aws_sdk_s3::types::ChecksumAlgorithm::Sha256);
                for (name, value) in &version.metadata {
                    put = put.metadata(*name, value);
                }
                put.send()
                    .await
                    .unwrap_or_else(|e| panic!("copying {key} to moto: {e}"));
            }
        })
        .buffer_unordered(CONCURRENCY * 2)
        .collect::<Vec<()>>()
        .await;
    eprintln!(
        "  copied {} objects to moto in {:.1} s",
        keys.len(),
        started.elapsed().as_secs_f64()
    );
    let proved = run_prove(auditctl, moto, key_arn, plan, period, options.prove, work).await;
    push_prove_row(events, &sealed, &proved);
}

pub(crate) fn push_prove_row(events: u64, sealed: &Sealed, proved: &Proved) {
    let reads = proved
        .reads
        .iter()
        .max_by_key(|r| r.len())
        .cloned()
        .unwrap_or_default();
    PROVE_ROWS.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
        "| {events} | {} | {:.1} µs | {} | {:.1} MB | {:.0} | {:.2} MB | {:.3} s | {:.3} s | {} | {:.1} ms | {} |",
        sealed.digests,
        sealed.seconds * 1e6 / events as f64,
        sealed.log_puts,
        sealed.log_bytes as f64 / 1e6,
        sealed.log_puts as f64 * 1e6 / events as f64,
        sealed.log_bytes as f64 / events as f64,
        median(&proved.prove_walls),
        proved.prove_walls.iter().copied().fold(0.0, f64::max),
        reads,
        median(&proved.check_walls) * 1e3,
        proved.proof_bytes
    ));
}
