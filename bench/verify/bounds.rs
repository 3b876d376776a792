//! Owns the bounds of the same work: every object version downloaded, `sha256sum` of the
//! files, SHA-256 + gunzip + line count in this process, and the log's extra work. Must not
//! know auditctl.

use super::*;

/// The bounds: every object version's bytes in files, `sha256sum` of them, and SHA-256 + gunzip +
/// line count of the same bytes on this thread.
pub(crate) struct Bound {
    pub(crate) files: usize,
    pub(crate) bytes: u64,
    pub(crate) sha256sum_wall: f64,
    pub(crate) sha256sum_cpu: Duration,
    pub(crate) in_process_cpu: Duration,
    pub(crate) in_process_wall: f64,
}

/// Every version under `trail/`, read with S3's own client (ListObjectVersions, GetObject by
/// version id).
pub(crate) async fn download(moto: &Moto) -> Vec<Bytes> {
    let s3 = moto.s3();
    let mut versions = Vec::new();
    let (mut key_marker, mut version_marker) = (None, None);
    loop {
        let page = s3
            .list_object_versions()
            .bucket(BUCKET)
            .prefix("trail/")
            .set_key_marker(key_marker.take())
            .set_version_id_marker(version_marker.take())
            .send()
            .await
            .expect("list versions");
        assert!(page.delete_markers().is_empty(), "no delete marker");
        versions.extend(page.versions().iter().map(|v| {
            (
                v.key().unwrap_or_default().to_owned(),
                v.version_id().unwrap_or_default().to_owned(),
            )
        }));
        if page.is_truncated() != Some(true) {
            break;
        }
        key_marker = page.next_key_marker().map(str::to_owned);
        version_marker = page.next_version_id_marker().map(str::to_owned);
    }
    futures::stream::iter(versions)
        .map(|(key, version)| {
            let s3 = &s3;
            async move {
                s3.get_object()
                    .bucket(BUCKET)
                    .key(&key)
                    .version_id(&version)
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("{key} {version}: {e}"))
                    .body
                    .collect()
                    .await
                    .expect("a body")
                    .into_bytes()
            }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    // SAFETY: timespec is plain data, filled by clock_gettime.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a local.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

pub(crate) fn bound(bodies: &[Bytes], dir: &Path, events: u64) -> Bound {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("the bound's directory");
    let mut files = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let file = dir.join(format!("{i:06}.jsonl.gz"));
        std::fs::write(&file, body).expect("write an object");
        files.push(file);
    }
    // Twice; the second is reported (the files are in the page cache either way).
    let mut measured = (0.0, Duration::ZERO);
    for _ in 0..2 {
        let started = Instant::now();
        let child = Command::new("sha256sum")
            .args(&files)
            .stdout(Stdio::null())
            .spawn()
            .expect("sha256sum");
        let usage = wait4(child);
        assert_eq!(usage.code, Some(0), "sha256sum failed");
        measured = (started.elapsed().as_secs_f64(), usage.cpu);
    }
    let _ = std::fs::remove_dir_all(dir);

    let (cpu, started) = (thread_cpu(), Instant::now());
    let mut lines = 0u64;
    let mut buffer = vec![0u8; 64 * 1024];
    for body in bodies {
        std::hint::black_box(digest(&SHA256, body));
        let mut decoder = GzDecoder::new(&body[..]);
        loop {
            let n = decoder.read(&mut buffer).expect("gunzip");
            if n == 0 {
                break;
            }
            lines += buffer[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        }
    }
    let in_process_wall = started.elapsed().as_secs_f64();
    let in_process_cpu = thread_cpu().saturating_sub(cpu);
    assert_eq!(lines, events, "the downloaded objects hold every event");
    let (log_cpu, lines_sha256_cpu) = log_work(bodies, events);
    let per_event = |d: Duration| d.as_secs_f64() * 1e6 / events as f64;
    LOG_ROWS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(format!(
            "| {events} | {:.2} µs | {:.2} µs | {:.1}× |",
            per_event(log_cpu),
            per_event(lines_sha256_cpu),
            log_cpu.as_secs_f64() / lines_sha256_cpu.as_secs_f64().max(1e-9)
        ));
    Bound {
        files: files.len(),
        bytes: bodies.iter().map(|b| b.len() as u64).sum(),
        sha256sum_wall: measured.0,
        sha256sum_cpu: measured.1,
        in_process_cpu,
        in_process_wall,
    }
}

/// The sealer's extra CPU for the transparency log over `bodies` (what `seal/log.rs` does with
/// each listed object: gunzip, lines, `leaf_hash`, `TreeEdge::push` with its full tiles), and
/// SHA-256 of the same lines' bytes on the same thread (the physical bound: every byte hashed once).
fn log_work(bodies: &[Bytes], events: u64) -> (Duration, Duration) {
    let cpu = thread_cpu();
    let mut edge = TreeEdge::default();
    let mut tiles = 0usize;
    for body in bodies {
        let mut raw = Vec::new();
        GzDecoder::new(&body[..])
            .read_to_end(&mut raw)
            .expect("gunzip");
        let mut full = Vec::new();
        for line in raw.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            edge.push(leaf_hash(line), &mut full);
        }
        tiles += full.len();
        std::hint::black_box(&full);
    }
    std::hint::black_box(edge.root());
    let log_cpu = thread_cpu().saturating_sub(cpu);
    assert_eq!(edge.size, events, "a leaf per event");
    let raws: Vec<Vec<u8>> = bodies
        .iter()
        .map(|body| {
            let mut raw = Vec::new();
            GzDecoder::new(&body[..])
                .read_to_end(&mut raw)
                .expect("gunzip");
            raw
        })
        .collect();
    let cpu = thread_cpu();
    for raw in &raws {
        for line in raw.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            std::hint::black_box(digest(&SHA256, line));
        }
    }
    let sha = thread_cpu().saturating_sub(cpu);
    eprintln!(
        "  the log's work (gunzip, leaves, {tiles} full tiles): {:.3} s CPU, {:.2} µs/event; SHA-256 of the same lines: {:.3} s, {:.2} µs/event",
        log_cpu.as_secs_f64(),
        log_cpu.as_secs_f64() * 1e6 / events as f64,
        sha.as_secs_f64(),
        sha.as_secs_f64() * 1e6 / events as f64
    );
    (log_cpu, sha)
}
