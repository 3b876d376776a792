//! Owns the walk of `verify` over a range: where the chain starts, the link into the range, every
//! UTC hour partition the range's periods write into (listed once, each entry given to its
//! period), and for each period in order: its digest checked, the objects it lists read and
//! checked, every version and delete marker in its place compared with that list, their lines
//! appended to the transparency log's tree (`log`), and the archived events handed to the table
//! check. Must not know the SDK or how problems are printed. Its parts: where the chain starts
//! (`chain`), a sealed period's objects (`objects`), what goes to the table check (`events`).
//!
//! Memory is bounded by one period's objects (their listing, the digest's list, `concurrency`
//! objects being read), not by the range: periods are checked as soon as every partition they can
//! be written in has been listed, and then dropped. Beside them, the walk keeps a 64-bit
//! fingerprint and an object index per record of the range's sealed objects (`seen`, about 12
//! bytes a record, to find one archived twice), and the few objects of sealed periods that their
//! digest does not list until a later digest's `late` list explains them. The log's check keeps
//! the tree's edge, never the range's leaves.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use audit_model::archive::{ObjectKey, ObjectKind, Period, object_prefixes};
use audit_model::digest::{Digest, ProblemKind, digest_key, hex};
use audit_model::note::WitnessKey;
use chrono::{DateTime, Datelike, Timelike, Utc};
use futures::{StreamExt, TryStreamExt};
use serde_json::Value;

use super::attest::Attestations;
use super::content::{self, Content};
use super::digests::{self, Before, Loaded};
use super::key::TrustedKey;
use super::log::{self, LogCheck};
use super::ports::{Archive, Entry, Table};
use super::report::{Observer, Problem, Summary, Unsealed};
use super::seen::{Lookup, Seen};
use super::table::{ArchivedEvent, TableCheck, Window};
use super::{LATE_ARCHIVE_SECONDS, Settings};
use crate::Error;

mod chain;
mod events;
mod objects;

/// Checks the archive (and with `table` the table) over `settings.range`, telling `observer` of
/// each problem as it is found; returns what was checked.
pub async fn verify<A: Archive, T: Table, O: Observer>(
    archive: &A,
    key: &TrustedKey,
    table: Option<&T>,
    settings: &Settings,
    observer: &mut O,
) -> Result<Summary, Error> {
    verify_with_witnesses(archive, key, table, settings, Vec::new(), observer).await
}

/// [`verify`], each checkpoint of the range also required to carry a valid cosignature by each
/// of `witnesses` (`--witness-key`).
pub async fn verify_with_witnesses<A: Archive, T: Table, O: Observer>(
    archive: &A,
    key: &TrustedKey,
    table: Option<&T>,
    settings: &Settings,
    witnesses: Vec<WitnessKey>,
    observer: &mut O,
) -> Result<Summary, Error> {
    let mut walk = Walk {
        archive,
        key,
        settings,
        observer,
        summary: Summary {
            key: key.arn().to_owned(),
            ..Summary::default()
        },
        table: table.map(|t| {
            TableCheck::new(t, settings.now.timestamp())
                .with_attestations(settings.attestations.clone())
        }),
        genesis: None,
        retention: None,
        reported_at_start: HashSet::new(),
        previous: None,
        first_in_range: None,
        seen: Seen::new(),
        seen_objects: Vec::new(),
        reread: HashMap::new(),
        last: None,
        late: HashSet::new(),
        unlisted: Vec::new(),
        log: LogCheck::new(
            &settings.bucket,
            witnesses,
            settings.now.timestamp(),
            settings.grace_seconds,
        ),
    };
    walk.run().await?;
    let mut summary = walk.summary;
    summary.attestations = settings
        .attestations
        .as_ref()
        .map(|a| (a.arn().to_owned(), a.checked()));
    summary.table = walk.table.map(|t| t.summary);
    summary.genesis = walk.genesis;
    summary.log = walk.log.summary;
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
    /// The bucket's default Object Lock retention in days.
    retention: Option<u32>,
    /// Digest keys reported while looking for the chain's start (not reported again).
    reported_at_start: HashSet<String>,
    /// The previous period's digests, when it has any.
    previous: Option<Before>,
    /// The range's first period, while its digest is not seen yet, and the digest it links to
    /// before the range (for the chain's line).
    first_in_range: Option<(Period, Option<String>)>,
    /// Every record of the range's sealed objects: its fingerprint and the object it was first
    /// read in (an index in `seen_objects`: each object's key and version).
    seen: Seen,
    seen_objects: Vec<(Arc<str>, Box<str>)>,
    /// The exact keys of objects read again to confirm a fingerprint found (`None`: gone since),
    /// a few at a time (`REREAD_KEYS`).
    reread: HashMap<u32, Option<HashSet<u128>>>,
    /// The range's last period, until `seen` is sized (`size_seen`).
    last: Option<Period>,
    /// The `late` entries of the digests read: (key, version id).
    late: HashSet<(String, String)>,
    /// Objects in sealed periods' places that their digest does not list, until a later digest's
    /// `late` list explains them.
    unlisted: Vec<Unlisted>,
    /// The transparency log's check.
    log: LogCheck,
}

/// The most exact keys kept of objects read again (`Walk::reread`): about 1 MB.
const REREAD_KEYS: usize = 1 << 16;

/// An object in a sealed period's place that its digest does not list.
struct Unlisted {
    key: String,
    /// Its versions (none that the digest lists as unattested).
    versions: Vec<String>,
    digest_key: String,
}

/// The entries of one period's place, by key (each key's versions newest first, then its delete
/// markers).
type Groups = BTreeMap<String, Vec<Entry>>;

fn report<O: Observer>(
    summary: &mut Summary,
    observer: &mut O,
    problem: Problem,
) -> Result<(), Error> {
    summary.count(problem.kind);
    observer.problem(&problem)
}

impl<A: Archive, T: Table, O: Observer> Walk<'_, A, T, O> {
    fn report(&mut self, problem: Problem) -> Result<(), Error> {
        report(&mut self.summary, self.observer, problem)
    }

    fn report_all(&mut self, problems: Vec<Problem>) -> Result<(), Error> {
        problems.into_iter().try_for_each(|p| self.report(p))
    }

    async fn run(&mut self) -> Result<(), Error> {
        let Some((from, to)) = self.settings.range.bounds() else {
            return Ok(()); // no millisecond between the bounds: nothing to check
        };
        let length = self.settings.length;
        let first = length.period_of(from);
        let last = length.period_of(to);
        let total = u64::try_from((last.start - first.start) / i64::from(length.seconds()) + 1)
            .unwrap_or(0);
        self.last = Some(last);
        self.chain_start(first, last).await?;

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
        self.settle_unlisted(last).await?;
        if self.table.is_some() {
            self.table_items(first, last, to).await?;
        }
        Ok(())
    }

    /// One period: its digest, then its objects.
    async fn period(&mut self, period: Period, entries: Vec<Entry>) -> Result<(), Error> {
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
            self.summary.objects_before_trail += live;
            self.previous = None;
            self.log.unknown();
            if live > 0 {
                let why = self.no_chain_here();
                self.report(Problem::new(
                    ProblemKind::TrailNotSealed,
                    digest_key(period),
                    format!(
                        "{live} object(s) in the place of the period {} to {}, but {why}",
                        time(period.start),
                        time(period.end())
                    ),
                ))?;
            }
            return Ok(());
        }
        if let Some(span) = &mut self.summary.unsealed_span {
            span.newest = false;
        }
        let key = digest_key(period);
        let candidates = digests::load_period(self.archive, period).await?;
        if candidates.is_empty() {
            if let Some((p, _)) = &self.first_in_range
                && *p == period
            {
                self.summary.chain = format!(
                    "not trusted: the range's first period has no digest ({key} is missing)"
                );
                self.first_in_range = None;
            }
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
                self.summary.objects_not_sealed_yet += live;
                let due = period.sealable_at() + self.settings.grace_seconds;
                let span = self.summary.unsealed_span.get_or_insert(Unsealed {
                    from: period.start,
                    due,
                    newest: true,
                });
                span.due = due;
                span.newest = true;
            }
            return self.unsealed(&groups, live).await;
        };
        // The period's digest: the first of its names validly signed, else the first that is a
        // digest at all (its problems reported).
        let judged: Vec<digests::Judged> = candidates
            .iter()
            .map(|l| digests::judge(l, period, &self.settings.bucket, self.key))
            .collect();
        let chosen = judged
            .iter()
            .position(|j| j.signed && j.digest.is_some())
            .or_else(|| judged.iter().position(|j| j.digest.is_some()))
            .unwrap_or(0);
        let loaded = &candidates[chosen];
        for (i, (other, verdict)) in candidates.iter().zip(&judged).enumerate() {
            if i == chosen || self.reported_at_start.contains(&other.key) {
                continue;
            }
            if verdict.signed && judged[chosen].signed {
                self.report(Problem::new(
                    ProblemKind::ChainBroken,
                    &other.key,
                    format!(
                        "a second digest of the period signed by the digest key, beside {}: two different digests for one period",
                        loaded.key
                    ),
                ))?;
            }
            for mut problem in verdict.problems.clone() {
                problem.detail.push_str(&format!(
                    "; another name of the period's digest, which is {}",
                    loaded.key
                ));
                self.report(problem)?;
            }
            let newer = digests::check_newer(self.archive, other, self.key).await?;
            self.report_all(newer)?;
        }
        if let Some((p, linked)) = self.first_in_range.take() {
            if p == period {
                self.summary.chain = match (judged[chosen].signed, linked) {
                    (false, _) => format!(
                        "not trusted: the range's first period's digest {} is not validly signed",
                        loaded.key
                    ),
                    (true, Some(before)) => format!(
                        "trusted from {}: the range's first period; its link to {before} checked",
                        loaded.key
                    ),
                    (true, None) => format!(
                        "trusted from {}: the range's first period; the period before it has no digest signed by the digest key to check its link against",
                        loaded.key
                    ),
                };
            } else {
                self.first_in_range = Some((p, linked));
            }
        }
        if loaded.hidden {
            self.report(Problem::new(
                ProblemKind::DigestMissing,
                &loaded.key,
                format!(
                    "deleted: a delete marker hides it; its sealed version {} is still in the bucket and is checked",
                    loaded.version_id
                ),
            ))?;
        }
        let checked = digests::check(
            loaded,
            period,
            &self.settings.bucket,
            self.key,
            self.previous.as_ref(),
        );
        let problems: Vec<Problem> = checked
            .problems
            .into_iter()
            .filter(|p| !self.reported_at_start.contains(&p.subject))
            .collect();
        self.report_all(problems)?;
        let newer = digests::check_newer(self.archive, loaded, self.key).await?;
        self.report_all(newer)?;
        let digest_key = loaded.key.clone();
        self.previous = Some(Before {
            digests: candidates
                .iter()
                .zip(&judged)
                .map(|(l, j)| (l.sealed(), j.signed))
                .collect(),
        });
        match checked.digest {
            Some(digest) => {
                self.summary.sealed += 1;
                if digest.objects.is_empty() {
                    self.summary.empty += 1;
                }
                if checked.signed {
                    self.remember_late(&digest);
                    self.size_seen(period, &digest).await?;
                }
                self.objects(&digest, &digest_key, checked.signed, groups)
                    .await
            }
            None => {
                // Not a digest: nothing to check its objects against.
                self.log.unknown();
                self.summary.missing += 1;
                self.summary.unsealed_objects += live;
                self.current_events(&groups).await
            }
        }
    }

    /// A period no digest covers (not sealed yet, or its digest missing): its objects counted,
    /// their events handed to the table check.
    async fn unsealed(&mut self, groups: &Groups, live: u64) -> Result<(), Error> {
        self.summary.unsealed_objects += live;
        self.previous = None;
        self.log.unknown();
        self.current_events(groups).await
    }

    /// Why a period before the chain's start cannot be proven (for `trail not sealed`).
    fn no_chain_here(&self) -> String {
        match self.genesis {
            Some(genesis) => format!(
                "it is before the chain's first digest {}: no digest proves it",
                digest_key(genesis)
            ),
            None => format!(
                "the bucket holds no digest chain of {} s periods (never sealed, or not the archiver's --bucket or --period-seconds)",
                self.settings.length.seconds()
            ),
        }
    }
}

/// One version read to its end (`leaves`: each line hashed as a leaf; `attestations`: each line's
/// attestation checked); `None` when it is gone.
async fn read_version<A: Archive>(
    archive: &A,
    key: &str,
    version_id: &str,
    keep: bool,
    keyed: Option<ObjectKind>,
    leaves: bool,
    attestations: Option<Arc<Attestations>>,
) -> Result<Option<Content>, Error> {
    match archive.get(key, version_id).await? {
        Some(fetched) => content::read(fetched, keep, keyed, leaves, attestations)
            .await
            .map(Some),
        None => Ok(None),
    }
}

/// The `item modified` of one tamper line; `None` for a line that is not a tamper record.
fn tamper_problem(object: &str, line: &str) -> Option<Problem> {
    let record: Value = serde_json::from_str(line).ok()?;
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let keys = record.get("keys")?;
    let message_id = keys.get("messageId").and_then(text)?;
    let audit_time = keys
        .get("auditTime")
        .and_then(text)
        .unwrap_or_else(|| "unknown".to_owned());
    let event = record.get("eventName").and_then(text).unwrap_or_default();
    let when = record
        .get("approximateCreationDateTime")
        .and_then(text)
        .unwrap_or_else(|| "an unknown time".to_owned());
    let what = match event.as_str() {
        "REMOVE" => "deleted (a REMOVE that is not TTL's)",
        _ => "changed (a MODIFY)",
    };
    let event_id = record.get("eventID").and_then(text)?;
    Some(Problem::new(
        ProblemKind::ItemModified,
        message_id,
        format!(
            "auditTime {audit_time}: {what} at {when}, stream record {event_id}, archived in {object}; the function only inserts, so the item was tampered with, whether or not it was restored since"
        ),
    ))
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
