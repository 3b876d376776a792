//! Owns where the walk's chain starts and how it links into the range (the chain's first digest,
//! or the digest before the range, or why that one is gone), and the late objects that a later
//! digest explains. Must not know the objects' contents or the table.

use super::*;

impl<A: Archive, T: Table, O: Observer> Walk<'_, A, T, O> {
    /// Where the chain starts, and from which digest the range's chain is trusted, and why (the
    /// summary's `chain` line): the chain's first digest when the range reaches back to it, else
    /// the range's first period, linked to the digest before the range.
    pub(super) async fn chain_start(&mut self, first: Period, last: Period) -> Result<(), Error> {
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
    pub(super) async fn expired_predecessor(
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
    pub(super) async fn settle_unlisted(&mut self, last: Period) -> Result<(), Error> {
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
    pub(super) fn remember_late(&mut self, digest: &Digest) {
        for late in &digest.late {
            self.late
                .insert((late.key.clone(), late.version_id.clone()));
        }
        self.explain();
    }

    /// The unlisted objects whose every version a `late` list names: explained, counted.
    pub(super) fn explain(&mut self) {
        let late = &self.late;
        let before = self.unlisted.len();
        self.unlisted.retain(|u| {
            !u.versions
                .iter()
                .all(|v| late.contains(&(u.key.clone(), v.clone())))
        });
        self.summary.late_objects += (before - self.unlisted.len()) as u64;
    }
}
