//! Owns the walk of `verify` over a range: where the chain starts, the link into the range, every
//! UTC hour partition the range's periods write into (listed once, each entry given to its
//! period), and for each period in order: its digest checked, the objects it lists read and
//! checked, every version and delete marker in its place compared with that list, their lines
//! appended to the transparency log's tree (`log`), and the archived events handed to the table
//! check. Must not know the SDK or how problems are printed.
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

use super::content::{self, Content};
use super::digests::{self, Before, Loaded};
use super::key::TrustedKey;
use super::log::{self, LogCheck};
use super::ports::{Archive, Entry, Table};
use super::report::{Observer, Problem, Summary};
use super::seen::{Lookup, Seen};
use super::table::{ArchivedEvent, TableCheck, Window};
use super::{LATE_ARCHIVE_SECONDS, Settings};
use crate::Error;

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
        summary: Summary::default(),
        table: table.map(|t| TableCheck::new(t, settings.now.timestamp())),
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
    summary.table = walk.table.map(|t| t.summary);
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

    /// Where the chain starts, and from which digest the range's chain is trusted, and why (the
    /// summary's `chain` line): the chain's first digest when the range reaches back to it, else
    /// the range's first period, linked to the digest before the range.
    async fn chain_start(&mut self, first: Period, last: Period) -> Result<(), Error> {
        let length = self.settings.length;
        // Read first, once: a reader that may not read it learns so at once, not only on the
        // day the chain's start has expired.
        self.retention = self.archive.default_retention_days().await?;
        let start =
            digests::chain_start(self.archive, self.key, &self.settings.bucket, length).await?;
        for problem in start.problems {
            self.reported_at_start.insert(problem.subject.clone());
            self.report(problem)?;
        }
        let Some((genesis, loaded, digest)) = start.first else {
            self.summary.chain = if start.any_key {
                format!(
                    "none: no key under digest/ is a digest of {} s periods signed by the digest key (is --period-seconds the archiver's DIGEST_PERIOD_SECONDS?)",
                    length.seconds()
                )
            } else {
                format!(
                    "none: the bucket {} holds no digest (never sealed, or not the archive: check --bucket)",
                    self.settings.bucket
                )
            };
            return Ok(());
        };
        self.genesis = Some(genesis);
        if genesis.start > last.start {
            self.summary.chain = format!(
                "none in the range: the chain starts after it, at {}",
                loaded.key
            );
            return Ok(());
        }
        if first.start <= genesis.start {
            self.summary.chain = match &digest.previous {
                None => format!(
                    "trusted from {}: the chain's first digest (previous null)",
                    loaded.key
                ),
                Some(link) => self.expired_predecessor(&loaded, &link.key).await?,
            };
            return Ok(());
        }
        // The link into the range: the digests of the period before it.
        let before = Period {
            start: first.start - i64::from(length.seconds()),
            length,
        };
        let loaded = digests::load_period(self.archive, before).await?;
        let tree_before = loaded.iter().find_map(|l| {
            let judged = digests::judge(l, before, &self.settings.bucket, self.key);
            judged
                .digest
                .filter(|_| judged.signed)
                .map(|d| match d.tree {
                    Some(tree) => log::Before::Tree(tree, l.key.clone()),
                    None => log::Before::NoTree,
                })
        });
        self.log
            .set_before(tree_before.unwrap_or(log::Before::Unknown));
        let previous = Before::of(&loaded, before, &self.settings.bucket, self.key);
        let linked = previous
            .digests
            .iter()
            .find(|(_, signed)| *signed)
            .map(|(d, _)| d.key.clone());
        self.previous = (!previous.digests.is_empty()).then_some(previous);
        self.first_in_range = Some((first, linked));
        Ok(())
    }

    /// The chain's first validly signed digest links to `predecessor`, which is not there: lawful
    /// when the bucket's default retention may have let it expire, else `chain broken`. The
    /// chain's line.
    async fn expired_predecessor(
        &mut self,
        first: &Loaded,
        predecessor: &str,
    ) -> Result<String, Error> {
        let length = self.settings.length;
        let Some((gone, _)) = audit_model::digest::parse_any_digest_key(predecessor, length) else {
            // Its link names no digest of the period before: the walk reports the link.
            return Ok(format!(
                "trusted from {}: the first digest the digest key signed",
                first.key
            ));
        };
        let retention = self.retention;
        let now = self.settings.now.timestamp();
        // Written no earlier than its period could be sealed; kept at least the retention after.
        let kept_until = retention.map(|days| gone.sealable_at() + i64::from(days) * 86_400);
        match (retention, kept_until) {
            (Some(days), Some(until)) if now >= until => Ok(format!(
                "trusted from {}: its predecessor {predecessor} is older than the bucket's Object Lock retention of {days} days and may have expired lawfully",
                first.key
            )),
            _ => {
                let why = match (retention, kept_until) {
                    (Some(days), Some(until)) => format!(
                        "the bucket's Object Lock retention of {days} days keeps it until {}",
                        time(until)
                    ),
                    _ => "the bucket has no default Object Lock retention to have let it expire"
                        .to_owned(),
                };
                self.report(Problem::new(
                    ProblemKind::ChainBroken,
                    &first.key,
                    format!(
                        "the first digest the digest key signed, but it links to {predecessor}, which is gone (not even a delete marker is left of it), though {why}"
                    ),
                ))?;
                Ok(format!(
                    "trusted from {}: the first digest the digest key signed; its predecessor {predecessor} is gone before its time (chain broken)",
                    first.key
                ))
            }
        }
    }

    /// The objects of sealed periods that their digest does not list: explained by a `late` list
    /// of a digest read, or of a later digest (read on after the range, until every one is
    /// explained or the newest period); the rest are `object not in digest`.
    async fn settle_unlisted(&mut self, last: Period) -> Result<(), Error> {
        let now = self.settings.now.timestamp();
        let mut period = last.next();
        loop {
            self.explain();
            if self.unlisted.is_empty() || period.sealable_at() > now {
                break;
            }
            for loaded in digests::load_period(self.archive, period).await? {
                let judged = digests::judge(&loaded, period, &self.settings.bucket, self.key);
                if let (true, Some(digest)) = (judged.signed, judged.digest) {
                    self.remember_late(&digest);
                }
            }
            period = period.next();
        }
        for unlisted in std::mem::take(&mut self.unlisted) {
            let version = unlisted
                .versions
                .iter()
                .find(|v| !self.late.contains(&(unlisted.key.clone(), (*v).clone())))
                .cloned()
                .unwrap_or_default();
            self.report(Problem::new(
                ProblemKind::ObjectNotInDigest,
                &unlisted.key,
                format!(
                    "version {version} is in the place of a sealed period, but its digest {} does not list it, nor does a later digest's list of late objects",
                    unlisted.digest_key
                ),
            ))?;
        }
        Ok(())
    }

    /// A digest's `late` entries, remembered.
    fn remember_late(&mut self, digest: &Digest) {
        for late in &digest.late {
            self.late
                .insert((late.key.clone(), late.version_id.clone()));
        }
        self.explain();
    }

    /// The unlisted objects whose every version a `late` list names: explained, counted.
    fn explain(&mut self) {
        let late = &self.late;
        let before = self.unlisted.len();
        self.unlisted.retain(|u| {
            !u.versions
                .iter()
                .all(|v| late.contains(&(u.key.clone(), v.clone())))
        });
        self.summary.late_objects += (before - self.unlisted.len()) as u64;
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
            }
            self.summary.unsealed_objects += live;
            self.previous = None;
            self.log.unknown();
            return self.current_events(&groups).await;
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

    /// The objects a digest lists, against what the bucket holds in the period's place; with
    /// `signed` and a tree, their lines against the transparency log.
    async fn objects(
        &mut self,
        digest: &Digest,
        digest_key: &str,
        signed: bool,
        groups: Groups,
    ) -> Result<(), Error> {
        let listed: BTreeMap<&str, _> =
            digest.objects.iter().map(|o| (o.key.as_str(), o)).collect();
        let unattested: HashSet<(&str, &str)> = digest
            .unattested
            .iter()
            .map(|u| (u.key.as_str(), u.version_id.as_str()))
            .collect();
        for object in &digest.unattested {
            self.summary.unattested += 1;
            let sha256 = if object.sha256.is_empty() {
                "unknown SHA-256".to_owned()
            } else {
                format!("SHA-256 {}", object.sha256)
            };
            self.report(Problem::new(
                ProblemKind::ObjectNotAttested,
                &object.key,
                format!(
                    "version {} ({sha256}, {} bytes) was in the period's place when it was sealed, but no marker attests it: {}; its digest {digest_key} lists it apart from the trail",
                    object.version_id, object.size, object.reason
                ),
            ))?;
        }
        for (key, group) in &groups {
            let Some(object) = listed.get(key.as_str()) else {
                let versions: Vec<String> = group
                    .iter()
                    .filter(|e| !e.delete_marker)
                    .filter(|e| !unattested.contains(&(key.as_str(), e.version_id.as_str())))
                    .map(|e| e.version_id.clone())
                    .collect();
                let only_markers = group.iter().all(|e| e.delete_marker);
                if only_markers {
                    self.report(Problem::new(
                        ProblemKind::ObjectNotInDigest,
                        key,
                        format!(
                            "a delete marker of a key that its period's digest {digest_key} does not list"
                        ),
                    ))?;
                } else if !versions.is_empty() {
                    // Explained only by a later digest's list of late objects, if at all.
                    self.unlisted.push(Unlisted {
                        key: key.clone(),
                        versions,
                        digest_key: digest_key.to_owned(),
                    });
                    self.explain();
                }
                continue;
            };
            let sealed_at = group
                .iter()
                .position(|e| !e.delete_marker && e.version_id == object.version_id);
            for (i, other) in group.iter().enumerate() {
                if other.delete_marker
                    || other.version_id == object.version_id
                    || unattested.contains(&(key.as_str(), other.version_id.as_str()))
                {
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

        let keep_trail = self.table.is_some();
        let archive = self.archive;
        let reader = crate::tlog::LogReader { archive };
        // The period's leaves, appended in the digest's order as its objects are read.
        let mut leaves = if signed {
            let (leaves, problems) = self.log.start(&reader, digest, digest_key).await?;
            self.report_all(problems)?;
            leaves
        } else {
            self.log.unknown();
            None
        };
        let hash_leaves = leaves.is_some();
        let mut reads = futures::stream::iter(digest.objects.iter())
            .map(|object| async move {
                let kind = kind_of(&object.key);
                let keep = kind == ObjectKind::Tamper || keep_trail;
                let read = read_version(
                    archive,
                    &object.key,
                    &object.version_id,
                    keep,
                    Some(kind),
                    hash_leaves,
                )
                .await;
                (object, read)
            })
            .buffered(self.settings.concurrency.max(1));
        while let Some((object, read)) = reads.next().await {
            let Some(mut content) = read? else {
                self.report(Problem::new(
                    ProblemKind::ObjectMissing,
                    &object.key,
                    format!("its sealed version {} is gone", object.version_id),
                ))?;
                continue;
            };
            if let Some(leaves) = leaves.as_mut() {
                leaves.push(&std::mem::take(&mut content.leaves));
                if leaves.due() {
                    leaves.compare(&reader).await?;
                }
            }
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
            let keys = std::mem::take(&mut content.keys);
            let twice = self
                .duplicates(&object.key, &object.version_id, keys)
                .await?;
            match kind {
                ObjectKind::Trail => self.compare_events(&object.key, content).await?,
                ObjectKind::Tamper => self.tampered(&object.key, &content, &twice)?,
            }
        }
        drop(reads);
        if let Some(leaves) = leaves {
            let problems = self.log.finish(&reader, leaves).await?;
            self.report_all(problems)?;
        }
        if signed {
            let problems = self
                .log
                .checkpoint(&reader, self.key.log(), digest, digest_key)
                .await?;
            self.report_all(problems)?;
        }
        self.flush_table().await
    }

    /// `seen` sized once, at the range's first signed digest, before its objects are read: the
    /// range holds at most the log's leaves from before this period to the end of the last
    /// (the last period's signed digest read once more here; its tree size is the log's size
    /// then, this digest's less its events the size before). Without a tree (digests sealed
    /// before the log) or a signed last digest, it grows as records come.
    async fn size_seen(&mut self, period: Period, digest: &Digest) -> Result<(), Error> {
        let Some(last) = self.last.take() else {
            return Ok(());
        };
        let Some(tree) = &digest.tree else {
            return Ok(());
        };
        let before = tree.size.saturating_sub(digest.events);
        let end = if last == period {
            Some(tree.size)
        } else {
            digests::load_period(self.archive, last)
                .await?
                .iter()
                .map(|l| digests::judge(l, last, &self.settings.bucket, self.key))
                .find(|j| j.signed)
                .and_then(|j| j.digest)
                .and_then(|d| d.tree)
                .map(|t| t.size)
        };
        if let Some(end) = end {
            // A tree of more than 2^32 leaves is not this range's: left to grow.
            let records = end.saturating_sub(before);
            if records <= u64::from(u32::MAX) {
                self.seen.reserve(records);
            }
        }
        Ok(())
    }

    /// The records of a sealed object: each one already read in another sealed object of the
    /// range (or earlier in this one) is `event duplicated`. Returns the positions of this
    /// object's records that were duplicates (among its keyed lines).
    async fn duplicates(
        &mut self,
        object: &str,
        version_id: &str,
        keys: Vec<content::LineKey>,
    ) -> Result<HashSet<usize>, Error> {
        let index = u32::try_from(self.seen_objects.len()).unwrap_or(u32::MAX);
        self.seen_objects
            .push((Arc::from(object), Box::from(version_id)));
        // This object's keys, each at its first position, made on its first fingerprint found
        // in it.
        let mut here: Option<HashMap<u128, usize>> = None;
        let mut twice = HashSet::new();
        for (at, line) in keys.iter().enumerate() {
            let first = match self.seen.lookup(line.key, index) {
                Lookup::New => continue,
                Lookup::Duplicate(first) => first,
                // Only a fingerprint was found: a record of `first` has the same one. It is this
                // record again only if `first` holds its exact key (before it, when `first` is
                // this object); else the two differ and this one is kept whole. The exact keys
                // are not kept for every record (16 bytes more each), so `first` is read again:
                // that happens for each object of a duplicate (its keys are then kept for the
                // next ones) and for a false 64-bit collision (about 1 in 2^64 / n a record).
                Lookup::Confirm(first) => {
                    let holds = if first == index {
                        let here = here.get_or_insert_with(|| {
                            let mut positions = HashMap::with_capacity(keys.len());
                            for (position, key) in keys.iter().enumerate() {
                                positions.entry(key.key).or_insert(position);
                            }
                            positions
                        });
                        here.get(&line.key).is_some_and(|position| *position < at)
                    } else {
                        self.holds(first, line.key).await?
                    };
                    if !holds {
                        self.seen.remember_exact(line.key, index);
                        continue;
                    }
                    first
                }
            };
            twice.insert(at);
            self.summary.duplicated += 1;
            let first = self
                .seen_objects
                .get(first as usize)
                .map(|(o, _)| o.to_string())
                .unwrap_or_default();
            let detail = if first == object {
                format!("archived twice in {object}")
            } else {
                format!("archived in {object}, and already in {first}")
            };
            self.report(Problem::new(
                ProblemKind::EventDuplicated,
                &*line.message_id,
                detail,
            ))?;
        }
        Ok(twice)
    }

    /// Whether the sealed object `first` (read earlier in the walk) holds a record of exact key
    /// `key`: its version read again, its keys kept for the next questions. A version gone since
    /// is `object missing`, and holds nothing (none of its records can be compared any more).
    async fn holds(&mut self, first: u32, key: u128) -> Result<bool, Error> {
        if !self.reread.contains_key(&first) {
            let Some((object, version_id)) = self.seen_objects.get(first as usize).cloned() else {
                return Ok(false);
            };
            let kind = kind_of(&object);
            let read =
                read_version(self.archive, &object, &version_id, false, Some(kind), false).await?;
            let keys: Option<HashSet<u128>> =
                read.map(|content| content.keys.iter().map(|k| k.key).collect());
            if keys.is_none() {
                self.report(Problem::new(
                    ProblemKind::ObjectMissing,
                    &*object,
                    format!("its sealed version {version_id}, read earlier in this run, is gone"),
                ))?;
            }
            let kept: usize = self.reread.values().flatten().map(HashSet::len).sum();
            if kept + keys.as_ref().map_or(0, HashSet::len) > REREAD_KEYS {
                self.reread.clear();
            }
            self.reread.insert(first, keys);
        }
        Ok(self
            .reread
            .get(&first)
            .and_then(Option::as_ref)
            .is_some_and(|keys| keys.contains(&key)))
    }

    /// The lines of a tamper object: each record (a MODIFY, or a REMOVE that is not TTL's) is
    /// `item modified`, whether the item was restored since or not. `twice`: positions of
    /// records already reported (archived twice).
    fn tampered(
        &mut self,
        object: &str,
        content: &Content,
        twice: &HashSet<usize>,
    ) -> Result<(), Error> {
        let mut keyed = 0usize;
        for line in &content.kept {
            let Some(problem) = tamper_problem(object, line) else {
                continue;
            };
            let at = keyed;
            keyed += 1;
            if !twice.contains(&at) {
                self.report(problem)?;
            }
        }
        Ok(())
    }

    /// The current objects of a period no digest covers (not sealed yet, or its digest missing):
    /// not checked against a digest, but its tamper records are `item modified` all the same, and
    /// with `--table` its trail events are archived events.
    async fn current_events(&mut self, groups: &Groups) -> Result<(), Error> {
        for (key, group) in groups {
            let Some(current) = group.iter().find(|e| e.latest && !e.delete_marker) else {
                continue;
            };
            let kind = kind_of(key);
            if kind == ObjectKind::Trail && self.table.is_none() {
                continue;
            }
            let Some(content) =
                read_version(self.archive, key, &current.version_id, true, None, false).await?
            else {
                continue;
            };
            match kind {
                ObjectKind::Trail => self.compare_events(key, content).await?,
                ObjectKind::Tamper => self.tampered(key, &content, &HashSet::new())?,
            }
        }
        self.flush_table().await
    }

    async fn compare_events(&mut self, key: &str, content: Content) -> Result<(), Error> {
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

    async fn flush_table(&mut self) -> Result<(), Error> {
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
    ) -> Result<(), Error> {
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
                let Some(content) = read_version(
                    self.archive,
                    &entry.key,
                    &entry.version_id,
                    true,
                    None,
                    false,
                )
                .await?
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
    /// events, the look-ahead periods after the range read first; then the periods of items
    /// found nowhere near the range, up to `--archive-lag` after their `receivedAt`; then, for
    /// those still not found, the periods up to `LATE_ARCHIVE_SECONDS` after it (archived late).
    async fn table_items(
        &mut self,
        first: Period,
        last: Period,
        to: DateTime<Utc>,
    ) -> Result<(), Error> {
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
        let why = self.no_chain_here();
        let Some(table) = self.table.as_mut() else {
            return Ok(());
        };
        let (pending, unsealed) = table
            .items(&range, window, lag, LATE_ARCHIVE_SECONDS)
            .await?;
        for problem in unsealed.problems(&why) {
            self.report(problem)?;
        }

        // The periods they can be in, each read once: first as far as `--archive-lag`, then as
        // far as a record can be late.
        let mut read: BTreeSet<i64> = (window.first..=window.last)
            .step_by(usize::try_from(step).unwrap_or(1))
            .collect();
        let mut pending = pending;
        for late in [false, true] {
            let mut periods = BTreeSet::new();
            for item in &pending {
                let end = if late { item.late_last } else { item.last };
                let mut start = item.first;
                while start <= end.min(now) {
                    if !read.contains(&start) && sealed_or_after(start) {
                        periods.insert(start);
                    }
                    start += step;
                }
            }
            let wanted: HashSet<u128> = pending.iter().map(|p| p.key()).collect();
            for start in periods {
                self.remember_period(Period { start, length }, Some(&wanted))
                    .await?;
                read.insert(start);
                extra += 1;
            }
            if let Some(table) = self.table.as_mut() {
                pending = table.found(pending, late);
            }
        }
        if let Some(table) = self.table.as_mut() {
            table.summary.extra_periods = extra;
            let problems: Vec<Problem> = pending.iter().map(|p| p.problem()).collect();
            self.report_all(problems)?;
        }
        Ok(())
    }
}

/// One version read to its end (`leaves`: each line hashed as a leaf); `None` when it is gone.
async fn read_version<A: Archive>(
    archive: &A,
    key: &str,
    version_id: &str,
    keep: bool,
    keyed: Option<ObjectKind>,
    leaves: bool,
) -> Result<Option<Content>, Error> {
    match archive.get(key, version_id).await? {
        Some(fetched) => content::read(fetched, keep, keyed, leaves).await.map(Some),
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
