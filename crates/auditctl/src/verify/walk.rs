//! Owns the walk of `verify` over a range: where the chain starts, the link into the range, every
//! UTC hour partition the range's periods write into (listed once, each entry given to its
//! period), and for each period in order: its digest checked, the objects it lists read and
//! checked, every version and delete marker in its place compared with that list, and the
//! archived events handed to the table check. Must not know the SDK or how problems are printed.
//!
//! Memory is bounded by one period's objects (their listing, the digest's list, `concurrency`
//! objects being read), not by the range: periods are checked as soon as every partition they can
//! be written in has been listed, and then dropped.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use audit_model::archive::{ObjectKey, ObjectKind, Period, object_prefixes};
use audit_model::digest::{Digest, ProblemKind, SealedDigest, digest_key, hex};
use chrono::{DateTime, Datelike, Timelike, Utc};
use futures::{StreamExt, TryStreamExt};

use super::Settings;
use super::content::{self, Content};
use super::digests;
use super::key::TrustedKey;
use super::ports::{Archive, Entry, Table};
use super::report::{Observer, Problem, Summary};
use super::table::{ArchivedEvent, TableCheck, Window};
use crate::TrailError;

/// Checks the archive (and with `table` the table) over `settings.range`, telling `observer` of
/// each problem as it is found; returns what was checked.
pub async fn verify<A: Archive, T: Table, O: Observer>(
    archive: &A,
    key: &TrustedKey,
    table: Option<&T>,
    settings: &Settings,
    observer: &mut O,
) -> Result<Summary, TrailError> {
    let mut walk = Walk {
        archive,
        key,
        settings,
        observer,
        summary: Summary::default(),
        table: table.map(|t| TableCheck::new(t, settings.now.timestamp())),
        genesis: None,
        previous: None,
    };
    walk.run().await?;
    let mut summary = walk.summary;
    summary.table = walk.table.map(|t| t.summary);
    Ok(summary)
}

struct Walk<'a, A, T, O> {
    archive: &'a A,
    key: &'a TrustedKey,
    settings: &'a Settings,
    observer: &'a mut O,
    summary: Summary,
    table: Option<TableCheck<'a, T>>,
    /// The period of the chain's first digest.
    genesis: Option<Period>,
    /// The previous period's sealed digest, when it has one.
    previous: Option<SealedDigest>,
}

/// The entries of one period's place, by key (each key's versions newest first, then its delete
/// markers).
type Groups = BTreeMap<String, Vec<Entry>>;

fn report<O: Observer>(
    summary: &mut Summary,
    observer: &mut O,
    problem: Problem,
) -> Result<(), TrailError> {
    summary.count(problem.kind);
    observer.problem(&problem)
}

impl<A: Archive, T: Table, O: Observer> Walk<'_, A, T, O> {
    fn report(&mut self, problem: Problem) -> Result<(), TrailError> {
        report(&mut self.summary, self.observer, problem)
    }

    fn report_all(&mut self, problems: Vec<Problem>) -> Result<(), TrailError> {
        problems.into_iter().try_for_each(|p| self.report(p))
    }

    async fn run(&mut self) -> Result<(), TrailError> {
        let Some((from, to)) = self.settings.range.bounds() else {
            return Ok(()); // no millisecond between the bounds: nothing to check
        };
        let length = self.settings.length;
        let first = length.period_of(from);
        let last = length.period_of(to);
        let total = u64::try_from((last.start - first.start) / i64::from(length.seconds()) + 1)
            .unwrap_or(0);
        self.genesis = digests::first_digest(self.archive, length).await?;
        // The link into the range: the digest of the period before it, when the chain has one.
        if let Some(genesis) = self.genesis
            && first.start > genesis.start
        {
            let before = Period {
                start: first.start - i64::from(length.seconds()),
                length,
            };
            self.previous = digests::load(self.archive, &digest_key(before))
                .await?
                .map(|loaded| loaded.sealed());
        }

        // Every UTC hour partition a write of the range's periods can be keyed in, listed once;
        // a period is checked once all of its partitions are listed.
        let mut places: BTreeMap<i64, Vec<Entry>> = BTreeMap::new();
        let mut next = first;
        let mut hour = first.start.div_euclid(3600) * 3600;
        while hour < last.last_write_start() {
            for kind in [ObjectKind::Tamper, ObjectKind::Trail] {
                let mut entries = self.archive.versions(hour_prefix(kind, hour));
                let mut reported: Option<String> = None;
                while let Some(entry) = entries.try_next().await? {
                    match ObjectKey::parse(&entry.key)
                        .filter(|k| k.written_within_its_period(length))
                    {
                        Some(object)
                            if (first.start..=last.start).contains(&object.period_start) =>
                        {
                            places.entry(object.period_start).or_default().push(entry);
                        }
                        Some(_) => {} // another period's, outside the range
                        None if reported.as_deref() == Some(entry.key.as_str()) => {}
                        None => {
                            let problem = Problem::new(
                                ProblemKind::ObjectNotInDigest,
                                &entry.key,
                                "in the archive's partitions under a key the archiver never writes (no period's digest can list it)",
                            );
                            reported = Some(entry.key);
                            report(&mut self.summary, self.observer, problem)?;
                        }
                    }
                }
            }
            hour += 3600;
            while next.start <= last.start && next.last_write_start() <= hour {
                let entries = places.remove(&next.start).unwrap_or_default();
                self.period(next, entries).await?;
                self.observer.progress(&self.summary, next, total);
                next = next.next();
            }
        }
        if self.table.is_some() {
            self.table_items(first, last, to).await?;
        }
        Ok(())
    }

    /// One period: its digest, then its objects.
    async fn period(&mut self, period: Period, entries: Vec<Entry>) -> Result<(), TrailError> {
        self.summary.periods += 1;
        let mut groups: Groups = BTreeMap::new();
        for entry in entries {
            groups.entry(entry.key.clone()).or_default().push(entry);
        }
        let live = groups
            .values()
            .filter(|g| g.iter().any(|e| !e.delete_marker))
            .count() as u64;
        if self.genesis.is_none_or(|g| period.start < g.start) {
            self.summary.before_trail += 1;
            self.summary.unsealed_objects += live;
            self.previous = None;
            return Ok(());
        }
        let key = digest_key(period);
        let Some(loaded) = digests::load(self.archive, &key).await? else {
            let due =
                self.settings.now.timestamp() >= period.sealable_at() + self.settings.grace_seconds;
            if due {
                self.summary.missing += 1;
                let objects = match live {
                    0 => String::new(),
                    n => format!("; its {n} object(s) are covered by no digest"),
                };
                self.report(Problem::new(
                    ProblemKind::DigestMissing,
                    &key,
                    format!(
                        "no digest of the period {} to {}{objects}",
                        time(period.start),
                        time(period.end())
                    ),
                ))?;
            } else {
                self.summary.not_sealed_yet += 1;
            }
            self.summary.unsealed_objects += live;
            self.previous = None;
            return self.current_events(&groups).await;
        };
        if loaded.hidden {
            self.report(Problem::new(
                ProblemKind::DigestMissing,
                &key,
                format!(
                    "deleted: a delete marker hides it; its sealed version {} is still in the bucket and is checked",
                    loaded.version_id
                ),
            ))?;
        }
        let checked = digests::check(
            &loaded,
            period,
            &self.settings.bucket,
            self.key,
            self.previous.as_ref(),
            self.genesis == Some(period),
        );
        self.report_all(checked.problems)?;
        let newer = digests::check_newer(self.archive, &loaded, self.key).await?;
        self.report_all(newer)?;
        self.previous = Some(loaded.sealed());
        match checked.digest {
            Some(digest) => {
                self.summary.sealed += 1;
                if digest.objects.is_empty() {
                    self.summary.empty += 1;
                }
                self.objects(&digest, &key, groups).await
            }
            None => {
                // Not a digest: nothing to check its objects against.
                self.summary.missing += 1;
                self.summary.unsealed_objects += live;
                self.current_events(&groups).await
            }
        }
    }

    /// The objects a digest lists, against what the bucket holds in the period's place.
    async fn objects(
        &mut self,
        digest: &Digest,
        digest_key: &str,
        groups: Groups,
    ) -> Result<(), TrailError> {
        let listed: BTreeMap<&str, _> =
            digest.objects.iter().map(|o| (o.key.as_str(), o)).collect();
        for (key, group) in &groups {
            let Some(object) = listed.get(key.as_str()) else {
                let detail = match group.iter().find(|e| !e.delete_marker) {
                    Some(version) => format!(
                        "version {} is in the place of a sealed period, but its digest {digest_key} does not list it",
                        version.version_id
                    ),
                    None => format!(
                        "a delete marker of a key that its period's digest {digest_key} does not list"
                    ),
                };
                self.report(Problem::new(ProblemKind::ObjectNotInDigest, key, detail))?;
                continue;
            };
            let sealed_at = group
                .iter()
                .position(|e| !e.delete_marker && e.version_id == object.version_id);
            for (i, other) in group.iter().enumerate() {
                if other.delete_marker || other.version_id == object.version_id {
                    continue;
                }
                let which = match sealed_at {
                    Some(at) if i > at => "an older version",
                    _ => "a newer version",
                };
                self.report(Problem::new(
                    ProblemKind::ObjectChanged,
                    key,
                    format!(
                        "{which} {} beside the sealed version {}",
                        other.version_id, object.version_id
                    ),
                ))?;
            }
            if sealed_at.is_some() && group.iter().any(|e| e.delete_marker && e.latest) {
                self.report(Problem::new(
                    ProblemKind::ObjectMissing,
                    key,
                    format!(
                        "deleted: a delete marker hides it; its sealed version {} is still in the bucket",
                        object.version_id
                    ),
                ))?;
            }
        }

        let keep = self.table.is_some();
        let archive = self.archive;
        let mut reads = futures::stream::iter(digest.objects.iter())
            .map(|object| async move {
                let keep = keep && kind_of(&object.key) == ObjectKind::Trail;
                let read = read_version(archive, &object.key, &object.version_id, keep).await;
                (object, read)
            })
            .buffered(self.settings.concurrency.max(1));
        while let Some((object, read)) = reads.next().await {
            let Some(content) = read? else {
                self.report(Problem::new(
                    ProblemKind::ObjectMissing,
                    &object.key,
                    format!("its sealed version {} is gone", object.version_id),
                ))?;
                continue;
            };
            let kind = kind_of(&object.key);
            match kind {
                ObjectKind::Trail => {
                    self.summary.trail_objects += 1;
                    self.summary.trail_events += content.lines;
                }
                ObjectKind::Tamper => {
                    self.summary.tamper_objects += 1;
                    self.summary.tamper_events += content.lines;
                }
            }
            let mut why = Vec::new();
            if hex(&content.sha256) != object.sha256.to_ascii_lowercase() {
                why.push(format!(
                    "its SHA-256 is {}, its digest says {}",
                    hex(&content.sha256),
                    object.sha256
                ));
            }
            if content.size != object.size {
                why.push(format!(
                    "{} bytes, its digest says {}",
                    content.size, object.size
                ));
            }
            if content.lines != object.events {
                why.push(format!(
                    "{} events, its digest says {}",
                    content.lines, object.events
                ));
            }
            if !why.is_empty() {
                if let Some(unreadable) = &content.unreadable {
                    why.push(unreadable.clone());
                }
                self.report(Problem::new(
                    ProblemKind::ObjectChanged,
                    &object.key,
                    format!("version {}: {}", object.version_id, why.join("; ")),
                ))?;
            }
            if kind == ObjectKind::Trail {
                self.compare_events(&object.key, content).await?;
            }
        }
        self.flush_table().await
    }

    /// With `--table`: the events of the current objects of a period no digest covers (not
    /// sealed yet, or its digest missing): not checked against a digest, but archived events all
    /// the same.
    async fn current_events(&mut self, groups: &Groups) -> Result<(), TrailError> {
        if self.table.is_none() {
            return Ok(());
        }
        for (key, group) in groups {
            let Some(current) = group.iter().find(|e| e.latest && !e.delete_marker) else {
                continue;
            };
            if kind_of(key) != ObjectKind::Trail {
                continue;
            }
            if let Some(content) =
                read_version(self.archive, key, &current.version_id, true).await?
            {
                self.compare_events(key, content).await?;
            }
        }
        self.flush_table().await
    }

    async fn compare_events(&mut self, key: &str, content: Content) -> Result<(), TrailError> {
        let Some(table) = self.table.as_mut() else {
            return Ok(());
        };
        let object: Arc<str> = Arc::from(key);
        let events = content
            .kept
            .into_iter()
            .filter_map(|line| ArchivedEvent::parse(line, &object))
            .collect();
        let problems = table.archived(events).await?;
        self.report_all(problems)
    }

    async fn flush_table(&mut self) -> Result<(), TrailError> {
        let Some(table) = self.table.as_mut() else {
            return Ok(());
        };
        let problems = table.flush().await?;
        self.report_all(problems)
    }

    /// The current trail objects of `period` (whether sealed or not), their events remembered
    /// for the item check: only those of `wanted`, when given.
    async fn remember_period(
        &mut self,
        period: Period,
        wanted: Option<&HashSet<u128>>,
    ) -> Result<(), TrailError> {
        let prefixes = object_prefixes(period)
            .into_iter()
            .filter(|p| p.starts_with(ObjectKind::Trail.prefix()));
        for prefix in prefixes {
            let current: Vec<Entry> = self
                .archive
                .versions(prefix)
                .try_filter(|e| std::future::ready(e.latest && !e.delete_marker))
                .try_collect()
                .await?;
            for entry in current {
                let Some(content) =
                    read_version(self.archive, &entry.key, &entry.version_id, true).await?
                else {
                    continue;
                };
                let object: Arc<str> = Arc::from(entry.key.as_str());
                let events: Vec<ArchivedEvent> = content
                    .kept
                    .into_iter()
                    .filter_map(|line| ArchivedEvent::parse(line, &object))
                    .filter(|e| wanted.is_none_or(|w| w.contains(&e.key())))
                    .collect();
                if let Some(table) = self.table.as_mut() {
                    table.remember(&events);
                }
            }
        }
        Ok(())
    }

    /// `--table`, after the walk: the table's items of the range looked up among the archived
    /// events, the look-ahead periods after the range read first, and the periods of items found
    /// nowhere near the range read last.
    async fn table_items(
        &mut self,
        first: Period,
        last: Period,
        to: DateTime<Utc>,
    ) -> Result<(), TrailError> {
        let length = self.settings.length;
        let step = i64::from(length.seconds());
        let lag = self.settings.lag_seconds;
        let now = self.settings.now.timestamp();
        let genesis = self.genesis;
        let sealed_or_after = |start: i64| genesis.is_some_and(|g| start >= g.start);
        // Look-ahead: an item written up to `to` is archived by `to + lag`.
        let ahead = (to.timestamp() + lag).min(now).div_euclid(step) * step;
        let mut extra = 0;
        let mut period = last.next();
        while period.start <= ahead {
            if sealed_or_after(period.start) {
                self.remember_period(period, None).await?;
                extra += 1;
            }
            period = period.next();
        }
        let window = Window {
            first: first.start,
            last: ahead.max(last.start),
            genesis,
            length,
        };
        let range = self.settings.range.clone();
        let Some(table) = self.table.as_mut() else {
            return Ok(());
        };
        let summary = &mut self.summary;
        let observer = &mut *self.observer;
        let pending = table
            .items(&range, window, lag, &mut |problem| {
                report(summary, observer, problem)
            })
            .await?;

        // Items found nowhere near: the periods they can be in, each read once.
        let mut periods = BTreeSet::new();
        for item in &pending {
            let mut start = item.first;
            while start <= item.last.min(now) {
                if !(window.first..=window.last).contains(&start) && sealed_or_after(start) {
                    periods.insert(start);
                }
                start += step;
            }
        }
        let wanted: HashSet<u128> = pending.iter().map(|p| p.key()).collect();
        for start in periods {
            self.remember_period(Period { start, length }, Some(&wanted))
                .await?;
            extra += 1;
        }
        if let Some(table) = self.table.as_mut() {
            table.summary.extra_periods = extra;
            let problems = table.settle(pending);
            self.report_all(problems)?;
        }
        Ok(())
    }
}

/// One version read to its end; `None` when it is gone.
async fn read_version<A: Archive>(
    archive: &A,
    key: &str,
    version_id: &str,
    keep: bool,
) -> Result<Option<Content>, TrailError> {
    match archive.get(key, version_id).await? {
        Some(fetched) => content::read(fetched, keep).await.map(Some),
        None => Ok(None),
    }
}

/// trail/ or tamper/ (the walk only sees keys under one of them).
fn kind_of(key: &str) -> ObjectKind {
    if key.starts_with(ObjectKind::Tamper.prefix()) {
        ObjectKind::Tamper
    } else {
        ObjectKind::Trail
    }
}

/// The partition of one UTC hour: `trail/dt=YYYY-MM-DD/hour=HH/`.
fn hour_prefix(kind: ObjectKind, hour: i64) -> String {
    let at = DateTime::from_timestamp(hour, 0).unwrap_or_default();
    format!(
        "{}dt={:04}-{:02}-{:02}/hour={:02}/",
        kind.prefix(),
        at.year(),
        at.month(),
        at.day(),
        at.hour()
    )
}

fn time(seconds: i64) -> String {
    DateTime::from_timestamp(seconds, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| seconds.to_string())
}
