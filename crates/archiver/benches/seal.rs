//! `make bench-seal`: how fast the sealer seals an hour of archive at a given load, and the
//! highest load whose hours it keeps sealing (its ceiling), for each load, shard count and S3
//! latency (docs/scaling.md has the method and the figures; BENCHMARKS.md the table).
//!
//! What is real: the objects and markers are written by the archiver's own code
//! (`archive_batch`, one stream batch per object, as the stream mapping delivers them) into the
//! in-memory bucket; the sealer's own code (`Sealer::run`) seals them, with its concurrency, its
//! hashing and gunzip, its signatures.
//!
//! What is simulated, and how: time. The sealer runs on tokio's paused clock, so that an hour
//! takes seconds and not hours, and that clock moves by two things only:
//! - every bucket request (and every signature) waits the injected latency on that clock, so
//!   requests in flight together overlap as they do against S3;
//! - the CPU the sealer spends between requests (this thread's CPU time, measured) is charged to
//!   that clock divided by the function's CPU share (memory ÷ 1,769 MB of one vCPU), as Lambda's
//!   quota would stretch it. The in-memory bucket's own CPU is not charged (S3 does that work).
//!
//! An hour at 30,000 events/s is 108 million events: too many to write and keep in memory. So an
//! hour is measured on a sample of its objects (the same events per object, the same shards),
//! sealed in one run with no deadline, and the hour's time is the run's fixed part (an empty
//! period's run) plus the sample's time per object times the hour's objects (sealing reads each
//! object on its own, so its time is linear in them). A sample that is the whole hour is the
//! hour itself. The same sample is sealed again over runs cut short (a few parts each), which
//! gives what resuming costs a run; an hour longer than one run takes as many runs as its time
//! needs, each run giving its time less that cost and the time kept in hand for a part.
//!
//! `cargo bench -p audit-archiver --bench seal [-- --quick]`

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use audit_archiver::batch::{Ports, Settings, archive_batch};
use audit_archiver::budget::Budget;
use audit_archiver::clock::ManualClock;
use audit_archiver::event::{StreamEvent, read_records};
use audit_archiver::seal::{PART_OBJECTS, PART_STEP_TIME, SealReport, Sealer};
use audit_archiver::signer::DigestSigner;
use audit_archiver::signer::memory::MemorySigner;
use audit_aws::error::AwsError;
use audit_aws::s3::memory::MemoryBucket;
use audit_aws::s3::{
    Bucket, Created, NewObject, ObjectInfo, StoredObject, StreamedObject, VersionInfo,
    VersionMarker, VersionPage,
};
use audit_model::archive::{PeriodLength, SEAL_DELAY};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Lambda gives a function one vCPU at 1,769 MB.
const ONE_VCPU_MB: f64 = 1769.0;
/// The archiver's time-out (template.yaml, AuditArchiverFunction).
const TIMEOUT: Duration = Duration::from_secs(120);
/// The archiver's memory size in MB: template.yaml's `ArchiverMemorySize` default, or `--memory MB`.
static MEMORY_MB: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

fn memory_mb() -> f64 {
    *MEMORY_MB.get().expect("the memory size, set first in main")
}

/// `ArchiverMemorySize`'s default in template.yaml (the function's memory as deployed).
fn template_memory_mb() -> f64 {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../template.yaml");
    let text = std::fs::read_to_string(path).expect("template.yaml");
    let mut lines = text.lines().skip_while(|l| *l != "  ArchiverMemorySize:");
    lines
        .next()
        .expect("template.yaml has the parameter ArchiverMemorySize");
    lines
        .take_while(|l| l.starts_with("    ") || l.trim().is_empty())
        .find_map(|l| l.trim().strip_prefix("Default: "))
        .and_then(|v| v.trim().parse().ok())
        .expect("ArchiverMemorySize has a numeric Default")
}
/// The seal schedule's rate (template.yaml, SealDigests): runs an hour.
const RUNS_PER_HOUR: u64 = 12;
/// The stream mapping (template.yaml): records per batch, and the batching window in seconds.
const BATCH_SIZE: u64 = 1000;
const BATCHING_WINDOW: u64 = 60;
/// The sample of an hour: about this many events, and between these many objects.
const SAMPLE_EVENTS: u64 = 60_000;
const SAMPLE_OBJECTS: (u64, u64) = (3 * PART_OBJECTS as u64, 600);
const HOUR: i64 = 3600;
/// The first simulated hour's start (2026-11-22T10:00:00Z).
const FIRST_HOUR: i64 = 1_795_341_600;
const BUCKET: &str = "audit-archive";
const KEY_ARN: &str = "arn:aws:kms:us-east-1:123456789012:key/0b1c2d3e-aaaa-bbbb-cccc-1234567890ab";
const STREAM_ARN: &str =
    "arn:aws:dynamodb:us-east-1:123456789012:table/AuditMessages/stream/2026-11-22T00:00:00.000";

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let mut spec = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `spec` is a valid timespec for the call to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut spec) };
    Duration::new(
        u64::try_from(spec.tv_sec).unwrap_or(0),
        u32::try_from(spec.tv_nsec).unwrap_or(0),
    )
}

/// The simulated clock's two charges: the injected latency per request, and the CPU spent since
/// the last charge divided by the share.
struct Charge {
    latency: Duration,
    share: f64,
    last_cpu: Mutex<Duration>,
    requests: AtomicU64,
    /// CPU charged (before the share), in nanoseconds.
    cpu_ns: AtomicU64,
}

impl Charge {
    fn new(latency: Duration) -> Self {
        Self {
            latency,
            share: memory_mb().min(ONE_VCPU_MB) / ONE_VCPU_MB,
            last_cpu: Mutex::new(thread_cpu()),
            requests: AtomicU64::new(0),
            cpu_ns: AtomicU64::new(0),
        }
    }

    /// The CPU since the last mark, charged to the clock; then the request's latency.
    async fn before(&self) {
        let used = {
            let mut last = self.last_cpu.lock().unwrap_or_else(|p| p.into_inner());
            let now = thread_cpu();
            let used = now.saturating_sub(*last);
            *last = now;
            used
        };
        self.cpu_ns
            .fetch_add(used.as_nanos() as u64, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
        tokio::time::advance(used.div_f64(self.share)).await;
        tokio::time::sleep(self.latency).await;
    }

    /// The stand-in's own CPU is S3's: not charged.
    fn after(&self) {
        *self.last_cpu.lock().unwrap_or_else(|p| p.into_inner()) = thread_cpu();
    }

    async fn around<T>(&self, request: impl Future<Output = T>) -> T {
        self.before().await;
        let answer = request.await;
        self.after();
        answer
    }
}

/// The in-memory bucket behind the charges.
struct Latent<'a> {
    inner: &'a MemoryBucket,
    charge: &'a Charge,
}

impl Bucket for Latent<'_> {
    async fn put_if_absent(&self, object: NewObject) -> Result<Created, AwsError> {
        self.charge.around(self.inner.put_if_absent(object)).await
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, AwsError> {
        self.charge.around(self.inner.head(key)).await
    }

    async fn get(&self, key: &str) -> Result<Option<StoredObject>, AwsError> {
        self.charge.around(self.inner.get(key)).await
    }

    async fn get_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<StoredObject>, AwsError> {
        self.charge
            .around(self.inner.get_version(key, version_id))
            .await
    }

    async fn stream_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<StreamedObject>, AwsError> {
        self.charge
            .around(self.inner.stream_version(key, version_id))
            .await
    }

    async fn head_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<VersionInfo>, AwsError> {
        self.charge
            .around(self.inner.head_version(key, version_id))
            .await
    }

    async fn list_keys(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>, AwsError> {
        self.charge
            .around(self.inner.list_keys(prefix, start_after, max))
            .await
    }

    async fn list_versions_page(
        &self,
        prefix: &str,
        from: Option<VersionMarker>,
    ) -> Result<VersionPage, AwsError> {
        self.charge
            .around(self.inner.list_versions_page(prefix, from))
            .await
    }
}

/// The in-memory key behind the charges (KMS's Sign is a request too).
struct LatentSigner<'a> {
    inner: &'a MemorySigner,
    charge: &'a Charge,
}

impl DigestSigner for LatentSigner<'_> {
    fn key_arn(&self) -> &str {
        self.inner.arn()
    }

    async fn sign(&self, message: &[u8]) -> Result<Vec<u8>, AwsError> {
        self.charge.around(async { self.inner.sign(message) }).await
    }

    async fn public_key(&self) -> Result<Vec<u8>, AwsError> {
        self.charge
            .around(async { Ok(self.inner.public_key().der) })
            .await
    }
}

/// One configuration: load, shards, latency.
#[derive(Debug, Clone, Copy)]
struct Load {
    rate: u64,
    shards: u64,
    latency_ms: u64,
}

impl Load {
    /// Events in one archive object: a shard's batch (the window's records, at most a batch).
    fn per_object(&self) -> u64 {
        let per_shard = self.rate as f64 / self.shards as f64;
        ((per_shard * BATCHING_WINDOW as f64).round() as u64).clamp(1, BATCH_SIZE)
    }

    /// Objects in one hour.
    fn objects(&self) -> u64 {
        (self.rate * HOUR as u64).div_ceil(self.per_object())
    }
}

/// The receiver's item for event `i`, in DynamoDB's JSON (about 0.7 KB, varied).
fn item(i: u64, rng: &mut fastrand::Rng) -> Map<String, Value> {
    let id = format!("{:032x}", rng.u128(..));
    let time = format!("2026-11-22T10:{:02}:{:02}.000Z", (i / 60) % 60, i % 60);
    let actor = format!("user-{}", rng.u32(..500));
    let resource = format!("invoice/{}", rng.u32(..100_000));
    let value = json!({
        "messageId": {"S": id},
        "auditTime": {"S": time},
        "auditBucket": {"S": format!("2026-11-22#{:02}", rng.u32(..16))},
        "auditText": {"S": format!("{actor} performed invoice.read on {resource} from the billing console (session {:016x})", rng.u64(..))},
        "actor": {"S": actor},
        "action": {"S": "invoice.read"},
        "resource": {"S": resource},
        "outcome": {"S": "success"},
        "sourceIp": {"S": format!("10.{}.{}.{}", rng.u8(..), rng.u8(..), rng.u8(..))},
        "receiveCount": {"N": "1"},
        "sqsMessageId": {"S": format!("{:032x}", rng.u128(..))},
        "receivedAt": {"S": time},
        "extra": {"M": {"amount": {"N": format!("{}.{:02}", rng.u32(..10_000), rng.u32(..100))}}}
    });
    value.as_object().cloned().unwrap_or_default()
}

/// A stream batch of `count` INSERTs from `first` (sequence numbers unique across shards).
fn records(first: u64, count: u64, rng: &mut fastrand::Rng) -> Vec<Value> {
    (first..first + count)
        .map(|seq| {
            let image = item(seq, rng);
            json!({
                "eventID": format!("{:032x}", seq.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                "eventName": "INSERT",
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": {
                    "ApproximateCreationDateTime": FIRST_HOUR,
                    "Keys": {"messageId": image["messageId"], "auditTime": image["auditTime"]},
                    "NewImage": image,
                    "SequenceNumber": format!("{}", 4_421_584_500_000_000_017_000_000_000u128 + u128::from(seq)),
                    "SizeBytes": 700,
                    "StreamViewType": "NEW_AND_OLD_IMAGES"
                },
                "eventSourceARN": STREAM_ARN
            })
        })
        .collect()
}

/// Writes `objects` objects of `per_object` events into the hour from `start`, each one stream
/// batch archived by the archiver, spread over the hour; `next_seq` is the stream's position.
async fn write_hour(
    bucket: &MemoryBucket,
    start: i64,
    objects: u64,
    per_object: u64,
    next_seq: &mut u64,
) {
    let clock = ManualClock::new(DateTime::from_timestamp(start, 0).unwrap_or_default());
    let mut rng = fastrand::Rng::with_seed(*next_seq);
    for n in 0..objects {
        let offset = 1 + (n * (HOUR as u64 - 30)) / objects.max(1);
        clock.set(DateTime::from_timestamp(start + offset as i64, 0).unwrap_or_default());
        let reads = read_records(StreamEvent {
            records: records(*next_seq, per_object, &mut rng),
        });
        *next_seq += per_object;
        let report = archive_batch(
            Ports {
                bucket,
                clock: &clock,
            },
            &Settings {
                period: hour(),
                ..Settings::default()
            },
            &reads,
            Budget::unlimited(),
        )
        .await;
        assert_eq!(report.archived as u64, per_object, "{:?}", report.failure);
    }
}

fn hour() -> PeriodLength {
    PeriodLength::new(HOUR as u32).expect("an hour")
}

/// What one sealing run cost on the simulated clock.
struct Measured {
    seconds: f64,
    requests: u64,
    cpu_seconds: f64,
    report: SealReport,
}

/// One run of the sealer at the time the hour from `start` is sealable, with `budget`.
async fn seal_once(
    bucket: &MemoryBucket,
    signer: &MemorySigner,
    latency: Duration,
    start: i64,
    budget: Budget,
) -> Measured {
    let charge = Charge::new(latency);
    let latent = Latent {
        inner: bucket,
        charge: &charge,
    };
    let signing = LatentSigner {
        inner: signer,
        charge: &charge,
    };
    let now = DateTime::<Utc>::from_timestamp(start + HOUR + SEAL_DELAY.as_secs() as i64 + 1, 0)
        .unwrap_or_default();
    let began = tokio::time::Instant::now();
    let report = Sealer {
        bucket: &latent,
        signer: &signing,
        bucket_name: BUCKET,
        period: hour(),
    }
    .run(now, budget)
    .await;
    charge.before().await; // the CPU after the last request
    Measured {
        seconds: (began.elapsed() - latency).as_secs_f64(),
        requests: charge.requests.load(Ordering::Relaxed) - 1,
        cpu_seconds: charge.cpu_ns.load(Ordering::Relaxed) as f64 / 1e9,
        report,
    }
}

/// One configuration measured: the hour's time in one run, and what it is made of.
struct Outcome {
    sample: u64,
    hour_seconds: f64,
    fixed_seconds: f64,
    requests_per_object: f64,
    cpu_us_per_event: f64,
    /// What a run that goes on from another's parts spends before its first new part.
    resume_seconds: f64,
    /// Runs the sample took when cut short.
    cut_runs: u64,
}

async fn measure(load: Load) -> Outcome {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let latency = Duration::from_millis(load.latency_ms);
    let per_object = load.per_object();
    let sample = (SAMPLE_EVENTS / per_object)
        .clamp(SAMPLE_OBJECTS.0, SAMPLE_OBJECTS.1)
        .min(load.objects());
    let mut seq = 0;
    // The chain's start (one object), the sampled hour, the same sample again (sealed over runs
    // cut short), and an empty hour after them.
    write_hour(&bucket, FIRST_HOUR, 1, per_object, &mut seq).await;
    write_hour(&bucket, FIRST_HOUR + HOUR, sample, per_object, &mut seq).await;
    write_hour(&bucket, FIRST_HOUR + 2 * HOUR, sample, per_object, &mut seq).await;
    let unlimited = Budget::unlimited();
    let first = seal_once(&bucket, &signer, latency, FIRST_HOUR, unlimited).await;
    assert_eq!(first.report.failure, None);
    let sampled = seal_once(&bucket, &signer, latency, FIRST_HOUR + HOUR, unlimited).await;
    assert_eq!(sampled.report.failure, None);
    assert_eq!(
        sampled.report.sealed.first().map(|s| s.objects as u64),
        Some(sample),
        "every object of the sample sealed"
    );
    // Runs of 11 s: past the 10 s kept in hand for a period, and 5 s for a part, each seals
    // about 6 s of parts.
    let (mut cut_seconds, mut cut_runs) = (0.0, 0);
    loop {
        cut_runs += 1;
        assert!(cut_runs < 100, "the sample sealed over runs");
        let run = Duration::from_secs(11);
        let budget = Budget {
            deadline: Some(tokio::time::Instant::now() + run),
            margin: Duration::ZERO,
        };
        let cut = seal_once(&bucket, &signer, latency, FIRST_HOUR + 2 * HOUR, budget).await;
        cut_seconds += cut.seconds;
        if cut.report.failure.is_none() {
            break;
        }
    }
    let resume_seconds = (cut_seconds - sampled.seconds).max(0.0) / (cut_runs.max(2) - 1) as f64;
    let empty = seal_once(&bucket, &signer, latency, FIRST_HOUR + 3 * HOUR, unlimited).await;
    assert_eq!(empty.report.sealed.len(), 1, "the empty hour sealed");
    let per_object_seconds = (sampled.seconds - empty.seconds).max(0.0) / sample as f64;
    Outcome {
        sample,
        hour_seconds: empty.seconds + per_object_seconds * load.objects() as f64,
        fixed_seconds: empty.seconds,
        requests_per_object: (sampled.requests.saturating_sub(empty.requests)) as f64
            / sample as f64,
        cpu_us_per_event: (sampled.cpu_seconds - empty.cpu_seconds).max(0.0) * 1e6
            / (sample * per_object) as f64,
        resume_seconds,
        cut_runs,
    }
}

/// What the sealer gives an hour: sealed in parts over as many runs as its time needs (the
/// first run has the whole run, each next one its time less what resuming costs; every run keeps
/// a part's time in hand). It keeps up when an hour takes at most the runs an hour has; its
/// ceiling at this object size is the load whose hour fills them.
fn verdict(load: Load, outcome: &Outcome) -> (String, u64, u64) {
    let margin = Settings::default().deadline_margin;
    let run = (TIMEOUT - margin).as_secs_f64();
    let first = run - PART_STEP_TIME.as_secs_f64();
    let next = (first - outcome.resume_seconds).max(f64::EPSILON);
    let work = outcome.hour_seconds;
    let runs = if work <= run {
        1
    } else {
        1 + ((work - first) / next).ceil() as u64
    };
    let time = work + (runs - 1) as f64 * outcome.resume_seconds;
    let variable = (outcome.hour_seconds - outcome.fixed_seconds).max(f64::EPSILON);
    let available = first + (RUNS_PER_HOUR - 1) as f64 * next;
    let ceiling = load.rate as f64 * (available - outcome.fixed_seconds).max(0.0) / variable;
    (format!("{time:.1}"), runs, ceiling as u64)
}

/// The periods ended and not sealed yet `hours` hours into a steady load whose hour takes
/// `runs` runs to seal: sealing starts when the first hour ends, a run every 1/RUNS_PER_HOUR of
/// an hour; the hour that has just ended is always one of them.
fn lag_after_hours(hours: u64, runs: u64) -> u64 {
    let available = (hours - 1) * RUNS_PER_HOUR;
    let sealed = (available / runs.max(1)).min(hours - 1);
    hours - sealed
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let memory = match args.iter().position(|a| a == "--memory") {
        Some(i) => args
            .get(i + 1)
            .and_then(|m| m.parse().ok())
            .expect("--memory MB: a number of MB"),
        None => template_memory_mb(),
    };
    MEMORY_MB.set(memory).expect("set once");
    let rates: &[u64] = if quick {
        &[1_000, 10_000]
    } else {
        &[100, 1_000, 10_000, 30_000]
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    eprintln!(
        "# {memory} MB ({:.1} % of a vCPU; one vCPU at most: the sealer's CPU work is on one thread), {} s time-out, {RUNS_PER_HOUR} runs an hour; batches of {BATCH_SIZE}, {BATCHING_WINDOW} s window",
        100.0 * memory.min(ONE_VCPU_MB) / ONE_VCPU_MB,
        TIMEOUT.as_secs()
    );
    for &shards in &[4u64, 64] {
        for &rate in rates {
            let load = Load {
                rate,
                shards,
                latency_ms: 20,
            };
            let outcome = runtime.block_on(measure(load));
            let (time, runs, ceiling) = verdict(load, &outcome);
            println!(
                "seal: {rate} events/s, {shards} shards, {} ms/request: hour sealed in {time} s over {runs} runs; ceiling {ceiling} events/s",
                load.latency_ms
            );
            eprintln!(
                "#   lag after 6 simulated hours: {} periods ended and not sealed yet",
                lag_after_hours(6, runs)
            );
            eprintln!(
                "#   {} objects of {} events an hour (sample {}); its work {:.1} s ({:.1} s fixed); {:.2} requests an object; {:.2} µs CPU an event; a resumed run spends {:.1} s before its first new part (sample over {} cut runs)",
                load.objects(),
                load.per_object(),
                outcome.sample,
                outcome.hour_seconds,
                outcome.fixed_seconds,
                outcome.requests_per_object,
                outcome.cpu_us_per_event,
                outcome.resume_seconds,
                outcome.cut_runs
            );
        }
    }
}
