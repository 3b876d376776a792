//! Owns what the walk hands to the table check: the archived events of sealed and unsealed
//! periods, and the table's items of the range read by period. Must not know digests or the log.

use super::*;
use crate::verify::attest::Unattested;

impl<A: Archive, T: Table, O: Observer> Walk<'_, A, T, O> {
    /// The current objects of a period no digest covers (not sealed yet, or its digest missing):
    /// not checked against a digest, but its tamper records are `item modified` all the same, and
    /// with `--table` its trail events are archived events.
    pub(super) async fn current_events(&mut self, groups: &Groups) -> Result<(), Error> {
        for (key, group) in groups {
            let Some(current) = group.iter().find(|e| e.latest && !e.delete_marker) else {
                continue;
            };
            let kind = kind_of(key);
            let attestations = self.settings.attestations.clone();
            if kind == ObjectKind::Trail && self.table.is_none() && attestations.is_none() {
                continue;
            }
            let attest = attestations.filter(|_| kind == ObjectKind::Trail);
            let Some(mut content) = read_version(
                self.archive,
                key,
                &current.version_id,
                true,
                None,
                false,
                attest,
            )
            .await?
            else {
                continue;
            };
            for unattested in std::mem::take(&mut content.unattested) {
                self.unattested(&unattested, key)?;
            }
            match kind {
                ObjectKind::Trail => self.compare_events(key, content).await?,
                ObjectKind::Tamper => self.tampered(key, &content, &HashSet::new())?,
            }
        }
        self.flush_table().await
    }

    pub(super) async fn compare_events(
        &mut self,
        key: &str,
        content: Content,
    ) -> Result<(), Error> {
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

    /// An archived line that is not attested: `item not attested`, once per item.
    pub(super) fn unattested(
        &mut self,
        unattested: &Unattested,
        object: &str,
    ) -> Result<(), Error> {
        let problem = self
            .settings
            .attestations
            .as_ref()
            .and_then(|a| a.problem(unattested, &format!("archived in {object}")));
        match problem {
            Some(problem) => self.report(problem),
            None => Ok(()),
        }
    }

    pub(super) async fn flush_table(&mut self) -> Result<(), Error> {
        let Some(table) = self.table.as_mut() else {
            return Ok(());
        };
        let problems = table.flush().await?;
        self.report_all(problems)
    }

    /// The current trail objects of `period` (whether sealed or not), their events remembered
    /// for the item check: only those of `wanted`, when given.
    pub(super) async fn remember_period(
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
                    None,
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
    pub(super) async fn table_items(
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
        if let Some(table) = self.table.as_mut() {
            let problems = std::mem::take(&mut table.unattested);
            self.report_all(problems)?;
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
            table.summary.not_archived = pending.len() as u64;
            let problems: Vec<Problem> = pending.iter().map(|p| p.problem()).collect();
            self.report_all(problems)?;
        }
        Ok(())
    }
}
