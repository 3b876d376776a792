//! Owns finding an event's leaf through the period indexes: the event wanted and the periods it
//! can be in, each period's index read at its name or an alternate (docs/archive.md "Planted log
//! objects"), and what a period without an index is, from its digest. Must not make proofs
//! (`prove`'s) or trust a digest for one.

use audit_model::archive::{Period, PeriodLength};
use audit_model::digest::{
    DIGEST_PREFIX, DIGEST_SUFFIX, Digest, MAX_DIGEST_ALTERNATES, digest_key, parse_any_digest_key,
};
use audit_model::note::{IndexRow, index_key};
use audit_model::tlog::log_names;
use chrono::{DateTime, Utc};

use super::{ProveError, gunzip, period_text, time};
use crate::Error;
use crate::archive::Archive;
use crate::tlog::LogReader;
use crate::verify::{CLOCK_SKEW_SECONDS, LATE_ARCHIVE_SECONDS, SEAL_GRACE_SECONDS, sealed_by};

/// The event to prove: its messageId and auditTime (the table's, or `--audit-time`), and the
/// periods its archive object can have been written in.
#[derive(Debug, Clone)]
pub struct Wanted {
    pub message_id: String,
    pub audit_time: String,
    /// The first and the last period searched, in order.
    pub first: Period,
    pub last: Period,
    /// The event's own period: that of its `receivedAt` (else its auditTime), where the archiver
    /// writes it as a rule. A period not sealed yet is said as this one when it comes before it
    /// (the periods are sealed in order).
    pub own: Period,
}

impl Wanted {
    /// The event `message_id` at `audit_time`, received at `anchor` (its `receivedAt`, else its
    /// auditTime): searched from `anchor` less the clock skew to `anchor` plus the latest an
    /// archive write can be (docs/auditctl.md "prove").
    pub fn around(
        message_id: String,
        audit_time: String,
        anchor: DateTime<Utc>,
        length: PeriodLength,
    ) -> Self {
        Self {
            message_id,
            audit_time,
            first: length.period_of(anchor - chrono::Duration::seconds(CLOCK_SKEW_SECONDS)),
            last: length.period_of(anchor + chrono::Duration::seconds(LATE_ARCHIVE_SECONDS)),
            own: length.period_of(anchor),
        }
    }
}

/// Where the index said the event is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub row: IndexRow,
    pub period: Period,
    /// Periods whose index was read.
    pub searched: u32,
    /// Which of the period index's names gave the row (0: its own; docs/archive.md "Planted log
    /// objects"): when the row gives no proof that holds, the names after it are read.
    pub name: usize,
}

/// What a period without an index is.
pub(crate) enum Unindexed {
    /// Sealed with the log: no trail event in it.
    Empty,
    /// Sealed before the log began: its events are not leaves.
    BeforeLog,
    /// No digest, and a later period has one: before the trail began (or its digest is
    /// missing).
    NoDigest,
}

/// Whether two auditTimes are the same instant (as strings when either is not a time).
pub(super) fn same_time(a: &str, b: &str) -> bool {
    match (
        DateTime::parse_from_rfc3339(a),
        DateTime::parse_from_rfc3339(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The rows of the index object `key` of `period`.
fn index_rows(period: Period, key: &str, bytes: &[u8]) -> Result<Vec<IndexRow>, Error> {
    let broken = |what: String| ProveError::Broken {
        what,
        period: Some(period_text(period)),
    };
    let text = gunzip(bytes).map_err(|e| broken(format!("the index {key} is not gzip ({e})")))?;
    let text =
        String::from_utf8(text).map_err(|_| broken(format!("the index {key} is not text")))?;
    Ok(text
        .lines()
        .map(|line| {
            IndexRow::parse(line).ok_or_else(|| {
                broken(format!(
                    "the index {key} has a line that is not a row: {line:?}"
                ))
            })
        })
        .collect::<Result<_, _>>()?)
}

impl<A: Archive> LogReader<'_, A> {
    /// The rows of `period`'s index, or `None` when it has none: its own name's, or, when that
    /// does not hold an index, the first alternate's that does (an evidence bundle reads every
    /// row; a planted index at the name makes its events' proofs fail, never hold).
    pub async fn index(&self, period: Period) -> Result<Option<Vec<IndexRow>>, Error> {
        let mut first_error = None;
        for name in log_names(&index_key(period)) {
            let Some(bytes) = self.get(&name).await? else {
                break;
            };
            match index_rows(period, &name, &bytes) {
                Ok(rows) => return Ok(Some(rows)),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        first_error.map_or(Ok(None), Err)
    }

    /// The first row of `period`'s index that `wanted` takes: `None` when the period has no
    /// index, `Some(None)` when no row is taken. When its own name does not give one, its
    /// alternates are read in order up to the first that is not there: someone planted an object
    /// at the name and the sealer wrote the index under an alternate (docs/archive.md "Planted
    /// log objects"; a wrong row gives no proof, and `prove` then reads the names after it). An
    /// object that is not an index is passed over while another name gives rows. From the
    /// index's `first` name on (0: its
    /// own), with the position of the name that gave the row.
    pub(super) async fn index_row(
        &self,
        period: Period,
        first: usize,
        wanted: impl Fn(&IndexRow) -> bool,
    ) -> Result<Option<Option<(IndexRow, usize)>>, Error> {
        let mut found = None;
        let mut first_error = None;
        let names = log_names(&index_key(period));
        for (position, name) in names.iter().enumerate().skip(first) {
            let Some(bytes) = self.get(name).await? else {
                break;
            };
            match index_rows(period, name, &bytes) {
                Ok(rows) => {
                    if let Some(row) = rows.into_iter().find(&wanted) {
                        return Ok(Some(Some((row, position))));
                    }
                    found = Some(None);
                }
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        match (found, first_error) {
            (None, Some(error)) => Err(error),
            (found, _) => Ok(found),
        }
    }

    /// What a period with no index is, from its digest (at its name or an alternate): the digest
    /// is only read to tell "nothing to index" from "not sealed yet"; a proof never trusts it.
    /// Not sealed yet, it is said as `own` (the event's period) when `own` comes after it.
    pub(crate) async fn unindexed(
        &self,
        period: Period,
        message_id: &str,
        own: Option<Period>,
        now: i64,
    ) -> Result<Unindexed, Error> {
        let name = digest_key(period);
        let stem = name.strip_suffix(DIGEST_SUFFIX).unwrap_or(&name);
        // One listing: the period's digest (at its name or an alternate: they sort right after
        // the stem) and the digest keys after it.
        let keys = self
            .archive
            .keys(
                DIGEST_PREFIX,
                Some(stem),
                1 + 1 + MAX_DIGEST_ALTERNATES as usize,
            )
            .await?;
        let of = |k: &String| parse_any_digest_key(k, period.length).map(|(p, _)| p);
        let mut digests = Vec::new();
        for key in keys.iter().filter(|k| of(k) == Some(period)) {
            if let Some(bytes) = self.get(key).await?
                && let Ok(digest) = Digest::parse(&bytes)
                && digest.period() == Some(period)
            {
                digests.push((key.clone(), digest));
            }
        }
        if digests.is_empty() {
            // Sealed in order: a digest of a later period means the sealer went past this one
            // (before the trail began, or its digest is missing: `verify`'s to say).
            if keys
                .iter()
                .any(|k| of(k).is_some_and(|p| p.start > period.start))
            {
                return Ok(Unindexed::NoDigest);
            }
            let sealable = period.sealable_at();
            let due = sealable + SEAL_GRACE_SECONDS;
            return Err(if now > due + i64::from(period.length.seconds()) {
                ProveError::Overdue {
                    message_id: message_id.to_owned(),
                    period: period_text(period),
                    due: time(due),
                }
            } else {
                let period = own.filter(|own| own.start > period.start).unwrap_or(period);
                ProveError::NotSealed {
                    message_id: message_id.to_owned(),
                    period: period_text(period),
                    sealed_by: time(sealed_by(&period)),
                }
            }
            .into());
        }
        let mut before_log = false;
        for (key, digest) in digests {
            let Some(tree) = digest.tree else {
                before_log = true;
                continue;
            };
            if self.get(&tree.checkpoint).await?.is_none() {
                return Err(ProveError::LogPending {
                    period: period_text(period),
                    digest: key,
                    checkpoint: tree.checkpoint,
                }
                .into());
            }
            return Ok(Unindexed::Empty);
        }
        Ok(if before_log {
            Unindexed::BeforeLog
        } else {
            Unindexed::Empty
        })
    }

    /// Looks for the event's row in the index of each period from `wanted.first` to
    /// `wanted.last`, in order; stops at the first period not sealed yet.
    pub async fn locate(&self, wanted: &Wanted, now: i64) -> Result<Found, Error> {
        let mut period = wanted.first;
        let mut searched = 0u32;
        let mut before_log = 0u32;
        let mut no_digest = 0u32;
        while period.start <= wanted.last.start {
            let taken = |r: &IndexRow| {
                r.message_id == wanted.message_id && same_time(&r.audit_time, &wanted.audit_time)
            };
            match self.index_row(period, 0, taken).await? {
                Some(row) => {
                    searched += 1;
                    if let Some((row, name)) = row {
                        return Ok(Found {
                            row,
                            period,
                            searched,
                            name,
                        });
                    }
                }
                None => match self
                    .unindexed(period, &wanted.message_id, Some(wanted.own), now)
                    .await?
                {
                    Unindexed::Empty => {}
                    Unindexed::BeforeLog => before_log += 1,
                    Unindexed::NoDigest => no_digest += 1,
                },
            }
            period = period.next();
        }
        Err(ProveError::NotFound {
            message_id: wanted.message_id.clone(),
            audit_time: wanted.audit_time.clone(),
            first: time(wanted.first.start),
            last: time(wanted.last.end()),
            before_log,
            no_digest,
        }
        .into())
    }
}
