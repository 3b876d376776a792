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

/// An object as one marker lists it.
#[derive(Debug, Clone)]
struct Listing {
    sha256: String,
    /// Its events in stream order: the object's last lines.
    event_ids: Vec<String>,
    write_by: i64,
}

/// What the check of a listed object found.
enum Checked {
    /// It exists with the bytes of some of its listings, its marker attests it, and its lines
    /// of delivered records are theirs: the events of those listings are archived in it.
    Holds(Confirmed),
    /// It does not exist.
    Missing,
    /// A void marker names it: it never counts.
    Void,
    /// It is not what its listings say (the reason).
    Conflict(String),
}

/// Whether a void marker's body says the sealer wrote it (`by` = `seal`).
fn voided_by_seal(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("by").and_then(Value::as_str).map(str::to_owned))
        .is_some_and(|by| by == crate::seal::VOIDED_BY_SEAL)
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

/// Every object the markers list, in the order first listed, with each marker's listing of it.
fn listings(markers: &[(String, Marker)]) -> Vec<(String, Vec<Listing>)> {
    let mut out: Vec<(String, Vec<Listing>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (_, marker) in markers {
        for object in &marker.objects {
            let listing = Listing {
                sha256: object.sha256.clone(),
                event_ids: marker.event_ids(object),
                write_by: marker.write_by,
            };
            match index.get(&object.key) {
                Some(&i) => out[i].1.push(listing),
                None => {
                    index.insert(object.key.clone(), out.len());
                    out.push((object.key.clone(), vec![listing]));
                }
            }
        }
    }
    out
}

fn millis(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

fn sha256_hex(body: &[u8]) -> String {
    hex(digest(&SHA256, body).as_ref())
}

/// `objects` cut to their events in `run` (objects left with none dropped).
fn within(objects: &[Confirmed], run: &[RunEntry]) -> Vec<Confirmed> {
    let ids: HashSet<&str> = run.iter().map(RunEntry::event_id).collect();
    objects
        .iter()
        .map(|o| Confirmed {
            key: o.key.clone(),
            event_ids: o
                .event_ids
                .iter()
                .filter(|id| ids.contains(id.as_str()))
                .cloned()
                .collect(),
            sha256: o.sha256.clone(),
        })
        .filter(|o| !o.event_ids.is_empty())
        .collect()
}

/// Where Lambda may start a batch inside a delivered batch of `delivered` records of `run`: at
/// either half of a bisection (Lambda does not say how it rounds), and after the batch's last
/// record when the run goes on past it.
fn carry_points(delivered: usize, run: usize) -> Vec<usize> {
    let mut points = vec![delivered / 2, delivered.div_ceil(2), delivered];
    points.retain(|&p| p > 0 && p < run);
    points.dedup();
    points
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

    /// The objects the markers list that hold their events (checked by `check`). One that does
    /// not exist is waited for until its marker's `writeBy` when the deadline allows; after it,
    /// it is made void (`by`: the marker key of the attempt that archives its events anew), so
    /// that it never counts wherever it lands.
    async fn confirm(
        &self,
        markers: &[(String, Marker)],
        lookup: &Delivered<'_>,
        by: &str,
    ) -> Result<Vec<Confirmed>, Failure> {
        let objects = listings(markers);
        let mut done = Vec::new();
        let mut missing = self
            .check_all(objects.iter().collect(), markers, lookup, &mut done)
            .await?;
        if missing.is_empty() {
            return Ok(done);
        }
        let latest = missing
            .iter()
            .flat_map(|(_, listed)| listed.iter().map(|l| l.write_by))
            .max()
            .unwrap_or_default();
        let write_by = DateTime::from_timestamp_millis(latest).unwrap_or_default();
        let now = self.clock.now();
        if now < write_by {
            let wait = (write_by - now).to_std().unwrap_or_default();
            if !self.budget.allows(wait, READ_TIMEOUT * 3) {
                return Err(Failure::PreviousWriteInFlight(write_by));
            }
            tracing::info!(
                wait_ms = wait.as_millis() as u64,
                "waiting for a previous attempt's write to land or expire"
            );
            self.clock.sleep(wait).await;
            missing = self.check_all(missing, markers, lookup, &mut done).await?;
        }
        for (key, _) in missing {
            self.void(key, by).await?;
        }
        Ok(done)
    }

    /// Checks each of `objects` (`check`): those that hold their events go to `done`, conflicts
    /// are counted, void ones dropped; those that do not exist are returned.
    async fn check_all<'o>(
        &self,
        objects: Vec<&'o (String, Vec<Listing>)>,
        markers: &[(String, Marker)],
        lookup: &Delivered<'_>,
        done: &mut Vec<Confirmed>,
    ) -> Result<Vec<&'o (String, Vec<Listing>)>, Failure> {
        let checks = join_all(
            objects
                .iter()
                .map(|(key, listed)| self.check(key, listed, markers, lookup)),
        )
        .await;
        let mut missing = Vec::new();
        for (object, checked) in objects.into_iter().zip(checks) {
            let key = object.0.as_str();
            match checked? {
                Checked::Holds(confirmed) => done.push(confirmed),
                Checked::Missing => missing.push(object),
                Checked::Void => tracing::debug!(key, "a listed object is void"),
                Checked::Conflict(reason) => self.conflict(key, reason),
            }
        }
        Ok(missing)
    }

    /// Whether `key` holds what `listed` (the markers' listings of it) says: it exists; its
    /// SHA-256 is one listing's; the marker its metadata names attests it with those bytes; it
    /// has one version; no void marker names it; and its lines of delivered records are theirs
    /// (a listing's events are the object's last lines, in order).
    async fn check(
        &self,
        key: &str,
        listed: &[Listing],
        markers: &[(String, Marker)],
        lookup: &Delivered<'_>,
    ) -> Result<Checked, Failure> {
        let read = |error| Failure::from_step(Step::CheckObject, error);
        let object = match self.budget.run(READ_TIMEOUT, self.bucket.get(key)).await {
            Ok(Some(object)) => object,
            Ok(None) => return Ok(Checked::Missing),
            Err(error) => return Err(read(error)),
        };
        let sha256 = sha256_hex(&object.body);
        let mut matching: Vec<&Listing> = listed
            .iter()
            .filter(|l| l.sha256.eq_ignore_ascii_case(&sha256))
            .collect();
        if matching.is_empty() {
            return Ok(Checked::Conflict(format!(
                "its SHA-256 {sha256} is not the one its marker lists"
            )));
        }
        let Some(named) = object.metadata(MARKER_METADATA) else {
            return Ok(Checked::Conflict("it names no marker".into()));
        };
        let attested = match markers.iter().find(|(k, _)| k == named) {
            Some((_, marker)) => marker.attests(key, &sha256),
            None if named.starts_with(STATE_PREFIX) => {
                match self.budget.run(READ_TIMEOUT, self.bucket.get(named)).await {
                    Ok(Some(object)) => {
                        Marker::from_json(&object.body).is_ok_and(|m| m.attests(key, &sha256))
                    }
                    Ok(None) => false,
                    Err(error) => return Err(read(error)),
                }
            }
            None => false,
        };
        if !attested {
            return Ok(Checked::Conflict(format!(
                "the marker it names ({named}) does not attest it"
            )));
        }
        let versions = match self
            .budget
            .run(READ_TIMEOUT, self.bucket.list_versions(key))
            .await
        {
            Ok(entries) => entries
                .iter()
                .filter(|e| e.key == key && !e.delete_marker)
                .count(),
            Err(error) => return Err(read(error)),
        };
        if versions > 1 {
            return Ok(Checked::Conflict(format!(
                "it has {versions} versions; the archiver writes one"
            )));
        }
        match self
            .budget
            .run(READ_TIMEOUT, self.bucket.get(&void_key(key)))
            .await
        {
            // Voided by the sealer: the object landed after its period was sealed, and the
            // sealer archives its lines again in an open period (seal.rs, late objects). Its
            // events are archived there, so a retry must not write them a third time: the
            // object counts here when its lines are the records' own, as any other.
            Ok(Some(object)) if voided_by_seal(&object.body) => {}
            Ok(Some(_)) => return Ok(Checked::Void),
            Ok(None) => {}
            Err(error) => return Err(read(error)),
        }
        let mut text = String::new();
        if flate2::read::GzDecoder::new(&object.body[..])
            .take(MAX_OBJECT_TEXT)
            .read_to_string(&mut text)
            .is_err()
        {
            return Ok(Checked::Conflict("it is not gzip-compressed text".into()));
        }
        let lines: Vec<&str> = text.split_terminator('\n').collect();
        // The longest listing first: the others are suffixes of it.
        matching.sort_by_key(|l| std::cmp::Reverse(l.event_ids.len()));
        let mut event_ids: Vec<String> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for listing in matching {
            let Some(first) = lines.len().checked_sub(listing.event_ids.len()) else {
                return Ok(Checked::Conflict(format!(
                    "its marker lists {} events in it; it holds {} lines",
                    listing.event_ids.len(),
                    lines.len()
                )));
            };
            for (id, held) in listing.event_ids.iter().zip(&lines[first..]) {
                if let Some(record) = lookup.by_id.get(id.as_str())
                    && line(record).as_deref() != Some(*held)
                {
                    return Ok(Checked::Conflict(format!(
                        "its line of event {id} is not the record's"
                    )));
                }
                if seen.insert(id.as_str()) {
                    event_ids.push(id.clone());
                }
            }
        }
        Ok(Checked::Holds(Confirmed {
            key: key.to_owned(),
            event_ids,
            sha256,
        }))
    }

    /// Makes `key` void for good (`If-None-Match`; one that exists is already void).
    async fn void(&self, key: &str, by: &str) -> Result<(), Failure> {
        let body = Bytes::from(
            serde_json::json!({
                "version": 1,
                "voidedAt": self.clock.now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "by": by,
            })
            .to_string(),
        );
        let mut sha256 = [0u8; 32];
        sha256.copy_from_slice(digest(&SHA256, &body).as_ref());
        let request = NewObject {
            key: void_key(key),
            body,
            content_type: "application/json",
            sha256,
            metadata: Vec::new(),
        };
        match self
            .budget
            .run(WRITE_START_SLACK, self.bucket.put_if_absent(request))
            .await
        {
            Ok(Created::New { .. }) => {
                tracing::warn!(
                    key,
                    by,
                    "a listed object missing after its writeBy is void; its events are archived anew"
                );
                self.found().voided.push(key.to_owned());
                Ok(())
            }
            Ok(Created::AlreadyExists) => Ok(()),
            Err(error) => Err(Failure::from_step(Step::WriteVoid, error)),
        }
    }

    /// Writes the marker of the attempt (the objects confirmed so far and the new ones) and the
    /// carried markers where Lambda may start inside the batch, then the new objects. Objects
    /// written join `done`; those whose write failed (and may still land) join `pending`.
    async fn write(
        &self,
        attempt: &Attempt<'_>,
        progress: &mut Progress<'_>,
        uncovered: &[&StreamRecord],
        report: &mut BatchReport,
    ) -> Result<(), Written> {
        let encoded =
            encode(uncovered).map_err(|e| Written::Nothing(Failure::Encoding(e.to_string())))?;
        // The key, and so the hour and the period, are chosen now; the writes start before
        // `at + WRITE_START_SLACK` or not at all.
        let at = self.clock.now();
        let keyed: Vec<(String, &Encoded)> = encoded
            .iter()
            .map(|e| e.key(at, self.period, attempt.number).map(|key| (key, e)))
            .collect::<Option<_>>()
            .ok_or_else(|| Written::Nothing(Failure::Encoding("bad sequence number".into())))?;
        let new: Vec<Confirmed> = keyed
            .iter()
            .map(|(key, e)| Confirmed {
                key: key.clone(),
                event_ids: e.event_ids.clone(),
                sha256: hex(&e.sha256),
            })
            .collect();
        let mut listed = progress.done.clone();
        listed.extend(new.iter().cloned());
        let write_by = millis(
            at + chrono::Duration::from_std(WRITE_START_SLACK + OBJECT_WRITE_TIMEOUT + LAND_GRACE)
                .unwrap_or_default(),
        );
        *progress.write_by = write_by;
        let mut marker = Marker::new(attempt.run.to_vec(), &listed, write_by);
        marker.repair = self.repair;
        let marker_key = self
            .marker_key(attempt.start, attempt.number)
            .map_err(Written::Nothing)?;
        // The attempt's marker, and a marker wherever Lambda may start inside this batch (a
        // bisection, the record after it): whatever Lambda does with a part of it, the batch
        // starting there finds these objects.
        let (written, carried) = futures::join!(
            self.put_marker(marker_key.clone(), &marker, Step::WriteMarker),
            self.carry_points(attempt.run, attempt.delivered, &listed, write_by),
        );
        written.map_err(Written::Nothing)?;
        carried.map_err(Written::Nothing)?;
        if self.clock.now()
            >= at + chrono::Duration::from_std(WRITE_START_SLACK).unwrap_or_default()
        {
            return Err(Written::Partly(Failure::SlowMarker));
        }

        let results = join_all(keyed.iter().map(|(key, e)| {
            self.budget.run(
                OBJECT_WRITE_TIMEOUT,
                self.bucket
                    .put_if_absent(self.marked(e.request(key.clone(), &marker_key))),
            )
        }))
        .await;
        let mut failure = None;
        for (((key, e), ours), result) in keyed.iter().zip(new).zip(results) {
            match result {
                Ok(Created::New { .. }) => {
                    report.archived += e.event_ids.len();
                    report.objects.push(WrittenObject {
                        key: key.clone(),
                        events: e.event_ids.len(),
                        bytes: e.body.len(),
                    });
                    progress.done.push(ours);
                }
                // The name is taken: this attempt's own request, answered 412 on the SDK's retry
                // after a lost answer, only when it holds these bytes; an earlier attempt's when
                // it holds the bytes a marker of the run listed there (its events, not the rest
                // of ours); anything else is not ours.
                Ok(Created::AlreadyExists) => {
                    let mut listed = vec![Listing {
                        sha256: ours.sha256.clone(),
                        event_ids: ours.event_ids.clone(),
                        write_by,
                    }];
                    for (_, earlier) in listings(attempt.markers)
                        .into_iter()
                        .filter(|(k, _)| k == key)
                    {
                        listed.extend(earlier);
                    }
                    let mut markers = attempt.markers.to_vec();
                    markers.push((marker_key.clone(), marker.clone()));
                    match self.check(key, &listed, &markers, attempt.lookup).await {
                        Ok(Checked::Holds(held))
                            if held.sha256.eq_ignore_ascii_case(&ours.sha256) =>
                        {
                            report.archived += e.event_ids.len();
                            report.objects.push(WrittenObject {
                                key: key.clone(),
                                events: e.event_ids.len(),
                                bytes: e.body.len(),
                            });
                            progress.done.push(ours);
                        }
                        Ok(Checked::Holds(held)) => {
                            let theirs: HashSet<&str> =
                                held.event_ids.iter().map(String::as_str).collect();
                            report.already_archived += e
                                .event_ids
                                .iter()
                                .filter(|id| theirs.contains(id.as_str()))
                                .count();
                            drop(theirs);
                            progress.done.push(held);
                            failure.get_or_insert(Failure::ArchiveConflict(key.clone()));
                        }
                        Ok(Checked::Conflict(reason)) => {
                            self.conflict(key, format!("the name was taken: {reason}"));
                            failure.get_or_insert(Failure::ArchiveConflict(key.clone()));
                        }
                        Ok(Checked::Void) => {
                            self.conflict(key, "the name was taken by a void object".into());
                            failure.get_or_insert(Failure::ArchiveConflict(key.clone()));
                        }
                        Ok(Checked::Missing) => {
                            failure.get_or_insert(Failure::Bucket {
                                step: Step::WriteObject,
                                error: crate::words::unavailable("answered 412, then not found"),
                            });
                        }
                        Err(read_failure) => {
                            failure.get_or_insert(read_failure);
                        }
                    }
                }
                Err(error) => {
                    progress.pending.push(ours);
                    failure.get_or_insert(Failure::from_step(Step::WriteObject, error));
                }
            }
        }
        failure.map_or(Ok(()), |f| Err(Written::Partly(f)))
    }

    /// `object` with the metadata of a repair (`audit_model::repair::REPAIR_METADATA`) when
    /// this run is one.
    fn marked(&self, mut object: NewObject) -> NewObject {
        if self.repair {
            object
                .metadata
                .push((audit_model::repair::REPAIR_METADATA, "true".to_owned()));
        }
        object
    }

    /// Carried markers at every point of `carry_points` that `objects` hold events past.
    async fn carry_points(
        &self,
        run: &[RunEntry],
        delivered: usize,
        objects: &[Confirmed],
        write_by: i64,
    ) -> Result<(), Failure> {
        let carries = carry_points(delivered, run.len())
            .into_iter()
            .map(|point| (point, within(objects, &run[point..])))
            .filter(|(_, beyond)| !beyond.is_empty())
            .collect::<Vec<_>>();
        let results = join_all(
            carries
                .iter()
                .map(|(point, beyond)| self.carry(&run[*point..], beyond, write_by)),
        )
        .await;
        results.into_iter().collect()
    }

    /// Leaves a marker at `run[0]` listing `objects` (with events of `run`), unless the markers
    /// there already list each of their events with the same bytes.
    async fn carry(
        &self,
        run: &[RunEntry],
        objects: &[Confirmed],
        write_by: i64,
    ) -> Result<(), Failure> {
        let start = &run[0];
        let known = self.markers(start).await?;
        let run = known_run(run, &known.markers);
        let already: HashSet<(&str, &str, String)> = known
            .markers
            .iter()
            .flat_map(|(_, marker)| {
                marker.objects.iter().flat_map(move |o| {
                    marker
                        .event_ids(o)
                        .into_iter()
                        .map(move |id| (o.key.as_str(), o.sha256.as_str(), id))
                })
            })
            .collect();
        let objects = within(objects, &run);
        let needed = objects.iter().any(|o| {
            o.event_ids
                .iter()
                .any(|id| !already.contains(&(o.key.as_str(), o.sha256.as_str(), id.clone())))
        });
        drop(already);
        if !needed {
            return Ok(());
        }
        let marker = Marker::new(run, &objects, write_by.max(millis(self.clock.now())));
        let key = self.marker_key(start, known.next)?;
        self.put_marker(key, &marker, Step::WriteCarry).await
    }

    /// Creates a marker; an existing one with the same bytes is this attempt's own (an SDK retry
    /// after a lost answer); another is `ArchiveConflict` and the retry moves on past it.
    async fn put_marker(&self, key: String, marker: &Marker, step: Step) -> Result<(), Failure> {
        let body = Bytes::from(marker.to_json());
        let mut sha256 = [0u8; 32];
        sha256.copy_from_slice(digest(&SHA256, &body).as_ref());
        let request = NewObject {
            key: key.clone(),
            body: body.clone(),
            content_type: "application/json",
            sha256,
            metadata: Vec::new(),
        };
        match self
            .budget
            .run(WRITE_START_SLACK, self.bucket.put_if_absent(request))
            .await
        {
            Ok(Created::New { .. }) => Ok(()),
            Ok(Created::AlreadyExists) => {
                match self.budget.run(READ_TIMEOUT, self.bucket.get(&key)).await {
                    Ok(Some(existing)) if existing.body == body => Ok(()),
                    Ok(_) => {
                        self.conflict(&key, "the marker's name holds another marker".into());
                        Err(Failure::MarkerConflict(key))
                    }
                    Err(error) => Err(Failure::from_step(Step::ReadMarker, error)),
                }
            }
            Err(error) => Err(Failure::from_step(step, error)),
        }
    }
}

/// One attempt at a run: where it starts, its number, the run as known, how many records were
/// delivered, the run's markers and the delivered records.
struct Attempt<'a> {
    start: &'a RunEntry,
    number: u32,
    run: &'a [RunEntry],
    delivered: usize,
    markers: &'a [(String, Marker)],
    lookup: &'a Delivered<'a>,
}

/// What an attempt has archived so far: objects that hold events, objects whose write failed
/// and may still land by `write_by`.
struct Progress<'a> {
    done: &'a mut Vec<Confirmed>,
    pending: &'a mut Vec<Confirmed>,
    write_by: &'a mut i64,
}

/// How far a write got when it failed.
enum Written {
    /// Nothing new was written (the marker may or may not exist).
    Nothing(Failure),
    /// The marker was written; some objects may not be.
    Partly(Failure),
}
