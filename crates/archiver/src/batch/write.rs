//! Owns writing what is not yet archived: the attempt's marker, its objects, and the markers
//! carried to where Lambda may resume. Must not know how earlier attempts' objects are checked
//! (`confirm.rs`).

use super::confirm::{Checked, Listing, listings};
use super::*;

/// `objects` cut to their events in `run` (objects left with none dropped).
pub(super) fn within(objects: &[Confirmed], run: &[RunEntry]) -> Vec<Confirmed> {
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
    /// Writes the marker of the attempt (the objects confirmed so far and the new ones) and the
    /// carried markers where Lambda may start inside the batch, then the new objects. Objects
    /// written join `done`; those whose write failed (and may still land) join `pending`.
    pub(super) async fn write(
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
    pub(super) async fn carry_points(
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
    pub(super) async fn carry(
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
        let request = json_object(key.clone(), body.clone());
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
pub(super) struct Attempt<'a> {
    pub(super) start: &'a RunEntry,
    pub(super) number: u32,
    pub(super) run: &'a [RunEntry],
    pub(super) delivered: usize,
    pub(super) markers: &'a [(String, Marker)],
    pub(super) lookup: &'a Delivered<'a>,
}

/// What an attempt has archived so far: objects that hold events, objects whose write failed
/// and may still land by `write_by`.
pub(super) struct Progress<'a> {
    pub(super) done: &'a mut Vec<Confirmed>,
    pub(super) pending: &'a mut Vec<Confirmed>,
    pub(super) write_by: &'a mut i64,
}

/// How far a write got when it failed.
pub(super) enum Written {
    /// Nothing new was written (the marker may or may not exist).
    Nothing(Failure),
    /// The marker was written; some objects may not be.
    Partly(Failure),
}
