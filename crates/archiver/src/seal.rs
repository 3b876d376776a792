//! Owns sealing: on each scheduled invocation, every period that has ended and whose writes can no
//! longer be in flight (`Period::sealable_at`, `audit_model::archive`) and that has no digest yet
//! gets one, in period order, each chained to the one before: the list of the period's objects
//! (key, the version the archiver wrote, SHA-256, events), signed with the digest key. Must not
//! know S3, KMS or the stream.
//!
//! Why no archive write of a sealed period can still appear: an object's key names the period in
//! which its write was *started*; no write of period P starts after `end(P) + WRITE_START_SLACK`,
//! every write is dropped `OBJECT_WRITE_TIMEOUT` after it starts, and S3 finishes or forgets a
//! dropped request within `LAND_GRACE`. Sealing waits for all three (`SEAL_DELAY`), so a digest
//! lists every object its period will ever have; anything that appears later is not the
//! archiver's, and `auditctl verify` reports it (docs/archive.md "Digests").
//!
//! Where the chain starts: at the newest digest there is; with none, at the period of the oldest
//! archive object (or the newest sealable period of an empty archive). Where it goes on after a
//! pause: from its newest digest, so a schedule that stopped for a day seals the whole day when
//! it runs again. Two sealers at once cannot fork it: each digest is created with
//! `If-None-Match: *`, and the loser chains on from the winner's digest.

use std::io::Read;
use std::time::Duration;

use audit_model::archive::{
    OBJECT_WRITE_TIMEOUT, ObjectKey, Period, PeriodLength, SEAL_DELAY, TAMPER_PREFIX, TRAIL_PREFIX,
    object_prefixes,
};
use audit_model::digest::{
    DIGEST_PREFIX, Digest, ListedObject, SIGNATURE_ALGORITHM_METADATA, SIGNATURE_METADATA,
    SIGNING_ALGORITHM, SealedDigest, digest_key, hex, parse_digest_key, sha256, signing_string_of,
    unhex,
};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};

use crate::bucket::{ArchiveBucket, BucketError, Created, NewObject, VersionEntry};
use crate::budget::{Budget, StepError};
use crate::signer::{DigestSigner, SignError};

/// How many periods back the newest digest is looked for with one listing before the whole
/// `digest/` prefix is listed (48 hours in AWS).
pub const HEAD_WINDOW_PERIODS: i64 = 48;
/// Time kept in hand to seal one more period (a few listings, HEADs, a signature, a PUT).
pub const PERIOD_STEP_TIME: Duration = Duration::from_secs(10);
/// Requests in flight while reading a period's objects.
const HEAD_CONCURRENCY: usize = 16;

/// What one sealing run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SealReport {
    /// The newest period that could be sealed at the run's start.
    pub due: Option<Period>,
    /// Digests this run wrote, in period order.
    pub sealed: Vec<SealedPeriod>,
    /// Digests another sealer wrote first (this run chained on from them).
    pub found: Vec<String>,
    /// The newest digest after the run (its key and the end of its period).
    pub head: Option<(String, i64)>,
    /// Sealable periods left without a digest (the deadline came first, or a failure).
    pub left: u64,
    pub failure: Option<SealError>,
}

impl SealReport {
    /// Seconds from the end of the newest sealed period to `now` (what the alarm watches); from
    /// the end of the newest due period when nothing was ever sealed.
    pub fn lag_seconds(&self, now: DateTime<Utc>) -> i64 {
        let end = self
            .head
            .as_ref()
            .map(|(_, end)| *end)
            .or(self.due.map(Period::end))
            .unwrap_or_else(|| now.timestamp());
        (now.timestamp() - end).max(0)
    }
}

/// One digest written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedPeriod {
    pub key: String,
    pub objects: usize,
    pub events: u64,
}

/// Why a run stopped short.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error(transparent)]
    Bucket(#[from] BucketError),
    #[error(transparent)]
    Sign(#[from] SignError),
    /// The newest digest cannot be chained on (unreadable, unsigned): someone has to look.
    #[error("the digest {key} cannot be chained on: {why}")]
    BadHead { key: String, why: String },
    /// An object listed for a digest could not be read back.
    #[error("{key}: {why}")]
    BadObject { key: String, why: String },
    #[error("the invocation's deadline (less its margin) came first")]
    Deadline,
}

impl SealError {
    pub fn code(&self) -> &str {
        match self {
            Self::Bucket(error) => error.code(),
            Self::Sign(error) => error.code(),
            Self::BadHead { .. } => "bad_head",
            Self::BadObject { .. } => "bad_object",
            Self::Deadline => "deadline",
        }
    }
}

impl From<StepError> for SealError {
    fn from(error: StepError) -> Self {
        match error {
            StepError::Bucket(error) => Self::Bucket(error),
            StepError::Deadline => Self::Deadline,
        }
    }
}

/// The bucket, the key and their names.
pub struct Sealer<'a, B, S> {
    pub bucket: &'a B,
    pub signer: &'a S,
    /// The bucket's name (digests and signing strings name it).
    pub bucket_name: &'a str,
    pub period: PeriodLength,
}

/// The newest period sealable at `now`: the one before the period containing `now - SEAL_DELAY`.
pub fn newest_sealable(now: DateTime<Utc>, length: PeriodLength) -> Period {
    let containing =
        length.period_of(now - chrono::Duration::from_std(SEAL_DELAY).unwrap_or_default());
    Period {
        start: containing.start - i64::from(length.seconds()),
        length,
    }
}

impl<B: ArchiveBucket, S: DigestSigner> Sealer<'_, B, S> {
    /// Seals every due period without a digest, oldest first, while the budget lasts.
    pub async fn run(&self, now: DateTime<Utc>, budget: Budget) -> SealReport {
        let due = newest_sealable(now, self.period);
        let mut report = SealReport {
            due: Some(due),
            ..SealReport::default()
        };
        if let Err(error) = self.seal_up_to(due, now, budget, &mut report).await {
            report.failure = Some(error);
        }
        if let Some((_, end)) = &report.head {
            let step = i64::from(self.period.seconds());
            report.left = u64::try_from((due.end() - end) / step).unwrap_or(0);
        } else {
            report.left = 1;
        }
        report
    }

    async fn seal_up_to(
        &self,
        due: Period,
        now: DateTime<Utc>,
        budget: Budget,
        report: &mut SealReport,
    ) -> Result<(), SealError> {
        let (mut previous, mut next) = match self.newest_digest(due, budget).await? {
            Some(period) => {
                let head = self.read_sealed(&digest_key(period), budget).await?;
                report.head = Some((head.key.clone(), period.end()));
                (Some(head), period.next())
            }
            None => (None, self.first_period(due, budget).await?),
        };
        while next.start <= due.start {
            if !budget.allows(PERIOD_STEP_TIME, Duration::ZERO) {
                return Err(SealError::Deadline);
            }
            // A digest of `next` hidden by a delete marker is still the chain's: go on from it
            // rather than seal the period a second time.
            let key = digest_key(next);
            let (sealed, written) = match self.original_digest(&key, budget).await? {
                Some(object) => (sealed_from(&key, Some(object))?, None),
                None => {
                    self.seal_period(next, previous.as_ref(), now, budget)
                        .await?
                }
            };
            match written {
                Some(written) => report.sealed.push(written),
                None => report.found.push(sealed.key.clone()),
            }
            report.head = Some((sealed.key.clone(), next.end()));
            previous = Some(sealed);
            next = next.next();
        }
        Ok(())
    }

    /// The newest period up to `due` with a digest: one listing of the last
    /// [`HEAD_WINDOW_PERIODS`], else the whole prefix.
    async fn newest_digest(
        &self,
        due: Period,
        budget: Budget,
    ) -> Result<Option<Period>, SealError> {
        let step = i64::from(self.period.seconds());
        let window_start = digest_key(Period {
            start: due.start - HEAD_WINDOW_PERIODS * step,
            length: self.period,
        });
        let mut newest = None;
        let mut after = Some(window_start);
        for whole in [false, true] {
            if whole {
                after = None;
            }
            loop {
                let keys = budget
                    .run(
                        OBJECT_WRITE_TIMEOUT,
                        self.bucket.list_keys(DIGEST_PREFIX, after.as_deref(), 1000),
                    )
                    .await?;
                newest = keys
                    .iter()
                    .filter_map(|k| parse_digest_key(k, self.period))
                    .filter(|p| p.start <= due.start)
                    .map(|p| p.start)
                    .chain(newest)
                    .max();
                match keys.last() {
                    Some(last) if keys.len() == 1000 => after = Some(last.clone()),
                    _ => break,
                }
            }
            if newest.is_some() {
                break;
            }
        }
        Ok(newest.map(|start| Period {
            start,
            length: self.period,
        }))
    }

    /// Where a new chain starts: the oldest archive object's period, or `due` when there is none.
    async fn first_period(&self, due: Period, budget: Budget) -> Result<Period, SealError> {
        let mut first = due.start;
        for prefix in [TAMPER_PREFIX, TRAIL_PREFIX] {
            let keys = budget
                .run(
                    OBJECT_WRITE_TIMEOUT,
                    self.bucket.list_keys(prefix, None, 100),
                )
                .await?;
            if let Some(start) = keys
                .iter()
                .filter_map(|k| ObjectKey::parse(k))
                .filter(|k| k.written_within_its_period(self.period))
                .map(|k| k.period_start)
                .min()
            {
                first = first.min(start);
            }
        }
        Ok(Period {
            start: first,
            length: self.period,
        })
    }

    /// A stored digest as the next one links to it: the version the sealer wrote (the key's
    /// oldest), whatever was put over it or hid it since (`auditctl verify` reports those).
    async fn read_sealed(&self, key: &str, budget: Budget) -> Result<SealedDigest, SealError> {
        let object = self.original_digest(key, budget).await?;
        sealed_from(key, object)
    }

    /// The first version of the digest at `key`, when it has one (current, overwritten or hidden
    /// by a delete marker).
    async fn original_digest(
        &self,
        key: &str,
        budget: Budget,
    ) -> Result<Option<crate::bucket::StoredObject>, SealError> {
        let versions = budget
            .run(OBJECT_WRITE_TIMEOUT, self.bucket.list_versions(key))
            .await?;
        let Some(first) = versions
            .iter()
            .rev()
            .find(|v| v.key == key && !v.delete_marker)
        else {
            return Ok(None);
        };
        Ok(budget
            .run(
                OBJECT_WRITE_TIMEOUT,
                self.bucket.get_version(key, &first.version_id),
            )
            .await?)
    }

    /// Lists, signs and writes `period`'s digest; `None` when another sealer wrote it first.
    async fn seal_period(
        &self,
        period: Period,
        previous: Option<&SealedDigest>,
        now: DateTime<Utc>,
        budget: Budget,
    ) -> Result<(SealedDigest, Option<SealedPeriod>), SealError> {
        let objects = self.list_period(period, budget).await?;
        let digest = Digest::new(
            self.bucket_name,
            period,
            now,
            objects,
            previous.map(SealedDigest::as_previous),
            self.signer.key_arn(),
        );
        let key = digest_key(period);
        let body = digest.to_bytes();
        let hash = sha256(&body);
        let signature = self
            .signer
            .sign(signing_string_of(&digest, &key, &hash).as_bytes())
            .await?;
        let sealed = SealedDigest {
            key: key.clone(),
            sha256: hash,
            signature,
        };
        let object = NewObject {
            key: key.clone(),
            body: Bytes::from(body),
            content_type: "application/json",
            sha256: hash,
            metadata: vec![
                (SIGNATURE_METADATA, hex(&sealed.signature)),
                (SIGNATURE_ALGORITHM_METADATA, SIGNING_ALGORITHM.to_owned()),
            ],
        };
        match budget
            .run(OBJECT_WRITE_TIMEOUT, self.bucket.put_if_absent(object))
            .await?
        {
            Created::New { .. } => Ok((
                sealed,
                Some(SealedPeriod {
                    key,
                    objects: digest.objects.len(),
                    events: digest.events,
                }),
            )),
            Created::AlreadyExists => Ok((self.read_sealed(&key, budget).await?, None)),
        }
    }

    /// The period's objects, each at the version the archiver wrote (its oldest: the archiver
    /// never writes a key twice, so a newer version or a delete marker is someone else's, and
    /// `auditctl verify` reports it). Keys that are not the archiver's are left out, so that
    /// `verify` reports them too.
    async fn list_period(
        &self,
        period: Period,
        budget: Budget,
    ) -> Result<Vec<ListedObject>, SealError> {
        let mut originals: Vec<VersionEntry> = Vec::new();
        for prefix in object_prefixes(period) {
            let entries = budget
                .run(OBJECT_WRITE_TIMEOUT, self.bucket.list_versions(&prefix))
                .await?;
            for (key, versions) in by_key(&entries) {
                let ours = ObjectKey::parse(key).is_some_and(|k| {
                    k.period_start == period.start && k.written_within_its_period(self.period)
                });
                if let Some(original) = versions.iter().rev().find(|v| !v.delete_marker)
                    && ours
                {
                    originals.push((*original).clone());
                }
            }
        }
        futures::stream::iter(originals)
            .map(|entry| self.list_object(entry, budget))
            .buffered(HEAD_CONCURRENCY)
            .try_filter_map(|listed| async move { Ok(listed) })
            .try_collect()
            .await
    }

    async fn list_object(
        &self,
        entry: VersionEntry,
        budget: Budget,
    ) -> Result<Option<ListedObject>, SealError> {
        let Some(info) = budget
            .run(
                OBJECT_WRITE_TIMEOUT,
                self.bucket.head_version(&entry.key, &entry.version_id),
            )
            .await?
        else {
            return Ok(None);
        };
        let (sha256, events) = match (info.sha256, info.events) {
            (Some(hash), Some(events)) => (hash, events),
            _ => {
                // Not written with a checksum and an event count: read it.
                let body = budget
                    .run(
                        OBJECT_WRITE_TIMEOUT,
                        self.bucket.get_version(&entry.key, &entry.version_id),
                    )
                    .await?
                    .ok_or_else(|| SealError::BadObject {
                        key: entry.key.clone(),
                        why: "its version vanished while it was read".into(),
                    })?
                    .body;
                let events = count_lines(&body).ok_or_else(|| SealError::BadObject {
                    key: entry.key.clone(),
                    why: "not gzip".into(),
                })?;
                (sha256(&body), events)
            }
        };
        Ok(Some(ListedObject {
            key: entry.key,
            version_id: entry.version_id,
            sha256: hex(&sha256),
            events,
            size: info.size,
            marker: String::new(),
        }))
    }
}

/// The link to a stored digest, from its bytes and its signature metadata.
fn sealed_from(
    key: &str,
    object: Option<crate::bucket::StoredObject>,
) -> Result<SealedDigest, SealError> {
    let bad = |why: &str| SealError::BadHead {
        key: key.to_owned(),
        why: why.to_owned(),
    };
    let object = object.ok_or_else(|| bad("it is gone"))?;
    let signature = object
        .metadata(SIGNATURE_METADATA)
        .and_then(unhex)
        .ok_or_else(|| bad("it has no signature"))?;
    Ok(SealedDigest {
        key: key.to_owned(),
        sha256: sha256(&object.body),
        signature,
    })
}

/// A listing's entries grouped by key, in order.
fn by_key(entries: &[VersionEntry]) -> Vec<(&str, Vec<&VersionEntry>)> {
    let mut groups: Vec<(&str, Vec<&VersionEntry>)> = Vec::new();
    for entry in entries {
        match groups.last_mut() {
            Some((key, versions)) if *key == entry.key => versions.push(entry),
            _ => groups.push((entry.key.as_str(), vec![entry])),
        }
    }
    groups
}

/// Lines (events) of a gzip object; `None` when it is not gzip.
pub fn count_lines(gzip: &[u8]) -> Option<u64> {
    let mut decoder = flate2::read::MultiGzDecoder::new(gzip);
    let mut buffer = [0u8; 64 * 1024];
    let (mut lines, mut last) = (0u64, b'\n');
    loop {
        let n = decoder.read(&mut buffer).ok()?;
        if n == 0 {
            break;
        }
        lines += buffer[..n].iter().filter(|b| **b == b'\n').count() as u64;
        last = buffer[n - 1];
    }
    Some(lines + u64::from(last != b'\n'))
}
