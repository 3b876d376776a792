//! Owns archiving one stream batch exactly once: find what earlier attempts at this run already
//! archived (markers), write the rest (marker first, then the objects), and settle which records
//! Lambda must deliver again, carrying what is archived past that point to the record it resumes
//! at. Must not know the Lambda event's shape, S3's API, or how outcomes are logged.
//!
//! Why no event is archived twice or lost, in short (docs/archive.md has it in full): Lambda
//! delivers a shard's records in order, one batch at a time, and a retry (whole, bisected, or
//! after a partial failure) starts at the first record of the failed batch, at the record after a
//! successful half, or at the first record reported failed. Each of these is a run start whose
//! markers say which objects hold which of the run's events; an event is archived when such an
//! object exists, and a listed object that does not exist by the marker's `writeBy` never will.
//! So a retry writes exactly the events not yet in an existing object, and before reporting
//! success for a part of a run it leaves a marker at the record Lambda resumes at.

use std::collections::HashSet;
use std::time::Duration;

use audit_model::archive::{LAND_GRACE, OBJECT_WRITE_TIMEOUT, PeriodLength, WRITE_START_SLACK};
use audit_model::digest::hex;
use audit_model::line::plain_map;
use aws_lc_rs::digest::{SHA256, digest};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::future::join_all;
use serde_json::Value;

use crate::bucket::{ArchiveBucket, Created, NewObject};
use crate::budget::Budget;
use crate::clock::Clock;
use crate::event::{Disposition, Read, StreamRecord};
use crate::marker::{Confirmed, Marker, RunEntry, marker_key};
use crate::objects::{Encoded, encode};
use crate::report::{BatchReport, Failure, Step, TamperEvent, WrittenObject};

/// Time kept before Lambda's deadline by default: the response, the logs and the metrics.
pub const DEFAULT_DEADLINE_MARGIN: Duration = Duration::from_millis(1000);
/// The longest a marker read or an object check may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts at one run before the archiver gives up on it (each is a failed invocation).
const MAX_ATTEMPTS: u32 = 10_000;

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
pub async fn archive_batch<B: ArchiveBucket, C: Clock>(
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
        repair: false,
    };
    if let Some((index, failure)) = archiver.run(&records, &mut report).await {
        report.failed_from = Some(index);
        report.failure = Some(failure);
    }
    report
}

/// Archives one record made by a repair from an item of the table (`repair.rs`) as a run of its
/// own, through the same markers and objects as the stream's: an earlier repair of it is found by
/// its marker, and what is written is marked as a repair (object metadata `repair`, the marker's
/// `repair`).
pub async fn archive_repair<B: ArchiveBucket, C: Clock>(
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
        repair: true,
    };
    if let Some((index, failure)) = archiver.run(&[record], &mut report).await {
        report.failed_from = Some(index);
        report.failure = Some(failure);
    }
    report
}

struct Archiver<'a, B, C> {
    bucket: &'a B,
    clock: &'a C,
    period: PeriodLength,
    budget: Budget,
    /// A repair's run (`archive_repair`): its marker and objects say so.
    repair: bool,
}

/// The latest attempt at a run, if any.
type Latest = Option<(u32, Marker)>;

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

fn millis(at: DateTime<Utc>) -> i64 {
    at.timestamp_millis()
}

impl<B: ArchiveBucket, C: Clock> Archiver<'_, B, C> {
    /// Archives `records` (a run's start, in stream order). Returns the first record Lambda must
    /// deliver again, and why, or `None` when every record is archived (or expired).
    async fn run(
        &self,
        records: &[&StreamRecord],
        report: &mut BatchReport,
    ) -> Option<(usize, Failure)> {
        let delivered: Vec<RunEntry> = records.iter().map(|r| entry(r)).collect();
        let start = &delivered[0];
        let latest = match self.latest_marker(start).await {
            Ok(latest) => latest,
            Err(failure) => return Some((0, failure)),
        };
        let (run, mut confirmed, attempt) = match &latest {
            None => (delivered.clone(), Vec::new(), 0),
            Some((attempt, marker)) => match self.confirm(marker).await {
                Ok(confirmed) => (merge_runs(&marker.run, &delivered), confirmed, attempt + 1),
                Err(failure) => return Some((0, failure)),
            },
        };

        let covered: HashSet<&str> = confirmed
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
        if !uncovered.is_empty() {
            match self
                .write(start, attempt, &run, &mut confirmed, &uncovered, report)
                .await
            {
                Ok(()) => {}
                Err(Written::Nothing(failure)) => return Some((0, failure)),
                Err(Written::Partly(objects_failure)) => failure = Some(objects_failure),
            }
        }

        let done: HashSet<&str> = confirmed
            .iter()
            .flat_map(|o| o.event_ids.iter().map(String::as_str))
            .collect();
        let first_not_done = records.iter().position(|r| {
            r.disposition() != Disposition::Expired && !done.contains(r.event_id.as_str())
        });
        let resume = first_not_done.unwrap_or(records.len());
        if resume > 0 && resume < run.len() {
            let after: HashSet<&str> = run[resume..].iter().map(RunEntry::event_id).collect();
            let beyond: Vec<Confirmed> = confirmed
                .iter()
                .map(|o| Confirmed {
                    key: o.key.clone(),
                    event_ids: o
                        .event_ids
                        .iter()
                        .filter(|id| after.contains(id.as_str()))
                        .cloned()
                        .collect(),
                    sha256: o.sha256.clone(),
                })
                .filter(|o| !o.event_ids.is_empty())
                .collect();
            if !beyond.is_empty()
                && let Err(carry_failure) = self.carry(&run[resume..], &beyond).await
            {
                // Lambda resumes at the run's start, whose marker lists every object written.
                return Some((0, carry_failure));
            }
        }
        first_not_done.map(|index| (index, failure.unwrap_or(Failure::Unwritten)))
    }

    /// The latest marker of the run starting at `start` (attempts 0, 1, … until one is absent).
    async fn latest_marker(&self, start: &RunEntry) -> Result<Latest, Failure> {
        let mut latest = None;
        for attempt in 0..MAX_ATTEMPTS {
            let key = self.marker_key(start, attempt)?;
            match self.budget.run(READ_TIMEOUT, self.bucket.get(&key)).await {
                Ok(Some(bytes)) => match Marker::from_json(&bytes) {
                    Ok(marker) => latest = Some((attempt, marker)),
                    Err(error) => {
                        return Err(Failure::BadMarker {
                            key,
                            error: error.to_string(),
                        });
                    }
                },
                Ok(None) => return Ok(latest),
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

    /// The marker's objects that exist. One that does not is waited for until the marker's
    /// `writeBy` (after which it never appears), when the deadline allows.
    async fn confirm(&self, marker: &Marker) -> Result<Vec<Confirmed>, Failure> {
        let mut confirmed = Vec::new();
        let mut missing = self
            .existing(marker, &marker.objects, &mut confirmed)
            .await?;
        if missing.is_empty() {
            return Ok(confirmed);
        }
        let write_by = DateTime::from_timestamp_millis(marker.write_by).unwrap_or_default();
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
            missing = self.existing(marker, &missing, &mut confirmed).await?;
        }
        tracing::debug!(
            missing = missing.len(),
            "previous attempt's objects never written"
        );
        Ok(confirmed)
    }

    /// Checks `objects` of `marker`: those that exist go to `confirmed`; the rest are returned.
    async fn existing(
        &self,
        marker: &Marker,
        objects: &[crate::marker::MarkedObject],
        confirmed: &mut Vec<Confirmed>,
    ) -> Result<Vec<crate::marker::MarkedObject>, Failure> {
        let heads = join_all(
            objects
                .iter()
                .map(|o| self.budget.run(READ_TIMEOUT, self.bucket.head(&o.key))),
        )
        .await;
        let mut missing = Vec::new();
        for (object, head) in objects.iter().zip(heads) {
            match head {
                Ok(Some(_)) => confirmed.push(Confirmed {
                    key: object.key.clone(),
                    event_ids: marker.event_ids(object),
                    sha256: object.sha256.clone(),
                }),
                Ok(None) => missing.push(object.clone()),
                Err(error) => return Err(Failure::from_step(Step::CheckObject, error)),
            }
        }
        Ok(missing)
    }

    /// Writes the marker of attempt `attempt` (the objects confirmed so far and the new ones),
    /// then the new objects. Objects written join `confirmed`.
    async fn write(
        &self,
        start: &RunEntry,
        attempt: u32,
        run: &[RunEntry],
        confirmed: &mut Vec<Confirmed>,
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
            .map(|e| e.key(at, self.period, attempt).map(|key| (key, e)))
            .collect::<Option<_>>()
            .ok_or_else(|| Written::Nothing(Failure::Encoding("bad sequence number".into())))?;
        let mut listed = confirmed.clone();
        listed.extend(keyed.iter().map(|(key, e)| Confirmed {
            key: key.clone(),
            event_ids: e.event_ids.clone(),
            sha256: hex(&e.sha256),
        }));
        let write_by = at
            + chrono::Duration::from_std(WRITE_START_SLACK + OBJECT_WRITE_TIMEOUT + LAND_GRACE)
                .unwrap_or_default();
        let mut marker = Marker::new(run.to_vec(), &listed, millis(write_by));
        marker.repair = self.repair;
        let key = self.marker_key(start, attempt).map_err(Written::Nothing)?;
        self.put_marker(key, &marker, Step::WriteMarker)
            .await
            .map_err(Written::Nothing)?;
        if self.clock.now()
            >= at + chrono::Duration::from_std(WRITE_START_SLACK).unwrap_or_default()
        {
            return Err(Written::Partly(Failure::SlowMarker));
        }

        let results = join_all(keyed.iter().map(|(key, e)| {
            self.budget.run(
                OBJECT_WRITE_TIMEOUT,
                self.bucket
                    .put_if_absent(self.marked(e.request(key.clone()))),
            )
        }))
        .await;
        let mut failure = None;
        for ((key, e), result) in keyed.iter().zip(results) {
            match result {
                // AlreadyExists: this attempt's own write, answered 412 on the SDK's retry after
                // a lost answer. Any other object by this name (same first event, hour, period
                // and attempt number) was found missing after its marker's writeBy, so it can no
                // longer land (docs/archive.md).
                Ok(Created::New { .. } | Created::AlreadyExists) => {
                    confirmed.push(Confirmed {
                        key: key.clone(),
                        event_ids: e.event_ids.clone(),
                        sha256: hex(&e.sha256),
                    });
                    report.archived += e.event_ids.len();
                    report.objects.push(WrittenObject {
                        key: key.clone(),
                        events: e.event_ids.len(),
                        bytes: e.body.len(),
                    });
                }
                Err(error) => {
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

    /// Leaves a marker at `run[0]`, where Lambda resumes, listing `objects` (confirmed, with
    /// events of `run`) besides what that run's latest marker lists.
    async fn carry(&self, run: &[RunEntry], objects: &[Confirmed]) -> Result<(), Failure> {
        let start = &run[0];
        let latest = self.latest_marker(start).await?;
        let (run, mut listed, write_by, attempt) = match &latest {
            None => (run.to_vec(), Vec::new(), millis(self.clock.now()), 0),
            Some((attempt, marker)) => (
                merge_runs(&marker.run, run),
                marker
                    .objects
                    .iter()
                    .map(|o| Confirmed {
                        key: o.key.clone(),
                        event_ids: marker.event_ids(o),
                        sha256: o.sha256.clone(),
                    })
                    .collect::<Vec<_>>(),
                marker.write_by.max(millis(self.clock.now())),
                attempt + 1,
            ),
        };
        let already: HashSet<(&str, &str)> = listed
            .iter()
            .flat_map(|o| o.event_ids.iter().map(|id| (o.key.as_str(), id.as_str())))
            .collect();
        let new: Vec<Confirmed> = objects
            .iter()
            .filter(|o| {
                o.event_ids
                    .iter()
                    .any(|id| !already.contains(&(o.key.as_str(), id.as_str())))
            })
            .cloned()
            .collect();
        drop(already);
        if new.is_empty() {
            return Ok(());
        }
        listed.extend(new);
        let marker = Marker::new(run, &listed, write_by);
        let key = self.marker_key(start, attempt)?;
        self.put_marker(key, &marker, Step::WriteCarry).await
    }

    /// Creates a marker; an existing one with the same bytes is this attempt's own (an SDK retry
    /// after a lost answer).
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
                    Ok(Some(existing)) if existing == body => Ok(()),
                    Ok(_) => Err(Failure::MarkerConflict(key)),
                    Err(error) => Err(Failure::from_step(Step::ReadMarker, error)),
                }
            }
            Err(error) => Err(Failure::from_step(step, error)),
        }
    }
}

/// How far a write got when it failed.
enum Written {
    /// Nothing new was written (the marker may or may not exist).
    Nothing(Failure),
    /// The marker was written; some objects may not be.
    Partly(Failure),
}
