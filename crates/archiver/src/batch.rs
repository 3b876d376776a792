//! Owns archiving one stream batch exactly once: find what earlier attempts at this run already
//! archived (markers), write the rest (marker first, then the objects), and settle which records
//! Lambda must deliver again, carrying what is archived past that point to the record it resumes
//! at. Must not know the Lambda event's shape, S3's API, or how outcomes are logged.
//!
//! Why no event is archived twice or lost, in short (docs/archive.md has it in full): Lambda
//! delivers a shard's records in order, one batch at a time, and a retry (whole, bisected, after a
//! partial failure, or after a half given up) starts at the first record of the failed batch, at
//! the record after a half, or at the first record reported failed. Each of these is a run start
//! whose markers say which objects hold which of the run's events; an event is archived when such
//! an object holds it: it exists with the SHA-256 the marker lists, the marker its metadata names
//! attests it, it has one version, no void marker names it, and its lines are the records' own.
//! Nothing read from the bucket is believed on sight: a foreign marker or object is
//! `ArchiveConflict` and holds nothing. A listed object that does not exist by its marker's
//! `writeBy` is made void before its events are written again, so it never counts wherever it
//! lands. Before writing, markers are left at the batch's halves and after its end; before
//! reporting failures, at the record Lambda resumes at: wherever Lambda starts next, it finds
//! what is already archived.

use std::collections::{HashMap, HashSet};
use std::io::Read as _;
use std::sync::Mutex;
use std::time::Duration;

use audit_model::archive::{
    LAND_GRACE, MARKER_METADATA, OBJECT_WRITE_TIMEOUT, PeriodLength, STATE_PREFIX,
    WRITE_START_SLACK, void_key,
};
use audit_model::digest::hex;
use audit_model::line::plain_map;
use aws_lc_rs::digest::{SHA256, digest};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::future::join_all;
use serde_json::Value;

use crate::budget::Budget;
use crate::clock::Clock;
use crate::event::{Disposition, Read, StreamRecord};
use crate::marker::{Confirmed, MARKER_VERSION, Marker, RunEntry, marker_key};
use crate::objects::{Encoded, encode, line};
use crate::report::{BatchReport, Conflict, Failure, Step, TamperEvent, WrittenObject};
use audit_aws::s3::{Bucket, Created, NewObject};

mod confirm;
mod write;

use write::{Attempt, Progress, Written, within};

/// Time kept before Lambda's deadline by default: the response, the logs and the metrics.
pub const DEFAULT_DEADLINE_MARGIN: Duration = Duration::from_millis(1000);
/// The longest a marker read or an object check may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts at one run before the archiver gives up on it (each is a failed invocation).
const MAX_ATTEMPTS: u32 = 10_000;
/// The furthest a marker's `writeBy` can be ahead of now: the write bound after the marker, and a
/// minute for clocks that disagree.
const MAX_WRITE_BY_AHEAD_MS: i64 = 60_000
    + (WRITE_START_SLACK.as_millis() + OBJECT_WRITE_TIMEOUT.as_millis() + LAND_GRACE.as_millis())
        as i64;
/// The most an archive object's lines may hold when read back (a batch is at most Lambda's 6 MB
/// payload): what is longer is not the archiver's.
const MAX_OBJECT_TEXT: u64 = 32 * 1024 * 1024;

/// How the archiver works, built once per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub period: PeriodLength,
    pub deadline_margin: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            period: PeriodLength::default(),
            deadline_margin: DEFAULT_DEADLINE_MARGIN,
        }
    }
}

/// What the batch works with.
#[derive(Debug, Clone, Copy)]
pub struct Ports<'a, B, C> {
    pub bucket: &'a B,
    pub clock: &'a C,
}

/// Archives a batch as read, in order: everything up to the first record that cannot be read.
pub async fn archive_batch<B: Bucket, C: Clock>(
    ports: Ports<'_, B, C>,
    settings: &Settings,
    reads: &[Read],
    budget: Budget,
) -> BatchReport {
    let mut report = BatchReport {
        sequence_numbers: reads
            .iter()
            .map(|r| r.sequence_number.clone().unwrap_or_default())
            .collect(),
        ..BatchReport::default()
    };
    let cut = reads
        .iter()
        .position(|r| r.record.is_err())
        .unwrap_or(reads.len());
    if let Some(Read {
        sequence_number,
        record: Err(error),
    }) = reads.get(cut)
    {
        report.failed_from = Some(cut);
        report.failure = Some(Failure::Unarchivable {
            sequence_number: sequence_number.clone().unwrap_or_default(),
            error: error.clone(),
        });
    }
    let records: Vec<&StreamRecord> = reads[..cut]
        .iter()
        .filter_map(|r| r.record.as_ref().ok())
        .collect();
    report.expired = records
        .iter()
        .filter(|r| r.disposition() == Disposition::Expired)
        .count();
    report.oldest_created = records.iter().map(|r| r.created).min();
    if records.is_empty() {
        return report;
    }
    let archiver = Archiver {
        bucket: ports.bucket,
        clock: ports.clock,
        period: settings.period,
        budget,
        found: Mutex::default(),
        repair: false,
    };
    if let Some((index, failure)) = archiver.run(&records, &mut report).await {
        report.failed_from = Some(index);
        report.failure = Some(failure);
    }
    let found = archiver
        .found
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    report.conflicts = found.conflicts;
    report.voided = found.voided;
    report
}

/// Archives one record made by a repair from an item of the table (`repair.rs`) as a run of its
/// own, through the same markers and objects as the stream's: an earlier repair of it is found by
/// its marker, and what is written is marked as a repair (object metadata `repair`, the marker's
/// `repair`).
pub async fn archive_repair<B: Bucket, C: Clock>(
    ports: Ports<'_, B, C>,
    settings: &Settings,
    record: &StreamRecord,
    budget: Budget,
) -> BatchReport {
    let mut report = BatchReport {
        sequence_numbers: vec![record.sequence_number.clone()],
        oldest_created: Some(record.created),
        ..BatchReport::default()
    };
    let archiver = Archiver {
        bucket: ports.bucket,
        clock: ports.clock,
        period: settings.period,
        budget,
        found: Mutex::default(),
        repair: true,
    };
    if let Some((index, failure)) = archiver.run(&[record], &mut report).await {
        report.failed_from = Some(index);
        report.failure = Some(failure);
    }
    let found = archiver
        .found
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    report.conflicts = found.conflicts;
    report.voided = found.voided;
    report
}

struct Archiver<'a, B, C> {
    bucket: &'a B,
    clock: &'a C,
    period: PeriodLength,
    budget: Budget,
    found: Mutex<Found>,
    /// A repair's run (`archive_repair`): its marker and objects say so.
    repair: bool,
}

/// What the batch found on its way, for the report.
#[derive(Default)]
struct Found {
    conflicts: Vec<Conflict>,
    voided: Vec<String>,
}

/// The markers at a run's start.
struct RunMarkers {
    /// The attempt number the next marker at this start gets: one past every key that exists,
    /// foreign ones included.
    next: u32,
    /// The markers of this run (version 2 or later, keyed by its first record), with their keys.
    markers: Vec<(String, Marker)>,
}

/// The delivered records by eventID, for comparing an object's lines with theirs.
struct Delivered<'r> {
    by_id: HashMap<&'r str, &'r StreamRecord>,
}

impl<'r> Delivered<'r> {
    fn new(records: &[&'r StreamRecord]) -> Self {
        Self {
            by_id: records.iter().map(|r| (r.event_id.as_str(), *r)).collect(),
        }
    }
}

fn entry(record: &StreamRecord) -> RunEntry {
    RunEntry(record.sequence_number.clone(), record.event_id.clone())
}

/// The longer of two runs when one begins the other; else `ours` (a marker that disagrees with
/// the stream, logged).
fn merge_runs(known: &[RunEntry], ours: &[RunEntry]) -> Vec<RunEntry> {
    if known.len() > ours.len() && known.starts_with(ours) {
        known.to_vec()
    } else {
        if !ours.starts_with(known) {
            tracing::error!(
                first_sequence_number = ours.first().map(RunEntry::sequence_number),
                "a marker's run differs from the records delivered; the delivered order is kept"
            );
        }
        ours.to_vec()
    }
}

/// The run as the markers know it: the delivered records, extended by a marker's longer run.
fn known_run(delivered: &[RunEntry], markers: &[(String, Marker)]) -> Vec<RunEntry> {
    markers.iter().fold(delivered.to_vec(), |run, (_, marker)| {
        merge_runs(&marker.run, &run)
    })
}

/// A JSON object the archiver creates at `key` (a marker, a void marker), with its SHA-256.
fn json_object(key: String, body: Bytes) -> NewObject {
    let mut sha256 = [0u8; 32];
    sha256.copy_from_slice(digest(&SHA256, &body).as_ref());
    NewObject {
        key,
        body,
        content_type: "application/json",
        sha256,
        metadata: Vec::new(),
    }
}

fn millis(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

fn sha256_hex(body: &[u8]) -> String {
    hex(digest(&SHA256, body).as_ref())
}

impl<B: Bucket, C: Clock> Archiver<'_, B, C> {
    fn found(&self) -> std::sync::MutexGuard<'_, Found> {
        self.found.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Something at `key` is not what it claims: an ERROR naming it, and `ArchiveConflict`.
    fn conflict(&self, key: &str, reason: String) {
        tracing::error!(key, reason = %reason, "archive conflict: not what the archiver wrote");
        self.found().conflicts.push(Conflict {
            key: key.to_owned(),
            reason,
        });
    }

    /// Archives `records` (a run's start, in stream order). Returns the first record Lambda must
    /// deliver again, and why, or `None` when every record is archived (or expired).
    async fn run(
        &self,
        records: &[&StreamRecord],
        report: &mut BatchReport,
    ) -> Option<(usize, Failure)> {
        let delivered: Vec<RunEntry> = records.iter().map(|r| entry(r)).collect();
        let start = &delivered[0];
        let known = match self.markers(start).await {
            Ok(known) => known,
            Err(failure) => return Some((0, failure)),
        };
        let run = known_run(&delivered, &known.markers);
        let by = match self.marker_key(start, known.next) {
            Ok(key) => key,
            Err(failure) => return Some((0, failure)),
        };
        let lookup = Delivered::new(records);
        let mut done = match self.confirm(&known.markers, &lookup, &by).await {
            Ok(done) => done,
            Err(failure) => return Some((0, failure)),
        };

        let covered: HashSet<&str> = done
            .iter()
            .flat_map(|o| o.event_ids.iter().map(String::as_str))
            .collect();
        let mut uncovered = Vec::new();
        for record in records {
            match record.disposition() {
                Disposition::Expired => {}
                _ if covered.contains(record.event_id.as_str()) => report.already_archived += 1,
                Disposition::Tamper => {
                    report.tampered.push(TamperEvent {
                        sequence_number: record.sequence_number.clone(),
                        event_name: record.event_name(),
                        keys: Value::Object(plain_map(&record.keys)).to_string(),
                    });
                    uncovered.push(*record);
                }
                Disposition::Trail => uncovered.push(*record),
            }
        }
        drop(covered);

        let mut failure = None;
        let mut pending = Vec::new();
        let mut write_by = millis(self.clock.now());
        if uncovered.is_empty() {
            if let Err(carry_failure) = self
                .carry_points(&run, records.len(), &done, write_by)
                .await
            {
                return Some((0, carry_failure));
            }
        } else {
            let attempt = Attempt {
                start,
                number: known.next,
                run: &run,
                delivered: records.len(),
                markers: &known.markers,
                lookup: &lookup,
            };
            let mut progress = Progress {
                done: &mut done,
                pending: &mut pending,
                write_by: &mut write_by,
            };
            match self
                .write(&attempt, &mut progress, &uncovered, report)
                .await
            {
                Ok(()) => {}
                Err(Written::Nothing(failure)) => return Some((0, failure)),
                Err(Written::Partly(objects_failure)) => failure = Some(objects_failure),
            }
        }

        let done_ids: HashSet<&str> = done
            .iter()
            .flat_map(|o| o.event_ids.iter().map(String::as_str))
            .collect();
        let first_not_done = records.iter().position(|r| {
            r.disposition() != Disposition::Expired && !done_ids.contains(r.event_id.as_str())
        });
        drop(done_ids);
        let resume = first_not_done.unwrap_or(records.len());
        if resume > 0 && resume < run.len() {
            // Objects written, and those whose write may still land, with events past the point.
            let mut objects = done.clone();
            objects.extend(pending);
            let beyond = within(&objects, &run[resume..]);
            if !beyond.is_empty()
                && let Err(carry_failure) = self.carry(&run[resume..], &beyond, write_by).await
            {
                // Lambda resumes at the run's start, whose markers list every object written.
                return Some((0, carry_failure));
            }
        }
        first_not_done.map(|index| (index, failure.unwrap_or(Failure::Unwritten)))
    }

    /// The markers at the run starting at `start` (attempts 0, 1, … until one is absent). A
    /// marker that does not parse, or is keyed by a record its run does not start with, is
    /// foreign (`ArchiveConflict`) and skipped; one of an earlier version attests nothing.
    async fn markers(&self, start: &RunEntry) -> Result<RunMarkers, Failure> {
        let mut markers = Vec::new();
        for attempt in 0..MAX_ATTEMPTS {
            let key = self.marker_key(start, attempt)?;
            match self.budget.run(READ_TIMEOUT, self.bucket.get(&key)).await {
                Ok(Some(object)) => match Marker::from_json(&object.body) {
                    Ok(marker) if marker.version < MARKER_VERSION => tracing::warn!(
                        marker = %key,
                        version = marker.version,
                        "a marker of an earlier version attests nothing: its events are archived anew"
                    ),
                    Ok(marker) if marker.run.first() != Some(start) => self.conflict(
                        &key,
                        "the marker's run does not start with the record it is keyed by".into(),
                    ),
                    // No write of the archiver's can land later than this after its marker: a
                    // marker that says otherwise would hold the run up for as long as it says.
                    Ok(marker)
                        if marker.write_by > millis(self.clock.now()) + MAX_WRITE_BY_AHEAD_MS =>
                    {
                        self.conflict(
                            &key,
                            "the marker's writeBy is later than any write of it can land".into(),
                        )
                    }
                    Ok(marker) => markers.push((key, marker)),
                    Err(error) => {
                        self.conflict(&key, format!("the marker does not parse: {error}"))
                    }
                },
                Ok(None) => {
                    return Ok(RunMarkers {
                        next: attempt,
                        markers,
                    });
                }
                Err(error) => return Err(Failure::from_step(Step::ReadMarker, error)),
            }
        }
        Err(Failure::BadMarker {
            key: self.marker_key(start, MAX_ATTEMPTS)?,
            error: format!("more than {MAX_ATTEMPTS} attempts at one run"),
        })
    }

    fn marker_key(&self, start: &RunEntry, attempt: u32) -> Result<String, Failure> {
        // Sequence numbers were checked when the records were read.
        marker_key(start, attempt).ok_or_else(|| Failure::BadMarker {
            key: start.sequence_number().to_owned(),
            error: "not a DynamoDB sequence number".into(),
        })
    }
}
