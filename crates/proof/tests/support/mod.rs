//! The world verify's tests check: an archive written as the archiver writes it (each object with
//! the marker that attests it) and sealed by the archiver's own sealer (`audit_archiver::seal`)
//! over `audit_aws`'s in-memory bucket and KMS key, a table as the function wrote it; then the
//! changes an insider could make to the bucket (a digest re-signed with the digest key, versions
//! removed for good). docs/architecture.md "The crates" says who owns what.
#![allow(dead_code)] // each test binary uses a different part

use std::collections::HashSet;

use audit_archiver::budget::Budget;
use audit_archiver::encode::gzip_lines;
use audit_archiver::marker::{Confirmed, Marker, RunEntry, marker_key};
use audit_archiver::seal::Sealer;
use audit_aws::kms::MemoryKey;
use audit_aws::s3::MemoryBucket;
use audit_model::archive::{MARKER_METADATA, ObjectKey, ObjectKind, Period, PeriodLength};
use audit_model::attest::{self, Certificate};
use audit_model::digest::{
    Digest, ProblemKind, SIGNATURE_METADATA, SealedDigest, digest_key, hex, parse_digest_key,
    sha256, signing_string_of,
};
use audit_model::line::item_line;
use audit_model::message::canonical_time;
use audit_model::note::WitnessKey;
use audit_model::range::TimeRange;
use audit_proof::archive::S3Archive;
use audit_proof::verify::Settings;
use audit_proof::verify::attest::Attestations;
use audit_proof::verify::key::TrustedKey;
use audit_proof::verify::ports::{MemoryTable, TableItem};
use audit_proof::verify::report::{Problem, Summary};
use audit_proof::verify::walk::{verify, verify_with_witnesses};
use bytes::Bytes;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Map, Value, json};

pub const BUCKET: &str = "audit-archive";
pub const ARN: &str = "arn:aws:kms:us-east-1:111122223333:key/digest";
/// One minute: many periods in a short trail.
pub const SECONDS: u32 = 60;
/// The first period of every world.
pub const START: &str = "2026-11-22T10:00:00Z";
pub const END: &str = "2026-11-22T10:19:59.999Z";

/// The archive bucket in memory, read through proof's port as S3 is.
pub type MemoryArchive = S3Archive<MemoryBucket>;

pub fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

pub fn length() -> PeriodLength {
    PeriodLength::new(SECONDS).unwrap()
}

pub fn period(start: DateTime<Utc>) -> Period {
    length().period_of(start)
}

/// Lines gzip-compressed as the archiver writes them.
pub fn gzip(lines: &[String]) -> Vec<u8> {
    gzip_lines(lines.iter().map(String::as_str)).unwrap()
}

/// Writes an archive object of `kind` at `at` as the archiver does: first the marker that
/// attests it (its key and SHA-256), then the object naming the marker; its key.
pub fn write_object(
    bucket: &MemoryBucket,
    kind: ObjectKind,
    at: DateTime<Utc>,
    length: PeriodLength,
    sequence: u64,
    lines: &[String],
) -> String {
    let key = ObjectKey::new(kind, at, length, &sequence.to_string(), 0)
        .unwrap()
        .to_string();
    let body = Bytes::from(gzip(lines));
    let run: Vec<RunEntry> = (0..lines.len() as u64)
        .map(|i| {
            RunEntry(
                (sequence + i).to_string(),
                format!("event-{}", sequence + i),
            )
        })
        .collect();
    let marker = marker_key(&run[0], 0).unwrap();
    let confirmed = Confirmed {
        key: key.clone(),
        event_ids: run.iter().map(|e| e.event_id().to_owned()).collect(),
        sha256: hex(&sha256(&body)),
    };
    let json = Marker::new(run, &[confirmed], at.timestamp_millis() + 30_000).to_json();
    bucket.overwrite_with(&marker, Bytes::from(json), Vec::new());
    bucket.overwrite_with(
        &key,
        body,
        vec![
            ("events", lines.len().to_string()),
            (MARKER_METADATA, marker),
        ],
    );
    key
}

/// Writes an archive object as someone other than the archiver could: no marker attests it; its
/// key.
pub fn write_unmarked(
    bucket: &MemoryBucket,
    at: DateTime<Utc>,
    sequence: u64,
    lines: &[String],
) -> String {
    let key = ObjectKey::new(ObjectKind::Trail, at, length(), &sequence.to_string(), 0)
        .unwrap()
        .to_string();
    bucket.overwrite_with(
        &key,
        Bytes::from(gzip(lines)),
        vec![("events", lines.len().to_string())],
    );
    key
}

/// The (kind, subject) of each problem, sorted.
pub fn sorted(problems: &[Problem]) -> Vec<(ProblemKind, String)> {
    let mut found: Vec<_> = problems
        .iter()
        .map(|p| (p.kind, p.subject.clone()))
        .collect();
    found.sort();
    found
}

/// Runs the archiver's sealer as its schedule would at the time `period` becomes sealable:
/// every due period up to it gets its digest, chained, with the transparency log.
pub async fn seal_up_to(bucket: &MemoryBucket, key: &MemoryKey, period: Period) {
    let now = DateTime::from_timestamp(period.sealable_at(), 0).unwrap();
    let report = Sealer {
        bucket,
        signer: key,
        bucket_name: BUCKET,
        period: period.length,
    }
    .run(now, Budget::unlimited())
    .await;
    assert!(report.failure.is_none(), "{report:?}");
}

/// The current digest of `period`, parsed, with its link.
pub fn sealed(archive: &MemoryArchive, period: Period) -> (Digest, SealedDigest) {
    let key = digest_key(period);
    let version = archive.current(&key).unwrap();
    let signature = version
        .metadata
        .iter()
        .find(|(name, _)| *name == SIGNATURE_METADATA)
        .and_then(|(_, s)| audit_model::digest::unhex(s))
        .unwrap();
    let digest = Digest::parse(&version.body).unwrap();
    let link = SealedDigest {
        key,
        sha256: sha256(&version.body),
        signature,
    };
    (digest, link)
}

/// What an insider with the digest key's Sign permission can do: store `digest` as the digest of
/// `period`, signed by `key` (a new version over what is there).
pub fn put_digest(
    archive: &MemoryArchive,
    period: Period,
    digest: &Digest,
    key: &MemoryKey,
) -> SealedDigest {
    put_digest_at(archive, &digest_key(period), digest, key)
}

/// The same at `digest_key` (a name or an alternate name of its period).
pub fn put_digest_at(
    archive: &MemoryArchive,
    digest_key: &str,
    digest: &Digest,
    key: &MemoryKey,
) -> SealedDigest {
    let digest_key = digest_key.to_owned();
    let bytes = digest.to_bytes();
    let body_sha256 = sha256(&bytes);
    let signature = key
        .sign(signing_string_of(digest, &digest_key, &body_sha256).as_bytes())
        .unwrap();
    archive.overwrite_with(
        &digest_key,
        Bytes::from(bytes),
        vec![(SIGNATURE_METADATA, hex(&signature))],
    );
    SealedDigest {
        key: digest_key,
        sha256: body_sha256,
        signature,
    }
}

/// Replaces the digest of `period` for good (its sealed version removed) by `edit`'s change of
/// it, signed again with the digest key: an insider's rewrite.
pub fn rewrite_digest(
    archive: &MemoryArchive,
    key: &MemoryKey,
    period: Period,
    edit: impl FnOnce(&mut Digest),
) -> (Digest, SealedDigest) {
    let (mut digest, _) = sealed(archive, period);
    let version = current(archive, &digest_key(period)).0;
    archive.remove_version(&digest_key(period), &version);
    edit(&mut digest);
    let link = put_digest(archive, period, &digest, key);
    (digest, link)
}

/// Every version under `prefix`: its key and version id.
pub fn versions_under(archive: &MemoryArchive, prefix: &str) -> HashSet<(String, String)> {
    archive
        .keys(prefix)
        .into_iter()
        .flat_map(|key| {
            archive
                .versions(&key)
                .into_iter()
                .map(move |v| (key.clone(), v.version_id))
        })
        .collect()
}

/// The current version of `key` in the twin: its id and bytes.
pub fn current(archive: &MemoryArchive, key: &str) -> (String, Vec<u8>) {
    let version = archive.current(key).unwrap();
    (version.version_id, version.body.to_vec())
}

/// The `signature` metadata of the current version of `key`.
pub fn signature(archive: &MemoryArchive, key: &str) -> String {
    let version = archive.current(key).unwrap();
    let found = version
        .metadata
        .iter()
        .find(|(name, _)| *name == "signature");
    found.map(|(_, value)| value.clone()).unwrap_or_default()
}

/// A new version of `key`, unconditionally.
pub fn put(archive: &MemoryArchive, key: &str, body: Vec<u8>, metadata: &[(&'static str, &str)]) {
    let metadata = metadata
        .iter()
        .map(|(n, v)| (*n, (*v).to_owned()))
        .collect();
    archive.overwrite_with(key, Bytes::from(body), metadata);
}

/// An archive, its key and its table, written as the function and the archiver write them.
pub struct World {
    pub archive: MemoryArchive,
    pub key: MemoryKey,
    pub table: MemoryTable,
    pub sequence: u64,
    /// The last period sealed.
    pub sealed: Option<Period>,
    /// Whether periods are sealed with the transparency log, as today's sealer seals them; when
    /// not, each is sealed as an archiver from before the log did (its digest without a tree,
    /// no tiles, no checkpoint).
    pub logged: bool,
    /// The receiver's run key and the KMS key that certified it, when the function attests the
    /// items it writes (`World::attesting`).
    pub receiver: Option<Receiver>,
}

/// The receiver as it attests a batch (docs/archive.md "Items attested at birth"): a run key
/// whose certificate the attestation key (KMS's in-memory twin) signed, one Ed25519 signature
/// over each batch's tree.
pub struct Receiver {
    pub kms: MemoryKey,
    run: aws_lc_rs::signature::Ed25519KeyPair,
    certificate: String,
}

/// The ARN of the receiver's attestation key in the tests.
pub const ATTESTATION_ARN: &str = "arn:aws:kms:us-east-1:111122223333:key/attestation";

impl Receiver {
    pub fn new() -> Self {
        use aws_lc_rs::signature::KeyPair as _;
        let kms = MemoryKey::new(ATTESTATION_ARN);
        let run = aws_lc_rs::signature::Ed25519KeyPair::generate().unwrap();
        let public_key: [u8; 32] = run.public_key().as_ref().try_into().unwrap();
        let issued_at_ms = 1_795_000_000_000;
        let signature = kms
            .sign(&Certificate::statement(&public_key, issued_at_ms))
            .unwrap();
        let certificate = Certificate {
            public_key,
            issued_at_ms,
            signature,
        }
        .encode();
        Self {
            kms,
            run,
            certificate,
        }
    }

    /// The lines of one batch, each with its `attestation`.
    pub fn attest(&self, lines: &[String]) -> Vec<String> {
        let maps: Vec<Map<String, Value>> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let leaves: Vec<_> = maps.iter().map(attest::item_leaf).collect();
        let (root, paths) = attest::batch_tree(&leaves).unwrap();
        let size = lines.len() as u64;
        let signature = self.run.sign(&attest::batch_message(&root, size));
        let signature = attest::signature_text(signature.as_ref());
        maps.into_iter()
            .zip(paths)
            .enumerate()
            .map(|(index, (mut map, path))| {
                let text = attest::attestation_text(
                    &self.certificate,
                    &signature,
                    index as u64,
                    size,
                    &path,
                );
                map.insert(attest::ATTESTATION.into(), Value::String(text));
                Value::Object(map).to_string()
            })
            .collect()
    }

    /// The attestation key as verify trusts it.
    pub fn attestations(&self) -> std::sync::Arc<Attestations> {
        std::sync::Arc::new(Attestations::new(self.kms.public_key()).unwrap())
    }
}

impl Default for Receiver {
    fn default() -> Self {
        Self::new()
    }
}

impl Default for World {
    fn default() -> Self {
        Self::new()
    }
}

impl World {
    pub fn new() -> Self {
        Self {
            archive: S3Archive::over(MemoryBucket::new(), BUCKET, "memory"),
            key: MemoryKey::new(ARN),
            table: MemoryTable::default(),
            sequence: 100,
            sealed: None,
            logged: true,
            receiver: None,
        }
    }

    /// A world whose function attests every item it writes.
    pub fn attesting() -> Self {
        Self {
            receiver: Some(Receiver::new()),
            ..Self::new()
        }
    }

    /// An item the function wrote at `received` (with this auditTime), as its JSON line.
    pub fn item(&self, id: &str, audit_time: DateTime<Utc>, received: DateTime<Utc>) -> TableItem {
        let item: Map<String, Value> = json!({
            "messageId": {"S": id},
            "auditTime": {"S": canonical_time(audit_time)},
            "auditText": {"S": format!("text of {id}")},
            "receivedAt": {"S": canonical_time(received)},
            "extra": {"M": {"amount": {"N": "12.50"}}}
        })
        .as_object()
        .unwrap()
        .clone();
        TableItem {
            message_id: id.to_owned(),
            audit_time: canonical_time(audit_time),
            line: item_line(&item),
            received_at: Some(canonical_time(received)),
        }
    }

    /// Items written to the table at `received` and archived together at `archived`, in one
    /// trail object; its key.
    pub fn events(
        &mut self,
        ids: &[&str],
        received: DateTime<Utc>,
        archived: DateTime<Utc>,
    ) -> String {
        let mut items: Vec<TableItem> = ids
            .iter()
            .map(|id| self.item(id, received, received))
            .collect();
        let mut lines: Vec<String> = items.iter().map(|i| i.line.clone()).collect();
        if let Some(receiver) = &self.receiver {
            lines = receiver.attest(&lines);
            for (item, line) in items.iter_mut().zip(&lines) {
                item.line = line.clone();
            }
        }
        for item in items {
            self.table.put(item);
        }
        self.sequence += 10;
        write_object(
            &self.archive,
            ObjectKind::Trail,
            archived,
            length(),
            self.sequence,
            &lines,
        )
    }

    /// One trail object at `at` that no item of the table matches; its key.
    pub fn events_at_no_table(&self, at: DateTime<Utc>) -> String {
        write_object(
            &self.archive,
            ObjectKind::Trail,
            at,
            length(),
            5,
            &[r#"{"auditTime":"x","messageId":"y"}"#.to_owned()],
        )
    }

    /// A tamper object at `at` with one stream record of `event` (MODIFY or REMOVE) on the
    /// item `id`; its key.
    pub fn tamper(&mut self, at: DateTime<Utc>, id: &str, event: &str) -> String {
        self.sequence += 10;
        let line = json!({
            "approximateCreationDateTime": canonical_time(at),
            "eventID": format!("event-{}", self.sequence),
            "eventName": event,
            "keys": {"auditTime": canonical_time(at), "messageId": id},
            "newImage": null,
            "oldImage": {"messageId": id},
            "sequenceNumber": self.sequence.to_string(),
            "userIdentity": null
        })
        .to_string();
        write_object(
            &self.archive,
            ObjectKind::Tamper,
            at,
            length(),
            self.sequence,
            &[line],
        )
    }

    /// Seals every period up to `until`'s with the archiver's sealer, as its schedule would
    /// (from the chain's head, or from the oldest attested object's period).
    ///
    /// The sealer runs once per period, when it becomes sealable, from `START`'s (or `until`'s
    /// when earlier), as its schedule runs it.
    pub async fn seal_through(&mut self, until: DateTime<Utc>) {
        let until = period(until);
        let mut next = match self.sealed {
            Some(sealed) => sealed.next(),
            None if until.start < period(at(START)).start => until,
            None => period(at(START)),
        };
        while next.start <= until.start {
            if self.logged {
                seal_up_to(&self.archive, &self.key, next).await;
            } else {
                self.seal_without_log(next).await;
            }
            next = next.next();
        }
        self.sealed = Some(until);
    }

    /// Seals up to `until` as an archiver from before the transparency log did: the digests
    /// this run wrote rewritten without the tree (each linked to the one rewritten before it),
    /// the log's objects it wrote removed.
    async fn seal_without_log(&mut self, until: Period) {
        let logged = versions_under(&self.archive, "log/");
        let digests: HashSet<String> = self.archive.keys("digest/").into_iter().collect();
        seal_up_to(&self.archive, &self.key, until).await;
        let mut previous: Option<SealedDigest> = None;
        for key in self.archive.keys("digest/") {
            if digests.contains(&key) {
                continue;
            }
            let period = parse_digest_key(&key, length()).unwrap();
            let (_, link) = rewrite_digest(&self.archive, &self.key, period, |digest| {
                digest.tree = None;
                if let Some(previous) = &previous {
                    digest.previous = Some(previous.as_previous());
                }
            });
            previous = Some(link);
        }
        for (key, version) in versions_under(&self.archive, "log/") {
            if !logged.contains(&(key.clone(), version.clone())) {
                self.archive.remove_version(&key, &version);
            }
        }
    }

    /// Seals the next period (after the last sealed) with the archiver's sealer, then rewrites
    /// its digest with `edit` as an insider with the digest key could; the digest.
    pub async fn seal_next_with(&mut self, edit: impl FnOnce(&mut Digest)) -> Digest {
        let next = match self.sealed {
            Some(p) => p.next(),
            None => period(at(START)),
        };
        seal_up_to(&self.archive, &self.key, next).await;
        let (digest, _) = rewrite_digest(&self.archive, &self.key, next, |digest| {
            edit(digest);
            digest.events = digest.objects.iter().map(|o| o.events).sum();
        });
        self.sealed = Some(next);
        digest
    }

    /// Removes the sealed version of `period`'s digest for good (a bucket without Object Lock):
    /// the next digest still links to it.
    pub fn remove_digest(&self, period: Period) {
        let key = digest_key(period);
        let version = current(&self.archive, &key).0;
        self.archive.remove_version(&key, &version);
    }

    pub fn settings(&self, from: &str, to: &str, now: DateTime<Utc>) -> Settings {
        Settings {
            bucket: BUCKET.to_owned(),
            length: length(),
            range: TimeRange::parse(from, to).unwrap(),
            now,
            grace_seconds: Settings::default_grace(length()),
            lag_seconds: audit_proof::verify::ARCHIVE_LAG_SECONDS,
            concurrency: 3,
            attestations: None,
        }
    }

    pub async fn verify(&self, settings: &Settings, with_table: bool) -> (Vec<Problem>, Summary) {
        let key = TrustedKey::new(self.key.public_key()).unwrap();
        let mut problems = Vec::new();
        let table = with_table.then_some(&self.table);
        let summary = verify(&self.archive, &key, table, settings, &mut problems)
            .await
            .unwrap();
        assert_eq!(summary.problem_count(), problems.len() as u64);
        (problems, summary)
    }

    /// The same without the table, each checkpoint required to carry `witnesses`' cosignatures.
    pub async fn verify_witnessed(
        &self,
        settings: &Settings,
        witnesses: &[WitnessKey],
    ) -> (Vec<Problem>, Summary) {
        let key = TrustedKey::new(self.key.public_key()).unwrap();
        let mut problems = Vec::new();
        let summary = verify_with_witnesses(
            &self.archive,
            &key,
            None::<&MemoryTable>,
            settings,
            witnesses.to_vec(),
            &mut problems,
        )
        .await
        .unwrap();
        assert_eq!(summary.problem_count(), problems.len() as u64);
        (problems, summary)
    }

    /// The problems of the whole trail (`START` to `to`), long after it was sealed.
    pub async fn problems(&self, to: &str, with_table: bool) -> Vec<(ProblemKind, String)> {
        let settings = self.settings(START, to, at(to) + Duration::hours(3));
        let (problems, _) = self.verify(&settings, with_table).await;
        problems.into_iter().map(|p| (p.kind, p.subject)).collect()
    }
}

/// A trail of 20 minutes (20 periods): events in some, none in others, all sealed; the world
/// and the keys of its objects.
pub async fn trail() -> (World, Vec<String>) {
    trail_sealed(true).await
}

/// The same trail, sealed with the transparency log or (`logged` false) as before it began.
pub async fn trail_sealed(logged: bool) -> (World, Vec<String>) {
    let mut world = World::new();
    world.logged = logged;
    let base = at(START);
    let mut keys = Vec::new();
    for minute in [0i64, 1, 2, 5, 9, 10, 11, 17, 19] {
        let when = base + Duration::minutes(minute) + Duration::seconds(20);
        let ids: Vec<String> = (0..3).map(|i| format!("m-{minute:02}-{i}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        keys.push(world.events(&ids, when, when + Duration::seconds(2)));
    }
    world.seal_through(base + Duration::minutes(19)).await;
    (world, keys)
}
