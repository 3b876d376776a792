//! Owns reading events back from the archive by their `auditTime`, for a query past the table's
//! hot window (docs/auditctl.md "Past the table's hot window"): every period from the first asked
//! to the last is read, a sealed one through its index (only the objects holding a row whose
//! `auditTime` is asked for are read), any other (not sealed yet, sealed before the log began, or
//! without a digest) by listing its `trail/` objects and reading each. An event is archived in the
//! period it was received in, whatever its `auditTime`, so the caller names the periods. Must not
//! know the table, the command line or how the lines are printed.

use std::collections::BTreeMap;

use audit_model::archive::{
    ObjectKey, ObjectKind, Period, PeriodLength, TRAIL_PREFIX, object_prefixes,
};
use audit_model::tlog::object_lines;
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};

use super::{ProveError, gunzip};
use crate::Error;
use crate::archive::Archive;
use crate::tlog::LogReader;

/// Periods read at once.
pub const PERIODS_IN_FLIGHT: usize = 16;
/// Keys of `trail/dt=` listed at once while looking for the first archive object.
const FIRST_KEYS: usize = 100;

/// What was read from the archive: the lines kept, in period order (the same event may be there
/// twice: an archiver's retried write; the caller orders them and keeps one), and what it took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Archived {
    pub lines: Vec<String>,
    /// Periods read.
    pub periods: u64,
    /// Of them, read through their index (sealed with the log).
    pub indexed: u64,
    /// Archive objects read.
    pub objects: u64,
    /// Objects of unsealed periods passed over because they are not gzip JSON lines (someone
    /// else's; `auditctl verify` reports them).
    pub unreadable: u64,
}

/// One period's share.
struct PeriodRead {
    lines: Vec<String>,
    indexed: bool,
    objects: u64,
    unreadable: u64,
}

impl<A: Archive> LogReader<'_, A> {
    /// The period of the oldest object under `trail/` (one listing), `None` for an archive
    /// without one: no event is archived before it.
    pub async fn first_trail_period(&self, length: PeriodLength) -> Result<Option<Period>, Error> {
        let prefix = format!("{TRAIL_PREFIX}dt=");
        let mut after: Option<String> = None;
        loop {
            // Page by page: keys someone planted before the first of the archiver's are passed
            // over, however many.
            let keys = self
                .archive
                .keys(&prefix, after.as_deref(), FIRST_KEYS)
                .await?;
            let found = keys
                .iter()
                .filter_map(|key| ObjectKey::parse(key))
                .find(|key| key.kind == ObjectKind::Trail && key.written_within_its_period(length));
            if let Some(key) = found {
                return Ok(Some(Period {
                    start: key.period_start,
                    length,
                }));
            }
            if keys.len() < FIRST_KEYS {
                return Ok(None);
            }
            after = keys.last().cloned();
        }
    }

    /// The archived lines whose `auditTime` `keep` takes and that `keep_line` takes (the caller's
    /// filters, so that what is dropped is never held), of every period an event of `from` or
    /// later can have been received in: from the day before `from` (a producer's clock may run
    /// ahead of the receiver's), but no earlier than the archive's first object, to `now`'s
    /// period. With the first period read (`None`: the archive holds no object, nothing read).
    pub async fn archived_from(
        &self,
        length: PeriodLength,
        from: DateTime<Utc>,
        now: DateTime<Utc>,
        keep: &(dyn Fn(&str) -> bool + Sync),
        keep_line: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<(Archived, Option<Period>), Error> {
        let Some(oldest) = self.first_trail_period(length).await? else {
            return Ok((Archived::default(), None));
        };
        let wanted = length.period_of(from - chrono::Duration::days(1));
        let first = if oldest.start > wanted.start {
            oldest
        } else {
            wanted
        };
        let read = self
            .archived(first, length.period_of(now), keep, keep_line)
            .await?;
        Ok((read, Some(first)))
    }

    /// The archived lines of the periods from `first` to `last` whose `auditTime` `keep` takes
    /// and that `keep_line` takes, `PERIODS_IN_FLIGHT` periods read at once.
    pub async fn archived(
        &self,
        first: Period,
        last: Period,
        keep: &(dyn Fn(&str) -> bool + Sync),
        keep_line: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Archived, Error> {
        let mut periods = Vec::new();
        let mut period = first;
        while period.start <= last.start {
            periods.push(period);
            period = period.next();
        }
        let reads: Vec<PeriodRead> = futures::stream::iter(periods)
            .map(|period| self.period_lines(period, keep, keep_line))
            .buffered(PERIODS_IN_FLIGHT)
            .try_collect()
            .await?;
        let mut archived = Archived::default();
        for read in reads {
            archived.periods += 1;
            archived.indexed += u64::from(read.indexed);
            archived.objects += read.objects;
            archived.unreadable += read.unreadable;
            archived.lines.extend(read.lines);
        }
        Ok(archived)
    }

    async fn period_lines(
        &self,
        period: Period,
        keep: &(dyn Fn(&str) -> bool + Sync),
        keep_line: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<PeriodRead, Error> {
        let broken = |what: String| {
            Error::from(ProveError::Broken {
                what,
                period: Some(super::period_text(period)),
            })
        };
        let mut read = PeriodRead {
            lines: Vec::new(),
            indexed: false,
            objects: 0,
            unreadable: 0,
        };
        if let Some(rows) = self.index(period).await? {
            read.indexed = true;
            // The rows asked for, by object: each object read once.
            let mut wanted: BTreeMap<String, Vec<u64>> = BTreeMap::new();
            for row in rows.into_iter().filter(|r| keep(&r.audit_time)) {
                wanted.entry(row.object).or_default().push(row.line_number);
            }
            for (object, numbers) in wanted {
                let bytes = self.get(&object).await?.ok_or_else(|| {
                    broken(format!(
                        "the archive object {object} that the index names is not there"
                    ))
                })?;
                read.objects += 1;
                let text = gunzip(&bytes).map_err(|e| {
                    broken(format!("the archive object {object} is not gzip ({e})"))
                })?;
                let lines = object_lines(&text);
                for number in numbers {
                    let line = usize::try_from(number)
                        .ok()
                        .and_then(|n| lines.get(n))
                        .ok_or_else(|| {
                            broken(format!("the archive object {object} has no line {number}"))
                        })?;
                    let line = String::from_utf8_lossy(line);
                    if keep_line(&line) {
                        read.lines.push(line.into_owned());
                    }
                }
            }
            return Ok(read);
        }
        // No index: not sealed yet, sealed before the log, or no digest. Its objects, as listed.
        for prefix in object_prefixes(period) {
            if !prefix.starts_with(TRAIL_PREFIX) {
                continue;
            }
            for key in self.keys(&prefix, None).await? {
                let Some(bytes) = self.get(&key).await? else {
                    continue;
                };
                read.objects += 1;
                let Ok(text) = gunzip(&bytes) else {
                    read.unreadable += 1;
                    continue;
                };
                for line in object_lines(&text) {
                    let time = serde_json::from_slice::<serde_json::Value>(line)
                        .ok()
                        .and_then(|v| v.get("auditTime")?.as_str().map(str::to_owned));
                    let line = String::from_utf8_lossy(line);
                    if time.is_some_and(|t| keep(&t)) && keep_line(&line) {
                        read.lines.push(line.into_owned());
                    }
                }
            }
        }
        Ok(read)
    }
}
