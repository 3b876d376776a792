//! Owns the evidence bundle's figures: `auditctl export --evidence` of the whole archive into a
//! directory, a .zip and a .tar.gz, `auditctl check-proof` of each offline, what each used and
//! the bundles' bytes against the events' own. Must not know how the archive was written.

use super::*;

/// The bundle's packings (docs/auditctl.md "export --evidence": by the path's ending) and the
/// path each is written at.
const PACKINGS: [(&str, &str); 3] = [
    ("directory", "bundle"),
    (".zip", "bundle.zip"),
    (".tar.gz", "bundle.tar.gz"),
];

/// The rows of the two evidence tables (commands, then bytes by file), printed after the verify
/// table.
pub(crate) static EVIDENCE_ROWS: std::sync::Mutex<(Vec<String>, Vec<String>)> =
    std::sync::Mutex::new((Vec::new(), Vec::new()));

/// A bundle's files in three parts: events.jsonl, proofs.jsonl and every other file.
#[derive(Debug, Default, Clone, Copy)]
struct Parts {
    events: u64,
    proofs: u64,
    rest: u64,
}

impl Parts {
    fn add(&mut self, name: &str, bytes: u64) {
        match name {
            "events.jsonl" => self.events += bytes,
            "proofs.jsonl" => self.proofs += bytes,
            _ => self.rest += bytes,
        }
    }

    fn total(&self) -> u64 {
        self.events + self.proofs + self.rest
    }
}

/// The directory bundle's files by part (their names relative to `dir`).
fn directory_parts(dir: &Path) -> Parts {
    let mut parts = Parts::default();
    let mut pending = vec![dir.to_owned()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at)
            .expect("the bundle's directory")
            .flatten()
        {
            let path = entry.path();
            let meta = entry.metadata().expect("a bundle file's metadata");
            if meta.is_dir() {
                pending.push(path);
                continue;
            }
            let name = path.strip_prefix(dir).unwrap_or(&path).to_string_lossy();
            parts.add(&name, meta.len());
        }
    }
    parts
}

/// The .zip bundle's members by part, compressed as stored (their local headers and the central
/// directory are the difference to the file's size).
fn zip_parts(file: &Path) -> Parts {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(file).expect("the .zip bundle"))
        .expect("the .zip bundle is a zip");
    let mut parts = Parts::default();
    for i in 0..archive.len() {
        let entry = archive.by_index_raw(i).expect("a zip member");
        let name = entry.name().expect("a zip member's name").into_owned();
        parts.add(&name, entry.compressed_size());
    }
    parts
}

/// Bytes in MB, or in KB below one MB.
fn size(bytes: u64) -> String {
    if bytes >= 1_000_000 {
        format!("{:.1} MB", bytes as f64 / 1e6)
    } else {
        format!("{:.1} KB", bytes as f64 / 1e3)
    }
}

/// Bytes and bytes an event.
fn size_per_event(bytes: u64, events: u64) -> String {
    let each = bytes as f64 / events as f64;
    if each < 10.0 {
        format!("{} ({each:.2} bytes an event)", size(bytes))
    } else {
        format!("{} ({each:.0} bytes an event)", size(bytes))
    }
}

/// Every event of the archive exported as an evidence bundle in each packing, then checked
/// offline with the key's PEM from KMS; `lines_bytes` is the archived lines' bytes (a newline
/// each), what events.jsonl must hold exactly.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_evidence(
    auditctl: &Path,
    moto: &Moto,
    key_arn: &str,
    plan: &Plan,
    period: PeriodLength,
    events: u64,
    lines_bytes: u64,
    work: &Path,
) {
    let dir = work.join(format!("evidence-{events}"));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("the last run's bundles removed");
    }
    std::fs::create_dir_all(&dir).expect("target/bench/evidence-N");
    let pem = key_pem(moto, key_arn, &dir).await;
    let at = |millis: i64| {
        DateTime::from_timestamp_millis(millis)
            .expect("a time")
            .to_rfc3339_opts(SecondsFormat::Millis, true)
    };
    let from = at(FIRST_PERIOD * 1000);
    let to = at(plan.end(period) * 1000 - 1);
    let log_origin = origin(BUCKET);
    let mut rows = Vec::new();
    let mut parts = Vec::new();
    for (packing, file) in PACKINGS {
        let path = dir.join(file);
        eprintln!(
            "evidence: {} --no-audit-event export --from {from} --to {to} --evidence {}",
            auditctl.display(),
            path.display()
        );
        let mut command = measured(auditctl);
        command
            .args(["--no-audit-event", "export", "--from", &from, "--to", &to])
            .arg("--evidence")
            .arg(&path)
            .env("TABLE_NAME", moto::TABLE)
            .env_remove("ACCESS_QUEUE_URL");
        on_archive(&mut command, moto, key_arn, period);
        let moto_before = moto_cpu();
        let export = run_measured(command);
        let moto_cpu = moto_before
            .zip(moto_cpu())
            .map(|(a, b)| b.saturating_sub(a));
        assert_eq!(
            export.usage.code,
            Some(0),
            "auditctl export --evidence {} failed:\n{}",
            path.display(),
            export.stderr
        );
        let wrote = export
            .stderr
            .lines()
            .find(|l| l.starts_with("wrote "))
            .unwrap_or_default();
        eprintln!("  {wrote}");
        // As an auditor checks it: the key's PEM from the stack's owner, no AWS configuration.
        let mut command = measured(auditctl);
        command
            .arg("check-proof")
            .arg(&path)
            .arg("--public-key")
            .arg(&pem)
            .args(["--origin", &log_origin])
            .env_clear();
        let check = run_measured(command);
        let said = check.stdout.trim();
        eprintln!("  check-proof: {said}");
        assert_eq!(
            check.usage.code,
            Some(0),
            "check-proof refused {}:\n{said}\n{}",
            path.display(),
            check.stderr
        );
        assert!(
            said.starts_with(&format!("OK: {events} event(s) each proven"))
                && said.contains("; complete: every leaf from ")
                && said.contains("; 0 event(s) listed as unproven"),
            "check-proof of {} did not say every event proven, complete: {said}",
            path.display()
        );
        let bytes = if packing == "directory" {
            let files = directory_parts(&path);
            assert_eq!(
                files.events, lines_bytes,
                "events.jsonl is not the archived lines' bytes"
            );
            parts.push(("in the directory", files));
            files.total()
        } else {
            if packing == ".zip" {
                parts.push(("in the .zip (deflated)", zip_parts(&path)));
            }
            std::fs::metadata(&path).expect("the bundle's file").len()
        };
        let seconds = |d: Duration| format!("{:.2} s", d.as_secs_f64());
        let mib = |kib: u64| format!("{:.0} MB", kib as f64 / 1024.0);
        rows.push(format!(
            "| {events} | {packing} | {} | {:.2}× | {:.2} s | {} | {} | {} | {:.2} s | {} | {} | OK, complete |",
            size(bytes),
            bytes as f64 / lines_bytes as f64,
            export.wall,
            seconds(export.usage.cpu),
            mib(export.usage.max_rss_kib),
            moto_cpu.map_or("n/a".into(), seconds),
            check.wall,
            seconds(check.usage.cpu),
            mib(check.usage.max_rss_kib),
        ));
        eprintln!(
            "  {packing}: {:.1} MB; export {:.2} s wall, {:.2} s CPU; check-proof {:.2} s wall, {:.2} s CPU",
            bytes as f64 / 1e6,
            export.wall,
            export.usage.cpu.as_secs_f64(),
            check.wall,
            check.usage.cpu.as_secs_f64()
        );
    }
    let mut by_file = Vec::new();
    for (name, pick) in [
        ("events.jsonl", (|p: &Parts| p.events) as fn(&Parts) -> u64),
        ("proofs.jsonl", |p| p.proofs),
        ("the rest", |p| p.rest),
        ("all", |p| p.total()),
    ] {
        let cells: Vec<String> = parts
            .iter()
            .map(|(_, p)| size_per_event(pick(p), events))
            .collect();
        by_file.push(format!(
            "| {events} | {} | {name} | {} |",
            size_per_event(lines_bytes, events),
            cells.join(" | ")
        ));
    }
    let mut tables = EVIDENCE_ROWS.lock().unwrap_or_else(|e| e.into_inner());
    tables.0.extend(rows);
    tables.1.extend(by_file);
}

/// Prints the evidence tables, if any rows.
pub(crate) fn print_evidence() {
    let tables = EVIDENCE_ROWS.lock().unwrap_or_else(|e| e.into_inner());
    if tables.0.is_empty() {
        return;
    }
    println!();
    println!(
        "| events | bundle | bytes | ÷ the events' own bytes | export wall | export CPU | export peak RSS | moto CPU meanwhile | check-proof wall | check-proof CPU | check-proof peak RSS | check-proof said |"
    );
    println!("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for row in &tables.0 {
        println!("{row}");
    }
    println!();
    println!(
        "| events | the events' own bytes (archived lines) | file | in the directory | in the .zip (deflated) |"
    );
    println!("| ---: | ---: | --- | ---: | ---: |");
    for row in &tables.1 {
        println!("{row}");
    }
}
