//! Owns sealing: on each scheduled invocation, every period that has ended and whose writes can no
//! longer be in flight (`Period::sealable_at`, `audit_model::archive`) and that has no digest yet
//! gets one, in period order, each chained to the one before: the period's attested objects (key,
//! the version the archiver wrote, SHA-256, events, the marker that attests it), everything else
//! found in its place (unattested, with why), and the objects found late in the periods before,
//! signed with the digest key. Must not know S3, KMS or the stream.
//!
//! Why no archive write of a sealed period can still appear: an object's key names the period in
//! which its write was *started*; no write of period P starts after `end(P) + WRITE_START_SLACK`,
//! every write is dropped `OBJECT_WRITE_TIMEOUT` after it starts, and S3 finishes or forgets a
//! dropped request within `LAND_GRACE`. Sealing waits for all three (`SEAL_DELAY`). Should one
//! land later all the same, the sealing of a later period finds it (it looks back
//! [`LATE_LOOKBACK_PERIODS`]), voids it, archives its events again in the open period and lists it
//! in that digest's `late` (`LateObject` alarms).
//!
//! What is the trail (docs/archive.md "Digests"): an object version whose metadata `marker` names
//! a marker under `state/` whose oldest version attests the object's key with its SHA-256, and that
//! has no void marker. Nothing else found in a period's place is trusted, and nothing in it stops
//! sealing: an object that cannot be read, a forged, unmarked or voided one is listed as
//! unattested, with its reason.
//!
//! How a period longer than a run is sealed: in parts that survive the run (`parts`,
//! docs/archive.md "Sealing in parts"); the next run goes on from the last part, and the digest
//! is built from the parts.
//!
//! Where the chain starts: at the newest digest there is whose signature the key's public key
//! checks (every digest key is read, page by page; anything else under `digest/` is passed over);
//! with none, at the period of the oldest *attested* archive object (or the newest sealable period
//! of an empty archive). Where it goes on after a pause: from that digest, so a schedule that
//! stopped for a day seals the whole day when it runs again. A head that fails the check is not
//! chained on: the chain goes on from the newest digest that passes, and the periods after it are
//! sealed again at alternate names (`verify` reports the failing digest). A digest name taken by
//! anything that is not this period's digest, signed by the key and chaining on the head, moves
//! the digest to the next alternate name (`digest_key_alternate`). Two sealers at once cannot fork
//! the chain: each digest is created with `If-None-Match: *`, and the loser chains on from the
//! winner's digest, which it finds validly signed and linked to the same head.

mod examine;
mod late;
mod log;
mod parts;

pub use parts::{
    PART_OBJECTS, PART_STEP_TIME, PARTS_PREFIX, part_key, part_signing_string, parts_prefix,
};

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::future::Future;
use std::io::Read;
use std::sync::OnceLock;
use std::time::Duration;

use audit_model::archive::{
    LAND_GRACE, MARKER_METADATA, OBJECT_WRITE_TIMEOUT, ObjectKey, Period, PeriodLength, SEAL_DELAY,
    STATE_PREFIX, TAMPER_PREFIX, TRAIL_PREFIX, VOID_PREFIX, WRITE_START_SLACK, object_prefixes,
    void_key,
};
use audit_model::digest::{
    DIGEST_PREFIX, Digest, LateObject, ListedObject, MAX_DIGEST_ALTERNATES,
    SIGNATURE_ALGORITHM_METADATA, SIGNATURE_METADATA, SIGNING_ALGORITHM, SealedDigest,
    UnattestedObject, digest_key, digest_key_alternate, hex, parse_any_digest_key, sha256,
    signing_string_of, unhex,
};
use audit_model::tlog::{TreeEdge, object_lines};
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1, ParsedPublicKey};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use tokio::time::Instant;

use audit_aws::error::AwsError;
use audit_aws::s3::{Bucket, Created, NewObject, StoredObject, VersionEntry};

use crate::budget::{Budget, StepError};
use crate::encode::gzip_lines;
use crate::marker::{Confirmed, Marker, RunEntry};
use crate::objects::CONTENT_TYPE;
use crate::signer::DigestSigner;
use crate::words;

/// How many periods back the newest digest is looked for with one listing before the whole
/// `digest/` prefix is listed (48 hours in AWS).
pub const HEAD_WINDOW_PERIODS: i64 = 48;
/// Time kept in hand to seal one more period (a few listings, HEADs, a signature, a PUT).
pub const PERIOD_STEP_TIME: Duration = Duration::from_secs(10);
/// How many sealed periods before the one being sealed are looked at again for objects that
/// landed after their digest was written (6 hours in AWS): one version listing per prefix of each
/// (2 to 4 per period: about 24 LIST requests per digest, 600 a day, $0.003 a day at S3's
/// price). An object can land late only through a write that outlived every time-out of the
/// write bound (seconds to minutes), so six periods is ample; one later still is not re-archived,
/// and `auditctl verify` reports it (`object not in digest`).
pub const LATE_LOOKBACK_PERIODS: usize = 6;
/// Where the sealer keeps the marker of each late object's events archived again:
/// `state/late/<late object key>/a<n>.json` (a `Marker` listing the new object with its SHA-256).
pub const LATE_PREFIX: &str = "state/late/";
/// The attempt number of the objects the sealer writes for late objects (plus the plan's `n`):
/// past every attempt number the archiver uses, so that no name of the archiver's is taken.
pub const LATE_ATTEMPT_BASE: u32 = 1_000_000;
/// Plans (`a0` to `a<MAX>`) tried for one late object before the sealer gives up on it.
const MAX_LATE_PLANS: u32 = 9;
/// What a void marker written by the sealer says in `by`.
pub const VOIDED_BY_SEAL: &str = "seal";
/// Requests in flight while reading a period's objects.
const HEAD_CONCURRENCY: usize = 16;
/// Keys per listing page.
const LIST_PAGE: usize = 1000;

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
    /// The transparency log's size after the head (`None` when the head has no tree).
    pub tree_size: Option<u64>,
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

    /// Objects listed as unattested by this run's digests.
    pub fn unattested(&self) -> usize {
        self.sealed.iter().map(|s| s.unattested).sum()
    }

    /// Late objects listed by this run's digests.
    pub fn late(&self) -> usize {
        self.sealed.iter().map(|s| s.late).sum()
    }
}

/// One digest written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SealedPeriod {
    pub key: String,
    pub objects: usize,
    pub events: u64,
    /// Entries of its `unattested` list.
    pub unattested: usize,
    /// Entries of its `late` list.
    pub late: usize,
    /// Leaves it appended to the transparency log (its objects' lines).
    pub leaves: u64,
    /// Tiles, index and checkpoint this run created for it, and their bytes.
    pub log_puts: u64,
    pub log_bytes: u64,
}

/// Why a run stopped short.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("{}", words::Bucket(.0))]
    Bucket(#[from] AwsError),
    #[error("{}", words::SigningKey(.0))]
    Sign(AwsError),
    /// The key's public key is not a P-256 key: no digest can be checked with it.
    #[error("the digest key's public key is not an ECDSA P-256 key")]
    KeyUnsuitable,
    /// Every name a period's digest may take is held by something else.
    #[error("every name of the digest {key} (and its {MAX_DIGEST_ALTERNATES} alternates) is taken")]
    NamesTaken { key: String },
    #[error("the invocation's deadline (less its margin) came first")]
    Deadline,
    /// A listed object's leaves cannot be read: its listed version is gone, has other bytes than
    /// its listed SHA-256, or is not gzip.
    #[error("the listed object {key} cannot be read for the log: {reason}")]
    ObjectUnreadable { key: String, reason: String },
    /// A log object's name holds other bytes than the log's (or the tiles do not give the head
    /// digest's root).
    #[error("the log object {key} does not hold what the digests say")]
    LogConflict { key: String },
    /// A tile of the tree's edge that the head's checkpoint needs is missing.
    #[error("the log tile {key} is missing")]
    LogTileMissing { key: String },
}

impl SealError {
    pub fn code(&self) -> &str {
        match self {
            Self::Bucket(error) => words::code(error),
            Self::Sign(error) => words::sign_code(error),
            Self::KeyUnsuitable => "key_unsuitable",
            Self::NamesTaken { .. } => "names_taken",
            Self::Deadline => "deadline",
            Self::ObjectUnreadable { .. } => "object_unreadable",
            Self::LogConflict { .. } => "log_conflict",
            Self::LogTileMissing { .. } => "log_tile_missing",
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

impl<B: Bucket, S: DigestSigner> Sealer<'_, B, S> {
    /// Seals every due period without a digest, oldest first, while the budget lasts.
    pub async fn run(&self, now: DateTime<Utc>, budget: Budget) -> SealReport {
        let due = newest_sealable(now, self.period);
        let mut report = SealReport {
            due: Some(due),
            ..SealReport::default()
        };
        let run = Run {
            sealer: self,
            budget,
            now,
            started: Instant::now(),
            key: OnceLock::new(),
        };
        if let Err(error) = run.seal_up_to(due, &mut report).await {
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
}

/// One run: the sealer, its time, and the key's public key once fetched.
struct Run<'r, 'a, B, S> {
    sealer: &'r Sealer<'a, B, S>,
    budget: Budget,
    /// When the run started (the schedule's clock) and the instant it did.
    now: DateTime<Utc>,
    started: Instant,
    /// The digest key's public key (DER, and parsed), fetched once per run.
    key: OnceLock<(Vec<u8>, ParsedPublicKey)>,
}

/// What a digest holds besides its link: the period's objects, the rest, and late objects.
struct Contents {
    objects: Vec<ListedObject>,
    unattested: Vec<UnattestedObject>,
    late: Vec<LateObject>,
}

/// A digest found or written: its link, its body, and what this run wrote (`None`: found).
type Chained = (SealedDigest, Digest, Option<SealedPeriod>);

/// One object version found in a period's place, as read.
struct Examined {
    key: String,
    version_id: String,
    /// Hex; empty when S3 kept none and it could not be read.
    sha256: String,
    size: u64,
    events: u64,
    /// Its marker's key and the marker, when a marker attests it; else why not.
    attestation: Result<(String, Marker), String>,
    /// Whether a void marker names it.
    voided: bool,
}

impl Examined {
    fn unattested(&self, reason: String) -> UnattestedObject {
        UnattestedObject {
            key: self.key.clone(),
            version_id: self.version_id.clone(),
            sha256: self.sha256.clone(),
            size: self.size,
            reason,
        }
    }
}

impl<B: Bucket, S: DigestSigner> Run<'_, '_, B, S> {
    fn bucket(&self) -> &B {
        self.sealer.bucket
    }

    fn length(&self) -> PeriodLength {
        self.sealer.period
    }

    /// The time now, by the schedule's clock.
    fn clock(&self) -> DateTime<Utc> {
        self.now + chrono::Duration::from_std(self.started.elapsed()).unwrap_or_default()
    }

    /// One bucket request under the budget.
    async fn request<T>(
        &self,
        request: impl Future<Output = Result<T, AwsError>>,
    ) -> Result<T, SealError> {
        Ok(self.budget.run(OBJECT_WRITE_TIMEOUT, request).await?)
    }

    async fn seal_up_to(&self, due: Period, report: &mut SealReport) -> Result<(), SealError> {
        let (mut previous, mut next, mut recent) = match self.newest_valid_digest(due).await? {
            Some((period, sealed, digest)) => {
                report.head = Some((sealed.key.clone(), period.end()));
                report.tree_size = digest.tree.as_ref().map(|t| t.size);
                let recent = self.recent_digests(period, digest).await?;
                (Some(sealed), period.next(), recent)
            }
            None => (None, self.first_period(due).await?, VecDeque::new()),
        };
        // The log's edge after the head, kept across this run's periods.
        let mut edge = self.resume_log(&recent).await?;
        while next.start <= due.start {
            if !self.budget.allows(PERIOD_STEP_TIME, Duration::ZERO) {
                return Err(SealError::Deadline);
            }
            let ((sealed, digest, written), appended) = self
                .seal_or_find(next, previous.as_ref(), &recent, &edge)
                .await?;
            report.head = Some((sealed.key.clone(), next.end()));
            report.tree_size = digest.tree.as_ref().map(|t| t.size);
            match (written, appended) {
                (Some(written), Some(appended)) => {
                    report.sealed.push(written);
                    // The digest is the commit point: its log follows.
                    let log = self.write_log(next, &appended).await?;
                    if let Some(last) = report.sealed.last_mut() {
                        last.leaves = appended.leaves;
                        last.log_puts = log.puts;
                        last.log_bytes = log.bytes;
                    }
                    edge = appended.edge;
                }
                (written, _) => {
                    match written {
                        Some(written) => report.sealed.push(written),
                        None => report.found.push(sealed.key.clone()),
                    }
                    let before = recent.back().map(|(_, d)| d);
                    let before_tree = before.is_some_and(|d| d.tree.is_some());
                    edge = self
                        .ensure_logged(next, &digest, before_tree.then_some(&edge), before)
                        .await?;
                }
            }
            recent.push_back((next, digest));
            if recent.len() > LATE_LOOKBACK_PERIODS {
                recent.pop_front();
            }
            previous = Some(sealed);
            next = next.next();
        }
        Ok(())
    }

    /// Every key under `prefix` (after `after`), page by page.
    async fn all_keys(
        &self,
        prefix: &str,
        after: Option<String>,
    ) -> Result<Vec<String>, SealError> {
        let mut all = Vec::new();
        let mut after = after;
        loop {
            let keys = self
                .request(self.bucket().list_keys(prefix, after.as_deref(), LIST_PAGE))
                .await?;
            let full = keys.len() == LIST_PAGE;
            after = keys.last().cloned();
            all.extend(keys);
            if !full {
                return Ok(all);
            }
        }
    }

    /// The newest digest up to `due` whose signature the key checks: the keys of the last
    /// [`HEAD_WINDOW_PERIODS`] first, else every key of the prefix; newest first, each checked
    /// until one holds.
    async fn newest_valid_digest(
        &self,
        due: Period,
    ) -> Result<Option<(Period, SealedDigest, Digest)>, SealError> {
        let step = i64::from(self.length().seconds());
        let window_start = digest_key(Period {
            start: due.start - HEAD_WINDOW_PERIODS * step,
            length: self.length(),
        });
        for whole in [false, true] {
            let keys = self
                .all_keys(DIGEST_PREFIX, (!whole).then(|| window_start.clone()))
                .await?;
            let mut candidates: Vec<(Period, u32, String)> = keys
                .into_iter()
                .filter(|key| !whole || key.as_str() <= window_start.as_str())
                .filter_map(|key| {
                    let (period, alternate) = parse_any_digest_key(&key, self.length())?;
                    (period.start <= due.start).then_some((period, alternate, key))
                })
                .collect();
            candidates.sort_by_key(|c| std::cmp::Reverse((c.0.start, c.1)));
            for (period, _, key) in candidates {
                if let Some(object) = self.original(&key).await?
                    && let Some((sealed, digest)) = self.verified(&key, period, &object).await?
                {
                    return Ok(Some((period, sealed, digest)));
                }
                tracing::warn!(digest = %key, "not a digest signed by the digest key: not chained on");
            }
        }
        Ok(None)
    }

    /// The head and the digests before it along the chain's links, up to
    /// [`LATE_LOOKBACK_PERIODS`], oldest first (where late objects are looked for).
    async fn recent_digests(
        &self,
        head: Period,
        digest: Digest,
    ) -> Result<VecDeque<(Period, Digest)>, SealError> {
        let mut link = digest.previous.clone();
        let mut recent = VecDeque::from([(head, digest)]);
        while recent.len() < LATE_LOOKBACK_PERIODS
            && let Some(previous) = link.take()
        {
            let Some((period, _)) = parse_any_digest_key(&previous.key, self.length()) else {
                break;
            };
            let Some(object) = self.original(&previous.key).await? else {
                break;
            };
            let Some((sealed, digest)) = self.verified(&previous.key, period, &object).await?
            else {
                break;
            };
            if hex(&sealed.sha256) != previous.sha256 {
                break;
            }
            link = digest.previous.clone();
            recent.push_front((period, digest));
        }
        Ok(recent)
    }

    /// The key's public key (DER, and parsed), fetched once per run.
    async fn cached_key(&self) -> Result<&(Vec<u8>, ParsedPublicKey), SealError> {
        if let Some(key) = self.key.get() {
            return Ok(key);
        }
        let der = self
            .sealer
            .signer
            .public_key()
            .await
            .map_err(SealError::Sign)?;
        let key = ParsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &der)
            .map_err(|_| SealError::KeyUnsuitable)?;
        Ok(self.key.get_or_init(|| (der, key)))
    }

    /// The key's public key, fetched once per run.
    async fn public_key(&self) -> Result<&ParsedPublicKey, SealError> {
        Ok(&self.cached_key().await?.1)
    }

    /// The key's public key (DER), fetched once per run.
    async fn public_der(&self) -> Result<&[u8], SealError> {
        Ok(&self.cached_key().await?.0)
    }

    /// The stored digest at `key` as the next one links to it, when it is `period`'s digest of
    /// this bucket and the key's public key checks its signature over its documented string.
    async fn verified(
        &self,
        key: &str,
        period: Period,
        object: &StoredObject,
    ) -> Result<Option<(SealedDigest, Digest)>, SealError> {
        let Some(signature) = object.metadata(SIGNATURE_METADATA).and_then(unhex) else {
            return Ok(None);
        };
        let Ok(digest) = Digest::parse(&object.body) else {
            return Ok(None);
        };
        if digest.period() != Some(period) || digest.bucket != self.sealer.bucket_name {
            return Ok(None);
        }
        let hash = sha256(&object.body);
        let string = signing_string_of(&digest, key, &hash);
        if self
            .public_key()
            .await?
            .verify_sig(string.as_bytes(), &signature)
            .is_err()
        {
            return Ok(None);
        }
        Ok(Some((
            SealedDigest {
                key: key.to_owned(),
                sha256: hash,
                signature,
            },
            digest,
        )))
    }

    /// The first version of `key`, when it has one (current, overwritten or hidden by a delete
    /// marker): what the sealer (or the archiver) wrote, whatever was put over it since.
    async fn original(&self, key: &str) -> Result<Option<StoredObject>, SealError> {
        let Some(first) = self.original_entry(key).await? else {
            return Ok(None);
        };
        self.request(self.bucket().get_version(key, &first.version_id))
            .await
    }

    async fn original_entry(&self, key: &str) -> Result<Option<VersionEntry>, SealError> {
        let versions = self.request(self.bucket().list_versions(key)).await?;
        Ok(versions
            .into_iter()
            .rev()
            .find(|v| v.key == key && !v.delete_marker))
    }

    /// `period`'s digest: found at its name or an alternate (this period's, signed by the key,
    /// linked to `previous`), or written at the first free name.
    async fn seal_or_find(
        &self,
        period: Period,
        previous: Option<&SealedDigest>,
        recent: &VecDeque<(Period, Digest)>,
        edge: &TreeEdge,
    ) -> Result<(Chained, Option<log::Appended>), SealError> {
        let mut contents: Option<(Contents, log::Appended)> = None;
        let mut alternate = 0;
        // Each name is looked at again at most once (taken between the look and the write).
        let mut looks = 0;
        while alternate <= MAX_DIGEST_ALTERNATES && looks <= 2 * (MAX_DIGEST_ALTERNATES + 1) {
            looks += 1;
            let key = digest_key_alternate(period, alternate);
            if let Some(object) = self.original(&key).await? {
                if let Some((sealed, digest)) = self.verified(&key, period, &object).await?
                    && links_to(&digest, previous)
                {
                    return Ok(((sealed, digest, None), None));
                }
                tracing::warn!(digest = %key, "a digest name is taken by something that is not this period's digest: the next alternate name is used");
                alternate += 1;
                continue;
            }
            if contents.is_none() {
                // In parts, objects in key order (the leaves' order), from where a run before
                // this one stopped.
                contents = Some(self.sealed_in_parts(period, previous, recent, edge).await?);
            }
            let Some((ready, appended)) = contents.as_ref() else {
                continue;
            };
            if let Some(chained) = self
                .write_digest(period, &key, ready, previous, appended)
                .await?
            {
                return Ok((chained, contents.map(|(_, appended)| appended)));
            }
        }
        Err(SealError::NamesTaken {
            key: digest_key(period),
        })
    }
}

impl<B: Bucket, S: DigestSigner> Run<'_, '_, B, S> {
    /// Signs and creates `period`'s digest at `key`; `None` when the name was taken meanwhile.
    async fn write_digest(
        &self,
        period: Period,
        key: &str,
        contents: &Contents,
        previous: Option<&SealedDigest>,
        appended: &log::Appended,
    ) -> Result<Option<Chained>, SealError> {
        let mut digest = Digest::new(
            self.sealer.bucket_name,
            period,
            self.now,
            contents.objects.clone(),
            previous.map(SealedDigest::as_previous),
            self.sealer.signer.key_arn(),
        );
        digest.unattested = contents.unattested.clone();
        digest.late = contents.late.clone();
        // Part of the signed bytes.
        digest.tree = Some(appended.head());
        let body = digest.to_bytes();
        let hash = sha256(&body);
        let signature = self
            .sealer
            .signer
            .sign(signing_string_of(&digest, key, &hash).as_bytes())
            .await
            .map_err(SealError::Sign)?;
        let sealed = SealedDigest {
            key: key.to_owned(),
            sha256: hash,
            signature,
        };
        let object = NewObject {
            key: key.to_owned(),
            body: Bytes::from(body),
            content_type: "application/json",
            sha256: hash,
            metadata: vec![
                (SIGNATURE_METADATA, hex(&sealed.signature)),
                (SIGNATURE_ALGORITHM_METADATA, SIGNING_ALGORITHM.to_owned()),
            ],
        };
        match self.request(self.bucket().put_if_absent(object)).await? {
            Created::New { .. } => {
                let written = SealedPeriod {
                    key: key.to_owned(),
                    objects: digest.objects.len(),
                    events: digest.events,
                    unattested: digest.unattested.len(),
                    late: digest.late.len(),
                    ..SealedPeriod::default()
                };
                Ok(Some((sealed, digest, Some(written))))
            }
            Created::AlreadyExists => Ok(None),
        }
    }

    /// Where a new chain starts: the period of the oldest attested archive object (every key of
    /// `tamper/` and `trail/` read), or `due` when there is none.
    async fn first_period(&self, due: Period) -> Result<Period, SealError> {
        let mut by_period: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for prefix in [TAMPER_PREFIX, TRAIL_PREFIX] {
            for key in self.all_keys(prefix, None).await? {
                if let Some(parsed) = ObjectKey::parse(&key)
                    && parsed.written_within_its_period(self.length())
                    && parsed.period_start <= due.start
                {
                    by_period.entry(parsed.period_start).or_default().push(key);
                }
            }
        }
        for (start, keys) in by_period {
            let period = Period {
                start,
                length: self.length(),
            };
            let keys: HashSet<String> = keys.into_iter().collect();
            let (originals, voided) = self.place(period, |k| keys.contains(k)).await?;
            // A few at a time, up to the first attested one: bounded work in a busy period.
            for some in originals.chunks(HEAD_CONCURRENCY) {
                let found = self.examine_all(some.to_vec(), period, &voided).await?;
                if found.iter().any(|f| f.attestation.is_ok() && !f.voided) {
                    return Ok(period);
                }
            }
            tracing::warn!(
                period_start = start,
                "no attested object in the oldest period with objects: not the chain's start"
            );
        }
        Ok(due)
    }
}

/// Whether `digest` chains on `previous` (any link when this run has no head yet).
fn links_to(digest: &Digest, previous: Option<&SealedDigest>) -> bool {
    match (previous, &digest.previous) {
        (None, _) => true,
        (Some(previous), Some(link)) => *link == previous.as_previous(),
        (Some(_), None) => false,
    }
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

/// A gzip object's text; `None` when it is not gzip.
fn gunzip(gzip: &[u8]) -> Option<Vec<u8>> {
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(gzip)
        .read_to_end(&mut text)
        .ok()?;
    Some(text)
}

/// The lines of a gzip object as the log's leaves are made of them (`object_lines`, each without
/// its newline); `None` when it is not gzip or not text.
fn lines_of(gzip: &[u8]) -> Option<Vec<String>> {
    let text = gunzip(gzip)?;
    object_lines(&text)
        .into_iter()
        .map(|line| std::str::from_utf8(line).ok().map(str::to_owned))
        .collect()
}

/// Lines (events) of a gzip object, as the log counts its leaves (`object_lines`); `None` when
/// it is not gzip.
pub fn count_lines(gzip: &[u8]) -> Option<u64> {
    let text = gunzip(gzip)?;
    u64::try_from(object_lines(&text).len()).ok()
}
