//! `auditctl export --evidence` and `auditctl check-proof BUNDLE` against moto (docs/archive.md
//! "Evidence for auditors"): given events written by the function, two periods sealed with the
//! log as prove.rs seals them and a third archived but not sealed yet, when a bundle is
//! exported, then check-proof accepts it offline; every change to its events, their order, its
//! checkpoint or its cosignatures makes check-proof exit 1 naming the problem; a range reaching
//! into the unsealed period lists its events as unproven; the export is an access event.

use std::path::{Path, PathBuf};

use audit_model::archive::{ObjectKey, ObjectKind, Period};
use audit_model::evidence::Manifest;
use audit_model::note::origin;
use audit_trail::item::TrailItem;
use chrono::{DateTime, SecondsFormat};

use crate::access::assert_access_event;
use crate::dlq::queues;
use crate::harness::*;
use crate::prove::{BUCKET, Stack, length, objects_read, text};
use crate::ui::Ui;

fn at(seconds: i64) -> String {
    DateTime::from_timestamp(seconds, 0)
        .unwrap()
        .to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Archives `items` in one object of `period` without sealing it (the sealer has not run yet).
async fn archive_only(stack: &Stack, period: Period, items: &[TrailItem], sequence: u64) {
    let when = DateTime::from_timestamp(period.start + 1, 0).unwrap();
    let object = ObjectKey::new(ObjectKind::Trail, when, length(), &sequence.to_string(), 0)
        .unwrap()
        .to_string();
    let lines: Vec<String> = items.iter().map(TrailItem::line).collect();
    stack.put(&object, gzip(&lines)).await;
}

/// A copy of the bundle `from`, for one change.
fn copy(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to.join("checkpoints")).unwrap();
    for entry in walk(from) {
        let relative = entry.strip_prefix(from).unwrap();
        std::fs::copy(&entry, to.join(relative)).unwrap();
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// check-proof on `bundle`, offline (no AWS configuration): its exit code and stdout.
fn check(bundle: &Path, witness: Option<&str>) -> (i32, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_auditctl"));
    command
        .env_clear()
        .args(["check-proof", &bundle.to_string_lossy()])
        .args([
            "--public-key",
            &bundle.join("digest-key.pem").to_string_lossy(),
        ])
        .args(["--origin", &origin(BUCKET)]);
    if let Some(key) = witness {
        command.args(["--witness-key", key]);
    }
    let output = command.output().unwrap();
    (output.status.code().unwrap(), text(&output))
}

/// docs/operations.md's bundle check in Python, exactly as printed there, on `bundle`: its exit
/// code and what it printed.
fn documented_script(bundle: &Path, witness: Option<&str>) -> (i32, String) {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md"),
    )
    .unwrap();
    let marker = "<!-- evidence-bundle:python -->\n```python\n";
    let start = doc
        .find(marker)
        .expect("docs/operations.md lost its bundle check (marker evidence-bundle:python)")
        + marker.len();
    let end = doc[start..].find("\n```").unwrap() + start;
    let script = bundle.with_file_name("check_bundle.py");
    std::fs::write(&script, format!("{}\n", &doc[start..end])).unwrap();
    let output = std::process::Command::new(crate::check_proof::python())
        .env_clear()
        .arg(&script)
        .arg(bundle)
        .arg(bundle.join("digest-key.pem"))
        .arg(origin(BUCKET))
        .args(witness)
        .output()
        .unwrap();
    (output.status.code().unwrap(), text(&output))
}

/// check-proof on a packed bundle, with the key kept beside it.
fn check_file(bundle: &Path, key: &Path) -> (i32, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_auditctl"))
        .env_clear()
        .args(["check-proof", &bundle.to_string_lossy()])
        .args(["--public-key", &key.to_string_lossy()])
        .args(["--origin", &origin(BUCKET)])
        .output()
        .unwrap();
    (output.status.code().unwrap(), text(&output))
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::write(
        path,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
}

/// `auditctl export --from FROM --to TO [EXTRA] --evidence BUNDLE --no-audit-event`.
fn export_range(
    stack: &Stack,
    (from, to): (i64, i64),
    extra: &[&str],
    bundle: &Path,
) -> std::process::Output {
    let (from, to, bundle) = (at(from), at(to), bundle.to_string_lossy());
    let mut args = vec!["export", "--from", &from, "--to", &to];
    args.extend_from_slice(extra);
    args.extend(["--evidence", &bundle, "--no-audit-event"]);
    stack.run(&args, &[])
}

fn manifest(bundle: &Path) -> Manifest {
    serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap()
}

/// Changes `file` of a copy of `bundle` with `change`, then checks it: exit 1, naming `named`.
fn refused(
    bundle: &Path,
    name: &str,
    file: &str,
    witness: Option<&str>,
    change: impl FnOnce(&mut Vec<String>),
    named: &str,
) {
    let changed = bundle.with_file_name(name);
    copy(bundle, &changed);
    let mut content = lines(&changed.join(file));
    change(&mut content);
    write_lines(&changed.join(file), &content);
    let (code, said) = check(&changed, witness);
    assert_eq!(code, 1, "{name}: {said}");
    assert!(said.contains(named), "{name}: want {named:?} in {said}");
    let _ = std::fs::remove_dir_all(&changed);
}

#[tokio::test]
async fn an_exported_bundle_checks_offline_and_every_change_to_it_is_named() {
    let mut stack = Stack::new().await;
    let (items, received) = stack.write_events_received().await;
    let first = length().period_of(received);
    let (second, third) = (first.next(), first.next().next());
    stack.archive_and_seal(first, &items[..15], 100).await;
    stack.archive_and_seal(second, &items[15..30], 200).await;
    archive_only(&stack, third, &items[30..], 300).await;
    stack.cosign(stack.sizes[1]).await;
    let q = queues(&stack.moto).await;
    let access: Vec<(&'static str, String)> = q
        .env()
        .into_iter()
        .map(|(k, v)| (k, v.to_owned()))
        .collect();
    let dir = std::env::temp_dir().join(format!("auditctl-evidence-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let vkey = stack.witness.1.vkey();

    // The second period alone, whole: every event proven, and complete.
    let bundle = dir.join("second");
    let b = bundle.to_string_lossy().into_owned();
    let from = at(second.start);
    let output = stack.run(
        &[
            "export",
            "--from",
            &from,
            "--to",
            &from,
            "--evidence",
            &b,
            "--witness-key",
            &vkey,
        ],
        &access,
    );
    ok(output);
    let (_, body) = q.one_access_event().await;
    let arguments = assert_access_event(&body, "auditctl.export", BUCKET);
    assert_eq!(arguments["evidence"], b.as_str(), "{arguments}");
    let written = manifest(&bundle);
    assert_eq!((written.events, written.unproven_events), (15, 0));
    assert_eq!(written.tree_size, stack.sizes[1]);
    let claim = written.completeness.clone().expect("a complete range");
    assert_eq!((claim.start, claim.end), (15, 30));
    assert!(written.made_by.contains("arn:aws"), "{written:?}");
    assert_eq!(written.key_arn, stack.key);
    let events = lines(&bundle.join("events.jsonl"));
    let want: Vec<String> = items[15..30].iter().map(TrailItem::line).collect();
    assert_eq!(events, want, "each event as its archived line");
    let (code, said) = check(&bundle, Some(&vkey));
    assert_eq!(code, 0, "{said}");
    assert!(said.starts_with("OK: 15 event(s)"), "{said}");
    assert!(
        said.contains("complete: every leaf from 15 to 30"),
        "{said}"
    );
    assert!(said.contains(&stack.witness.1.name), "{said}");

    // Each change is refused, by name.
    refused(
        &bundle,
        "byte",
        "events.jsonl",
        None,
        |l| l[3] = l[3].replacen("paid", "paiD", 1),
        "events.jsonl line 4 is not the line its proof proves",
    );
    refused(
        &bundle,
        "removed",
        "events.jsonl",
        None,
        |l| {
            l.remove(7);
        },
        "events.jsonl has 14 lines",
    );
    refused(
        &bundle,
        "added",
        "events.jsonl",
        None,
        |l| l.push(l[0].clone()),
        "events.jsonl has 16 lines",
    );
    refused(
        &bundle,
        "reordered",
        "events.jsonl",
        None,
        |l| l.swap(2, 3),
        "events.jsonl line 3 is not the line its proof proves",
    );
    refused(
        &bundle,
        "checkpoint",
        "checkpoint.txt",
        None,
        |l| l[1] = "31".to_owned(),
        "checkpoint.txt",
    );
    refused(
        &bundle,
        "cosignature",
        "checkpoint.txt",
        Some(&vkey),
        |l| {
            l.pop();
        },
        "no cosignature by the witness",
    );
    // An event and its proof removed together, the manifest's count made to match: the
    // completeness claim no longer holds.
    let removed = dir.join("removed-both");
    copy(&bundle, &removed);
    for file in ["events.jsonl", "proofs.jsonl"] {
        let mut content = lines(&removed.join(file));
        content.remove(7);
        write_lines(&removed.join(file), &content);
    }
    let mut m = manifest(&removed);
    m.events = 14;
    std::fs::write(
        removed.join("manifest.json"),
        serde_json::to_vec(&m).unwrap(),
    )
    .unwrap();
    let (code, said) = check(&removed, None);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("FAILED: completeness:"), "{said}");
    // The docs' Python check accepts and refuses the same bundles.
    let (code, said) = documented_script(&bundle, Some(&vkey));
    assert_eq!(code, 0, "{said}");
    assert!(
        said.starts_with("OK: 15 events in the tree of 30"),
        "{said}"
    );
    assert!(said.contains("every leaf from 15 to 30"), "{said}");
    let (code, said) = documented_script(&removed, None);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("FAILED: completeness:"), "{said}");
    let changed = dir.join("changed-byte");
    copy(&bundle, &changed);
    let mut content = lines(&changed.join("events.jsonl"));
    content[3] = content[3].replacen("paid", "paiD", 1);
    write_lines(&changed.join("events.jsonl"), &content);
    let (code, said) = documented_script(&changed, None);
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("FAILED: events.jsonl line 4 is not the line its proof proves"),
        "{said}"
    );
    let mut checkpoint = lines(&changed.join("checkpoint.txt"));
    checkpoint.pop();
    copy(&bundle, &changed);
    write_lines(&changed.join("checkpoint.txt"), &checkpoint);
    let (code, said) = documented_script(&changed, Some(&vkey));
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("no cosignature by"), "{said}");
    // Reordered with their proofs: out of log order.
    let reordered = dir.join("reordered-both");
    copy(&bundle, &reordered);
    for file in ["events.jsonl", "proofs.jsonl"] {
        let mut content = lines(&reordered.join(file));
        content.swap(2, 3);
        write_lines(&reordered.join(file), &content);
    }
    let (code, said) = check(&reordered, None);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("does not follow leaf"), "{said}");

    // The three periods: the third is not sealed, its events listed as unproven; no
    // completeness claimed.
    let all = dir.join("all");
    let output = export_range(&stack, (first.start, third.start), &[], &all);
    ok(output);
    let written = manifest(&all);
    assert_eq!((written.events, written.unproven_events), (30, 10));
    assert!(written.completeness.is_none());
    assert_eq!(written.periods[2].state, "not sealed");
    let listed: Vec<&str> = written
        .unproven
        .iter()
        .map(|u| u.message_id.as_str())
        .collect();
    let want: Vec<&str> = items[30..].iter().map(|i| i.message_id.as_str()).collect();
    assert_eq!(listed, want);
    assert_eq!(lines(&all.join("unproven.jsonl")).len(), 10);
    assert!(
        written
            .not_proven
            .iter()
            .any(|n| n.contains("not sealed yet")),
        "{written:?}"
    );
    let (code, said) = check(&all, None);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("inclusion only"), "{said}");
    assert!(said.contains("10 event(s) listed as unproven"), "{said}");

    // With a filter, only inclusion.
    let filtered = dir.join("filtered");
    let both = (first.start, second.start);
    let output = export_range(&stack, both, &["--action", "invoice.pay"], &filtered);
    ok(output);
    let written = manifest(&filtered);
    assert_eq!(written.events, 30);
    assert!(written.completeness.is_none());
    assert!(
        written
            .not_proven
            .iter()
            .any(|n| n.contains("filters were given")),
        "{written:?}"
    );
    assert_eq!(check(&filtered, None).0, 0);
    // The first two periods whole: complete from leaf 0 (no checkpoint before it needed).
    let whole = dir.join("whole");
    let output = export_range(&stack, both, &[], &whole);
    let err = stderr(&output);
    ok(output);
    // Each index, archive object, checkpoint and tile read once: fewer objects than events.
    assert!(objects_read(&err) < 20, "{err}");
    let claim = manifest(&whole).completeness.expect("complete");
    assert_eq!((claim.start, claim.end), (0, 30));
    assert_eq!(check(&whole, None).0, 0);
    // The same as a .tar.gz: the same files, checked as they are.
    let packed = dir.join("whole.tar.gz");
    ok(export_range(&stack, both, &[], &packed));
    let mut names = Vec::new();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(
        std::fs::File::open(&packed).unwrap(),
    ));
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        if name == "events.jsonl" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            assert_eq!(
                text,
                std::fs::read_to_string(whole.join("events.jsonl")).unwrap()
            );
        }
        names.push(name);
    }
    names.sort();
    assert_eq!(
        names,
        [
            "checkpoint.txt",
            "checkpoints/30.txt",
            "digest-key.pem",
            "events.jsonl",
            "manifest.json",
            "proofs.jsonl",
            "unproven.jsonl"
        ]
    );
    let (code, said) = check_file(&packed, &whole.join("digest-key.pem"));
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("complete: every leaf from 0 to 30"), "{said}");

    // The same as a .zip: the same files, each byte as in the directory, checked as it is.
    let zipped = dir.join("whole.zip");
    ok(export_range(&stack, both, &[], &zipped));
    let files = unzip(&zipped);
    let mut zip_names: Vec<&String> = files.keys().collect();
    zip_names.sort();
    assert_eq!(zip_names, names.iter().collect::<Vec<_>>());
    for name in ["events.jsonl", "proofs.jsonl", "digest-key.pem"] {
        assert_eq!(
            files[name],
            std::fs::read(whole.join(name)).unwrap(),
            "{name}"
        );
    }
    let (code, said) = check_file(&zipped, &whole.join("digest-key.pem"));
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("complete: every leaf from 0 to 30"), "{said}");
    // One byte of an event changed inside the .zip: refused, by name.
    let changed = dir.join("changed.zip");
    let mut files = files;
    let events = String::from_utf8(files["events.jsonl"].clone()).unwrap();
    let first_line = events.lines().next().unwrap();
    let altered = first_line.replacen("paid", "paiD", 1);
    assert_ne!(altered, first_line);
    files.insert(
        "events.jsonl".to_owned(),
        events.replacen(first_line, &altered, 1).into_bytes(),
    );
    write_zip(&changed, &files);
    let (code, said) = check_file(&changed, &whole.join("digest-key.pem"));
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("events.jsonl line 1 is not the line its proof proves"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A .zip's files by name.
/// The viewer's "Evidence bundle" of a search: refused without the session; with it, the .zip
/// `auditctl export --evidence x.zip` makes of the same range (the same files, the manifest but
/// for when and by whom), which check-proof accepts, and an access event recorded.
#[tokio::test]
async fn the_viewers_evidence_bundle_of_a_search_is_the_exports_zip_and_checks() {
    let mut stack = Stack::new().await;
    let (items, received) = stack.write_events_received().await;
    let first = length().period_of(received);
    let second = first.next();
    stack.archive_and_seal(first, &items[..15], 100).await;
    stack.archive_and_seal(second, &items[15..30], 200).await;
    let q = queues(&stack.moto).await;
    let mut env: Vec<(&str, String)> = stack.env();
    env.extend(q.env().into_iter().map(|(k, v)| (k, v.to_owned())));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let ui = Ui::start(&stack.moto, &env);
    let dir = std::env::temp_dir().join(format!("auditctl-ui-evidence-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = format!(
        "/evidence.zip?from={}&to={}",
        at(first.start),
        at(second.start)
    );

    let refused = ui.get(&path, None).await;
    assert_ne!(refused.status, 200, "{}", refused.text());
    assert_ne!(refused.header("content-type"), Some("application/zip"));

    let cookie = ui.open().await;
    let search = path.replacen("/evidence.zip", "/", 1);
    let page = ui.get(&search, Some(&cookie)).await.text();
    assert!(page.contains("evidence.zip?"), "the link: {page}");
    let answer = ui.get(&path, Some(&cookie)).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.header("content-type"), Some("application/zip"));
    assert!(
        answer
            .header("content-disposition")
            .is_some_and(|d| d.contains("filename=\"audit-evidence.zip\"")),
        "{:?}",
        answer.header("content-disposition")
    );
    let zipped = dir.join("viewer.zip");
    std::fs::write(&zipped, answer.bytes()).unwrap();
    let viewer = unzip(&zipped);
    let key = dir.join("digest-key.pem");
    std::fs::write(&key, &viewer["digest-key.pem"]).unwrap();
    let (code, said) = check_file(&zipped, &key);
    assert_eq!(code, 0, "{said}");
    assert!(said.starts_with("OK: 30 event(s)"), "{said}");
    assert!(said.contains("complete: every leaf from 0 to 30"), "{said}");
    let bodies = q.access_events().await;
    let recorded = bodies
        .iter()
        .find(|b| b["action"] == "auditctl.ui.export")
        .expect("the bundle's access event");
    let arguments = assert_access_event(recorded, "auditctl.ui.export", BUCKET);
    assert_eq!(arguments["evidence"], "audit-evidence.zip", "{arguments}");

    // The command line's bundle of the same range: the same files and manifest.
    let exported = dir.join("export.zip");
    ok(export_range(
        &stack,
        (first.start, second.start),
        &[],
        &exported,
    ));
    let exported = unzip(&exported);
    assert_eq!(
        viewer.keys().collect::<Vec<_>>(),
        exported.keys().collect::<Vec<_>>()
    );
    let unmade = |bytes: &[u8]| {
        let mut manifest: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        let made_by = manifest["madeBy"].take();
        manifest["madeAt"].take();
        (manifest, made_by)
    };
    let (manifest, made_by) = unmade(&viewer["manifest.json"]);
    assert_eq!(manifest, unmade(&exported["manifest.json"]).0);
    assert!(made_by.as_str().unwrap().contains("arn:aws"), "{made_by}");
    for (name, bytes) in &viewer {
        if name != "manifest.json" {
            assert_eq!(bytes, &exported[name], "{name}");
        }
    }
}

fn unzip(path: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    (0..archive.len())
        .map(|i| {
            let mut entry = archive.by_index(i).unwrap();
            let name = entry.name().unwrap().into_owned();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
            (name, bytes)
        })
        .collect()
}

/// `files` written as a .zip at `path`.
fn write_zip(path: &Path, files: &std::collections::BTreeMap<String, Vec<u8>>) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, bytes) in files {
        zip.start_file(name.as_str(), zip::write::SimpleFileOptions::default())
            .unwrap();
        std::io::Write::write_all(&mut zip, bytes).unwrap();
    }
    zip.finish().unwrap();
}
