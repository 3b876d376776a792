//! The walk's behaviour, given an archive the archiver wrote and sealed (in-memory twins that
//! behave as S3, KMS and the table do), then changed as an attacker or an accident would: when
//! `verify` runs, then it reports each change once, with its kind and the key or `messageId` it
//! concerns, and nothing on a trail as sealed.

use audit_model::archive::{ObjectKind, Period, PeriodLength};
use audit_model::digest::{
    Digest, LateObject, ProblemKind, SealedDigest, UnattestedObject, digest_key,
    digest_key_alternate, hex, sha256,
};
use audit_model::line::item_line;
use audit_model::message::canonical_time;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Map, Value, json};

use super::Settings;
use super::key::TrustedKey;
use super::memory::{
    MemoryArchive, MemoryTable, TestKey, digest_of, put_digest, put_digest_at, seal, seal_logged,
    write_object,
};
use super::ports::TableItem;
use super::report::{Problem, Summary};
use super::walk::{verify, verify_with_witnesses};
use audit_model::note::WitnessKey;
use audit_model::range::TimeRange;

const BUCKET: &str = "audit-archive";
const ARN: &str = "arn:aws:kms:us-east-1:111122223333:key/digest";
/// One minute: many periods in a short trail.
const SECONDS: u32 = 60;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

fn length() -> PeriodLength {
    PeriodLength::new(SECONDS).unwrap()
}

fn period(start: DateTime<Utc>) -> Period {
    length().period_of(start)
}

/// An archive, its key and its table, written as the function and the archiver write them.
struct World {
    archive: MemoryArchive,
    key: TestKey,
    table: MemoryTable,
    sequence: u64,
    /// The last period sealed, and its digest.
    sealed: Option<(Period, SealedDigest)>,
    /// Whether periods are sealed with the transparency log (the tree in the digest, tiles,
    /// checkpoint), and the tree so far.
    logged: bool,
    edge: audit_model::tlog::TreeEdge,
}

/// The first period of every world.
const START: &str = "2026-11-22T10:00:00Z";

impl World {
    fn new() -> Self {
        Self {
            archive: MemoryArchive::default(),
            key: TestKey::new(ARN),
            table: MemoryTable::default(),
            sequence: 100,
            sealed: None,
            logged: false,
            edge: Default::default(),
        }
    }

    /// An item the function wrote at `received` (with this auditTime), as its JSON line.
    fn item(&self, id: &str, audit_time: DateTime<Utc>, received: DateTime<Utc>) -> TableItem {
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
    fn events(&mut self, ids: &[&str], received: DateTime<Utc>, archived: DateTime<Utc>) -> String {
        let items: Vec<TableItem> = ids
            .iter()
            .map(|id| self.item(id, received, received))
            .collect();
        let lines: Vec<String> = items.iter().map(|i| i.line.clone()).collect();
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
    fn events_at_no_table(&self, at: DateTime<Utc>) -> String {
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
    fn tamper(&mut self, at: DateTime<Utc>, id: &str, event: &str) -> String {
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

    /// Seals the next period (after the last sealed) with its digest edited by `edit` before it
    /// is signed; the digest.
    fn seal_next_with(&mut self, edit: impl FnOnce(&mut Digest)) -> Digest {
        let next = match &self.sealed {
            Some((p, _)) => p.next(),
            None => period(at(START)),
        };
        let previous = self.sealed.as_ref().map(|(_, d)| d.clone());
        let mut digest = digest_of(&self.archive, BUCKET, next, previous.as_ref(), &self.key);
        edit(&mut digest);
        digest.events = digest.objects.iter().map(|o| o.events).sum();
        let sealed = put_digest(&self.archive, next, &digest, &self.key);
        self.sealed = Some((next, sealed));
        digest
    }

    /// Seals every period from the one after the last sealed (or `START`'s) to `until`'s.
    fn seal_through(&mut self, until: DateTime<Utc>) {
        let mut next = match &self.sealed {
            Some((p, _)) => p.next(),
            None => period(at(START)),
        };
        while next.start <= period(until).start {
            let previous = self.sealed.as_ref().map(|(_, d)| d.clone());
            let digest = if self.logged {
                seal_logged(
                    &self.archive,
                    BUCKET,
                    next,
                    previous.as_ref(),
                    &self.key,
                    &mut self.edge,
                )
            } else {
                seal(&self.archive, BUCKET, next, previous.as_ref(), &self.key)
            };
            self.sealed = Some((next, digest));
            next = next.next();
        }
    }

    /// Skips sealing one period (the archiver never does: a digest removed for good looks so),
    /// the next one still linked to it.
    fn seal_skipping(&mut self, skipped: DateTime<Utc>) {
        self.seal_through(skipped);
        let (p, digest) = self.sealed.clone().unwrap();
        let version = current(&self.archive, &digest.key).0;
        self.archive.remove_version(&digest.key, &version);
        self.sealed = Some((p, digest));
    }

    fn settings(&self, from: &str, to: &str, now: DateTime<Utc>) -> Settings {
        Settings {
            bucket: BUCKET.to_owned(),
            length: length(),
            range: TimeRange::parse(from, to).unwrap(),
            now,
            grace_seconds: Settings::default_grace(length()),
            lag_seconds: super::ARCHIVE_LAG_SECONDS,
            concurrency: 3,
        }
    }

    async fn verify(&self, settings: &Settings, with_table: bool) -> (Vec<Problem>, Summary) {
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
    async fn verify_witnessed(
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
    async fn problems(&self, to: &str, with_table: bool) -> Vec<(ProblemKind, String)> {
        let settings = self.settings(START, to, at(to) + Duration::hours(3));
        let (problems, _) = self.verify(&settings, with_table).await;
        problems.into_iter().map(|p| (p.kind, p.subject)).collect()
    }
}

/// A trail of 20 minutes (20 periods): events in some, none in others, a tamper object, all
/// sealed; returns the world and the keys of its objects.
fn trail() -> (World, Vec<String>) {
    let mut world = World::new();
    let base = at(START);
    let mut keys = Vec::new();
    for minute in [0i64, 1, 2, 5, 9, 10, 11, 17, 19] {
        let when = base + Duration::minutes(minute) + Duration::seconds(20);
        let ids: Vec<String> = (0..3).map(|i| format!("m-{minute:02}-{i}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        keys.push(world.events(&ids, when, when + Duration::seconds(2)));
    }
    world.seal_through(base + Duration::minutes(19));
    (world, keys)
}

const END: &str = "2026-11-22T10:19:59.999Z";

/// The current version of `key` in the twin: its id and bytes.
fn current(archive: &MemoryArchive, key: &str) -> (String, Vec<u8>) {
    let version = archive.current(key).unwrap();
    (version.version_id, version.body.to_vec())
}

/// The `signature` metadata of the current version of `key`.
fn signature(archive: &MemoryArchive, key: &str) -> String {
    let version = archive.current(key).unwrap();
    let found = version
        .metadata
        .iter()
        .find(|(name, _)| *name == "signature");
    found.map(|(_, value)| value.clone()).unwrap_or_default()
}

/// A new version of `key`, unconditionally.
fn put(archive: &MemoryArchive, key: &str, body: Vec<u8>, metadata: &[(&'static str, &str)]) {
    let metadata = metadata
        .iter()
        .map(|(n, v)| (*n, (*v).to_owned()))
        .collect();
    archive.overwrite_with(key, bytes::Bytes::from(body), metadata);
}

#[tokio::test]
async fn a_trail_as_sealed_holds_over_many_periods_empty_ones_included() {
    let (world, _) = trail();
    let settings = world.settings(START, END, at(END) + Duration::hours(1));
    let (problems, summary) = world.verify(&settings, true).await;
    assert_eq!(problems, []);
    assert!(summary.holds());
    assert_eq!(summary.periods, 20);
    assert_eq!(summary.sealed, 20);
    assert_eq!(summary.empty, 11);
    assert_eq!((summary.trail_objects, summary.tamper_objects), (9, 0));
    assert_eq!((summary.trail_events, summary.tamper_events), (27, 0));
    assert_eq!(
        summary.chain,
        format!(
            "trusted from {}: the chain's first digest (previous null)",
            digest_key(period(at(START)))
        )
    );
    let table = summary.table.clone().unwrap();
    assert_eq!(table.archived_compared, 27);
    assert_eq!((table.items, table.items_archived), (27, 27));
    assert!(summary.lines().last().unwrap().contains("none"));
}

#[tokio::test]
async fn a_range_inside_the_trail_checks_its_first_link_against_the_digest_before_it() {
    let (world, _) = trail();
    let settings = world.settings(
        "2026-11-22T10:05:00Z",
        "2026-11-22T10:09:59.999Z",
        at(END) + Duration::hours(1),
    );
    let (problems, summary) = world.verify(&settings, false).await;
    assert_eq!(problems, []);
    assert_eq!(summary.periods, 5);

    // The digest before the range written over (bytes the next one does not link to): the first
    // link of the range is broken, though the range's own digests are intact.
    let before = period(at("2026-11-22T10:04:00Z"));
    let mut digest = Digest::parse(&current(&world.archive, &digest_key(before)).1).unwrap();
    digest.sealed_at = "2026-11-22T10:04:31.000Z".into();
    world.archive.remove_version(
        &digest_key(before),
        &current(&world.archive, &digest_key(before)).0,
    );
    put_digest(&world.archive, before, &digest, &world.key);
    let (problems, _) = world.verify(&settings, false).await;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::ChainBroken);
    assert_eq!(
        problems[0].subject,
        digest_key(period(at("2026-11-22T10:05:00Z")))
    );
}

#[tokio::test]
async fn a_digest_missing_from_the_chain_is_one_problem() {
    let mut world = World::new();
    let base = at(START);
    world.events(&["a"], base, base);
    world.seal_skipping(base + Duration::minutes(2));
    world.seal_through(base + Duration::minutes(4));
    let problems = world.problems("2026-11-22T10:04:59Z", false).await;
    assert_eq!(
        problems,
        [(
            ProblemKind::DigestMissing,
            digest_key(period(base + Duration::minutes(2)))
        )]
    );
}

#[tokio::test]
async fn a_deleted_digest_is_missing_once_and_the_chain_goes_on_through_its_sealed_version() {
    let (world, _) = trail();
    let deleted = digest_key(period(at("2026-11-22T10:10:00Z")));
    world.archive.delete(&deleted);
    let settings = world.settings(START, END, at(END) + Duration::hours(1));
    let (problems, summary) = world.verify(&settings, false).await;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::DigestMissing);
    assert_eq!(problems[0].subject, deleted);
    assert!(problems[0].detail.contains("delete marker"));
    // Its objects were still checked against it.
    assert_eq!(summary.trail_objects, 9);
}

#[tokio::test]
async fn a_digest_altered_or_re_signed_with_another_key_has_an_invalid_signature() {
    let (world, _) = trail();
    let target = period(at("2026-11-22T10:09:00Z"));
    let key = digest_key(target);
    let (_, bytes) = current(&world.archive, &key);
    let signature = signature(&world.archive, &key);

    // Altered: an event count changed, the signature kept.
    let altered = String::from_utf8(bytes.clone())
        .unwrap()
        .replace("\"events\":3", "\"events\":2");
    put(
        &world.archive,
        &key,
        altered.into_bytes(),
        &[("signature", signature.as_str())],
    );
    let problems = world.problems(END, false).await;
    assert_eq!(problems, [(ProblemKind::SignatureInvalid, key.clone())]);

    // Re-signed by another key, naming it or naming ours.
    let other = TestKey::new("arn:aws:kms:us-east-1:111122223333:key/other");
    let mut digest = Digest::parse(&bytes).unwrap();
    digest.objects.clear();
    digest.events = 0;
    digest.key_id = other.arn().to_owned();
    put_digest(&world.archive, target, &digest, &other);
    digest.key_id = ARN.to_owned();
    put_digest(&world.archive, target, &digest, &other);
    let settings = world.settings(START, END, at(END) + Duration::hours(1));
    let (problems, _) = world.verify(&settings, false).await;
    let kinds: Vec<_> = problems
        .iter()
        .map(|p| (p.kind, p.subject.as_str()))
        .collect();
    assert_eq!(kinds, [(ProblemKind::SignatureInvalid, key.as_str()); 3]);
    assert!(
        problems[1].detail.contains("key/other"),
        "{}",
        problems[1].detail
    );
    assert!(
        problems[2].detail.contains("does not verify"),
        "{}",
        problems[2].detail
    );
}

#[tokio::test]
async fn a_digest_replaced_for_good_breaks_the_link_of_the_next_one() {
    let (world, _) = trail();
    let target = period(at("2026-11-22T10:09:00Z"));
    let key = digest_key(target);
    let (version, bytes) = current(&world.archive, &key);
    world.archive.remove_version(&key, &version);
    // The same content, validly signed again (by the digest key: the archiver's role misused).
    let digest = Digest::parse(&bytes).unwrap();
    put_digest(&world.archive, target, &digest, &world.key);
    let problems = world.problems(END, false).await;
    assert_eq!(
        problems,
        [(ProblemKind::ChainBroken, digest_key(target.next()))]
    );
}

#[tokio::test]
async fn bytes_that_are_not_a_digest_have_no_valid_signature_and_leave_the_period_unsealed() {
    let (world, _) = trail();
    let target = period(at("2026-11-22T10:05:00Z"));
    let key = digest_key(target);
    let (version, _) = current(&world.archive, &key);
    world.archive.remove_version(&key, &version);
    put(&world.archive, &key, b"not a digest".to_vec(), &[]);
    let settings = world.settings(START, END, at(END) + Duration::hours(1));
    let (problems, summary) = world.verify(&settings, false).await;
    assert_eq!(
        problems
            .iter()
            .map(|p| (p.kind, p.subject.clone()))
            .collect::<Vec<_>>(),
        [
            (ProblemKind::SignatureInvalid, key),
            (ProblemKind::ChainBroken, digest_key(target.next())),
        ]
    );
    assert!(
        problems[0].detail.contains("not a digest"),
        "{}",
        problems[0].detail
    );
    assert_eq!((summary.sealed, summary.missing), (19, 1));
    assert_eq!(summary.unsealed_objects, 1);
}

#[tokio::test]
async fn a_second_signed_digest_for_a_period_breaks_the_chain_and_an_identical_copy_does_not() {
    let (world, _) = trail();
    let target = period(at("2026-11-22T10:02:00Z"));
    let key = digest_key(target);
    let (_, bytes) = current(&world.archive, &key);
    let signature = signature(&world.archive, &key);
    put(
        &world.archive,
        &key,
        bytes.clone(),
        &[("signature", signature.as_str())],
    );
    assert_eq!(world.problems(END, false).await, []);

    let mut digest = Digest::parse(&bytes).unwrap();
    digest.objects.clear();
    digest.events = 0;
    put_digest(&world.archive, target, &digest, &world.key);
    let problems = world.problems(END, false).await;
    assert_eq!(problems, [(ProblemKind::ChainBroken, key)]);
}

#[tokio::test]
async fn a_digest_that_starts_a_new_chain_or_names_another_bucket_breaks_the_chain() {
    let mut world = World::new();
    let base = at(START);
    world.events(&["a"], base, base);
    world.seal_through(base + Duration::minutes(1));
    // The next digest starts over (no link), while the one before exists.
    let restarted = period(base + Duration::minutes(2));
    let digest = Digest::new(
        BUCKET,
        restarted,
        base + Duration::minutes(4),
        vec![],
        None,
        ARN,
    );
    put_digest(&world.archive, restarted, &digest, &world.key);
    // And the next names another bucket.
    let elsewhere = restarted.next();
    let before = super::digests::load(&world.archive, &digest_key(restarted))
        .await
        .unwrap()
        .unwrap()
        .sealed();
    let digest = Digest::new(
        "another-bucket",
        elsewhere,
        base + Duration::minutes(5),
        vec![],
        Some(before.as_previous()),
        ARN,
    );
    put_digest(&world.archive, elsewhere, &digest, &world.key);
    let problems = world.problems("2026-11-22T10:03:59Z", false).await;
    assert_eq!(
        problems,
        [
            (ProblemKind::ChainBroken, digest_key(restarted)),
            (ProblemKind::ChainBroken, digest_key(elsewhere)),
        ]
    );
}

#[tokio::test]
async fn an_object_overwritten_or_deleted_is_changed_or_missing() {
    let (world, keys) = trail();
    // A newer version over a sealed object (what Object Lock allows: a new version).
    put(&world.archive, &keys[1], b"rewritten".to_vec(), &[]);
    // A delete marker over another.
    world.archive.delete(&keys[4]);
    // A third's sealed version removed for good (a bucket without Object Lock).
    let (version, _) = current(&world.archive, &keys[7]);
    world.archive.remove_version(&keys[7], &version);
    let problems = world.problems(END, false).await;
    assert_eq!(
        problems,
        [
            (ProblemKind::ObjectChanged, keys[1].clone()),
            (ProblemKind::ObjectMissing, keys[4].clone()),
            (ProblemKind::ObjectMissing, keys[7].clone()),
        ]
    );
}

#[tokio::test]
async fn an_object_slipped_into_a_sealed_period_is_not_in_its_digest_whatever_its_key() {
    let (mut world, _) = trail();
    // Keyed as an archive object of a sealed period (written in its hour).
    let slipped = world.events(
        &["forged"],
        at("2026-11-22T10:03:10Z"),
        at("2026-11-22T10:03:15Z"),
    );
    // Under a key the archiver never writes, in a partition of the range.
    put(
        &world.archive,
        "trail/dt=2026-11-22/hour=10/forged.jsonl.gz",
        b"x".to_vec(),
        &[],
    );
    // Keyed for a sealed period, but in an hour no write of it can start in.
    let misplaced = slipped.replace("hour=10", "hour=11");
    put(&world.archive, &misplaced, b"x".to_vec(), &[]);
    world
        .table
        .remove("forged", &canonical_time(at("2026-11-22T10:03:10Z")));
    let problems = world.problems("2026-11-22T10:59:59Z", false).await;
    let mut not_in_digest: Vec<_> = problems
        .iter()
        .filter(|(kind, _)| *kind == ProblemKind::ObjectNotInDigest)
        .map(|(_, key)| key.as_str())
        .collect();
    not_in_digest.sort();
    assert_eq!(
        not_in_digest,
        [
            "trail/dt=2026-11-22/hour=10/forged.jsonl.gz",
            slipped.as_str(),
            misplaced.as_str(),
        ]
    );
}

#[tokio::test]
async fn an_object_whose_bytes_differ_from_its_digest_is_changed() {
    let mut world = World::new();
    let base = at(START);
    let key = world.events(&["a", "b"], base, base);
    world.seal_through(base);
    // Its digest (validly signed) says another hash and count than the object holds.
    let p = period(base);
    let (version, bytes) = current(&world.archive, &digest_key(p));
    world.archive.remove_version(&digest_key(p), &version);
    let mut digest = Digest::parse(&bytes).unwrap();
    digest.objects[0].events = 3;
    digest.objects[0].sha256 = "00".repeat(32);
    digest.events = 3;
    put_digest(&world.archive, p, &digest, &world.key);
    let settings = world.settings(START, "2026-11-22T10:00:59Z", base + Duration::hours(1));
    let (problems, _) = world.verify(&settings, false).await;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::ObjectChanged);
    assert_eq!(problems[0].subject, key);
    assert!(
        problems[0].detail.contains("SHA-256"),
        "{}",
        problems[0].detail
    );
    assert!(
        problems[0].detail.contains("2 events, its digest says 3"),
        "{}",
        problems[0].detail
    );
}

#[tokio::test]
async fn periods_not_due_yet_and_before_the_trail_are_counted_not_problems() {
    let mut world = World::new();
    let base = at(START);
    world.events(
        &["a"],
        base + Duration::minutes(1),
        base + Duration::minutes(1),
    );
    world.events(
        &["b"],
        base + Duration::minutes(7),
        base + Duration::minutes(7),
    );
    // The chain starts at 10:01; sealed up to 10:05; now is 10:08:10.
    world.sealed = None;
    let first = period(base + Duration::minutes(1));
    let genesis = seal(&world.archive, BUCKET, first, None, &world.key);
    world.sealed = Some((first, genesis));
    world.seal_through(base + Duration::minutes(5));
    let now = at("2026-11-22T10:08:10Z");
    let settings = world.settings("2026-11-22T09:58:00Z", "2026-11-22T10:08:00Z", now);
    let (problems, summary) = world.verify(&settings, false).await;
    assert_eq!(problems, []);
    assert_eq!(summary.periods, 11);
    assert_eq!(summary.before_trail, 3);
    assert_eq!(summary.sealed, 5);
    // 10:06, 10:07 and 10:08 are within sealable_at + 10 minutes + a period of now.
    assert_eq!(summary.not_sealed_yet, 3);
    assert_eq!(summary.unsealed_objects, 1);

    // Much later, they are missing.
    let later = world.settings(
        "2026-11-22T09:58:00Z",
        "2026-11-22T10:08:00Z",
        now + Duration::hours(1),
    );
    let (problems, summary) = world.verify(&later, false).await;
    assert_eq!(summary.missing, 3);
    assert_eq!(
        problems.iter().map(|p| p.kind).collect::<Vec<_>>(),
        [ProblemKind::DigestMissing; 3]
    );
    assert!(
        problems[1]
            .detail
            .contains("1 object(s) are covered by no digest"),
        "{}",
        problems[1].detail
    );
}

#[tokio::test]
async fn a_deleted_first_digest_still_starts_the_chain() {
    let (world, _) = trail();
    world.archive.delete(&digest_key(period(at(START))));
    let settings = world.settings("2026-11-22T09:55:00Z", END, at(END) + Duration::hours(1));
    let (problems, summary) = world.verify(&settings, false).await;
    assert_eq!(summary.before_trail, 5);
    assert_eq!(
        problems
            .iter()
            .map(|p| (p.kind, p.subject.clone()))
            .collect::<Vec<_>>(),
        [(ProblemKind::DigestMissing, digest_key(period(at(START))))]
    );
}

#[tokio::test]
async fn digests_removed_for_good_from_the_chains_start_break_it_unless_the_retention_let_them_expire()
 {
    let (world, _) = trail();
    for minute in 0..2 {
        let key = digest_key(period(at(START) + Duration::minutes(minute)));
        let (version, _) = current(&world.archive, &key);
        world.archive.remove_version(&key, &version);
    }
    let first = digest_key(period(at("2026-11-22T10:02:00Z")));
    let gone = digest_key(period(at("2026-11-22T10:01:00Z")));
    // Within the retention (or with none): the chain is broken, and the objects of the periods
    // left without a digest are not sealed.
    world.archive.set_default_retention(Some(1));
    for retention in [Some(1), None] {
        world.archive.set_default_retention(retention);
        let settings = world.settings(START, END, at(END) + Duration::hours(1));
        let (problems, summary) = world.verify(&settings, false).await;
        assert_eq!(summary.before_trail, 2);
        assert_eq!(
            problems
                .iter()
                .map(|p| (p.kind, p.subject.clone()))
                .collect::<Vec<_>>(),
            [
                (ProblemKind::ChainBroken, first.clone()),
                (ProblemKind::TrailNotSealed, digest_key(period(at(START)))),
                (ProblemKind::TrailNotSealed, gone.clone()),
            ]
        );
        let expected = match retention {
            Some(_) => "retention of 1 days keeps it until",
            None => "no default Object Lock retention",
        };
        assert!(problems[0].detail.contains(&gone), "{}", problems[0].detail);
        assert!(
            problems[0].detail.contains(expected),
            "{}",
            problems[0].detail
        );
        assert!(
            problems[1]
                .detail
                .contains("before the chain's first digest"),
            "{}",
            problems[1].detail
        );
        assert!(summary.chain.contains("chain broken"), "{}", summary.chain);
    }
    // Past the retention, their expiry is lawful: the chain is trusted from the first digest
    // left, and a range from it holds.
    world.archive.set_default_retention(Some(1));
    let settings = world.settings("2026-11-22T10:02:00Z", END, at(END) + Duration::days(2));
    let (problems, summary) = world.verify(&settings, false).await;
    assert_eq!(problems, []);
    assert_eq!(
        summary.chain,
        format!(
            "trusted from {first}: its predecessor {gone} is older than the bucket's Object Lock retention of 1 days and may have expired lawfully"
        )
    );
}

#[tokio::test]
async fn table_items_changed_deleted_or_expired_are_told_apart() {
    let (world, _) = trail();
    let time = |m: i64| canonical_time(at(START) + Duration::minutes(m) + Duration::seconds(20));
    // Changed behind the function's back.
    let mut item = world.table.get_item("m-05-1", &time(5)).unwrap();
    item.line = item.line.replace("text of m-05-1", "rewritten");
    world.table.put(item);
    // Deleted.
    world.table.remove("m-09-2", &time(9));
    let problems = world.problems(END, true).await;
    assert_eq!(
        problems,
        [
            (ProblemKind::ItemChanged, "m-05-1".to_owned()),
            (ProblemKind::ItemMissing, "m-09-2".to_owned()),
        ]
    );
    let settings = world.settings(START, END, at(END) + Duration::hours(3));
    let (problems, _) = world.verify(&settings, true).await;
    assert!(
        problems[0].detail.contains("auditText changed"),
        "{}",
        problems[0].detail
    );

    // Expired by TTL: gone, and not a problem.
    let mut world = World::new();
    let base = at(START);
    let mut item = world.item("ttl", base, base);
    item.line = item.line.replacen('{', "{\"expiresAt\":1795340000,", 1);
    let key = write_object(
        &world.archive,
        ObjectKind::Trail,
        base,
        length(),
        7,
        &[item.line],
    );
    assert!(key.starts_with("trail/"));
    world.seal_through(base);
    let settings = world.settings(START, "2026-11-22T10:00:59Z", base + Duration::hours(1));
    let (problems, summary) = world.verify(&settings, true).await;
    assert_eq!(problems, []);
    assert_eq!(summary.table.unwrap().expired, 1);
}

#[tokio::test]
async fn an_item_in_the_table_is_looked_for_where_it_can_have_been_archived() {
    let mut world = World::new();
    let base = at(START);
    // Received at the range's end, archived in the next period (the look-ahead).
    world.events(
        &["late"],
        at("2026-11-22T10:04:59Z"),
        at("2026-11-22T10:05:03Z"),
    );
    // Sent long after its auditTime (a backfill): archived an hour after the range.
    let backfill = world.item(
        "backfill",
        base + Duration::minutes(2),
        base + Duration::hours(1),
    );
    let line = backfill.line.clone();
    world.table.put(backfill);
    write_object(
        &world.archive,
        ObjectKind::Trail,
        base + Duration::hours(1),
        length(),
        900,
        &[line],
    );
    // Never archived: written in the range, and one backfilled.
    world.table.put(world.item(
        "lost",
        base + Duration::minutes(3),
        base + Duration::minutes(3),
    ));
    world.table.put(world.item(
        "lost-backfill",
        base + Duration::minutes(3),
        base + Duration::hours(2),
    ));
    // Written a moment ago: the archiver has not got to it yet.
    let now = base + Duration::hours(3);
    world.table.put(world.item(
        "recent",
        base + Duration::minutes(4),
        now - Duration::seconds(30),
    ));
    // Written before the chain started: never archived, so the trail is not sealed there.
    world.table.put(world.item(
        "old",
        base + Duration::minutes(1),
        base - Duration::hours(1),
    ));
    world.seal_through(now - Duration::minutes(30));

    let settings = world.settings(START, "2026-11-22T10:04:59.999Z", now);
    let (problems, summary) = world.verify(&settings, true).await;
    assert_eq!(
        problems
            .iter()
            .map(|p| (p.kind, p.subject.as_str()))
            .collect::<Vec<_>>(),
        [
            (
                ProblemKind::TrailNotSealed,
                digest_key(period(base - Duration::hours(1))).as_str()
            ),
            (ProblemKind::ItemNotArchived, "lost"),
            (ProblemKind::ItemNotArchived, "lost-backfill"),
        ]
    );
    assert!(
        problems[0].detail.contains("messageId old"),
        "{}",
        problems[0].detail
    );
    let table = summary.table.unwrap();
    assert_eq!(table.items, 6);
    assert_eq!(table.items_archived, 2);
    assert_eq!(table.not_archived_yet, 1);
    assert_eq!(table.before_trail, 1);
    assert!(table.extra_periods >= 2, "{table:?}");
}

#[tokio::test]
async fn an_empty_range_or_a_bucket_without_digests_checks_nothing_and_says_so() {
    let world = World::new();
    let settings = world.settings(
        "2026-11-22T10:00:00.0005Z",
        "2026-11-22T10:00:00.0009Z",
        at(START),
    );
    let (problems, summary) = world.verify(&settings, true).await;
    assert_eq!((problems.len(), summary.periods), (0, 0));
    let settings = world.settings(
        START,
        "2026-11-22T10:02:00Z",
        at(START) + Duration::hours(1),
    );
    let (_, summary) = world.verify(&settings, false).await;
    assert_eq!((summary.periods, summary.before_trail), (3, 3));
}

#[test]
fn problems_are_printed_one_line_each() {
    let problem = Problem::new(ProblemKind::DigestMissing, "digest/x", "no digest");
    assert_eq!(problem.to_string(), "digest missing  digest/x  no digest");
}

/// The (kind, subject) of each problem, sorted.
fn sorted(problems: &[Problem]) -> Vec<(ProblemKind, String)> {
    let mut found: Vec<_> = problems
        .iter()
        .map(|p| (p.kind, p.subject.clone()))
        .collect();
    found.sort();
    found
}

#[tokio::test]
async fn every_tamper_record_is_an_item_modified_even_when_the_item_was_restored() {
    let mut world = World::new();
    let base = at(START);
    world.events(&["a", "b"], base, base);
    // The item a changed and changed back (two MODIFY records), b deleted and put back (a
    // REMOVE): the table holds what was archived, so only the tamper records tell.
    world.tamper(base + Duration::minutes(1), "a", "MODIFY");
    world.tamper(
        base + Duration::minutes(1) + Duration::seconds(5),
        "a",
        "MODIFY",
    );
    world.tamper(base + Duration::minutes(2), "b", "REMOVE");
    world.seal_through(base + Duration::minutes(2));
    // And one in a period not sealed yet.
    world.tamper(base + Duration::minutes(3), "b", "MODIFY");
    let now = base + Duration::minutes(4);
    let settings = world.settings(START, "2026-11-22T10:03:59Z", now);
    for with_table in [false, true] {
        let (problems, summary) = world.verify(&settings, with_table).await;
        assert_eq!(
            sorted(&problems),
            [
                (ProblemKind::ItemModified, "a".to_owned()),
                (ProblemKind::ItemModified, "a".to_owned()),
                (ProblemKind::ItemModified, "b".to_owned()),
                (ProblemKind::ItemModified, "b".to_owned()),
            ]
        );
        assert_eq!(summary.not_sealed_yet, 1);
        assert_eq!((summary.tamper_objects, summary.tamper_events), (3, 3));
        let removed = problems
            .iter()
            .find(|p| p.detail.contains("REMOVE"))
            .unwrap();
        assert!(
            removed.detail.contains("whether or not it was restored"),
            "{}",
            removed.detail
        );
    }
}

#[tokio::test]
async fn a_trail_with_data_and_no_digest_is_not_sealed_and_an_empty_one_says_so() {
    let mut world = World::new();
    let base = at(START);
    let first = world.events(&["a"], base, base);
    world.events(
        &["b"],
        base + Duration::minutes(2),
        base + Duration::minutes(2),
    );
    assert!(first.starts_with("trail/"));
    let settings = world.settings(START, "2026-11-22T10:03:59Z", base + Duration::hours(1));
    let (problems, summary) = world.verify(&settings, false).await;
    assert_eq!(
        sorted(&problems),
        [
            (ProblemKind::TrailNotSealed, digest_key(period(base))),
            (
                ProblemKind::TrailNotSealed,
                digest_key(period(base + Duration::minutes(2)))
            ),
        ]
    );
    assert!(!summary.holds());
    assert!(
        problems[0]
            .detail
            .contains("holds no digest chain of 60 s periods"),
        "{}",
        problems[0].detail
    );
    assert!(
        summary.chain.starts_with("none: the bucket"),
        "{}",
        summary.chain
    );
    // With --table, the table's items too (a period of their own when they have no object).
    world.table.put(world.item(
        "c",
        base + Duration::minutes(3),
        base + Duration::minutes(3),
    ));
    let (problems, _) = world.verify(&settings, true).await;
    assert_eq!(
        sorted(&problems)
            .into_iter()
            .filter(|(k, _)| *k == ProblemKind::TrailNotSealed)
            .count(),
        5,
        "{problems:?}"
    );

    // A range before the trail with no data holds.
    let empty = world.settings(
        "2026-11-22T09:00:00Z",
        "2026-11-22T09:04:59Z",
        base + Duration::hours(1),
    );
    let (problems, summary) = world.verify(&empty, true).await;
    assert_eq!(problems, []);
    assert_eq!(summary.before_trail, 5);

    // Digests the key signed, of another period length: the flag is wrong, and verify says so.
    let hour = PeriodLength::new(3600).unwrap();
    let other = Digest::new(BUCKET, hour.period_of(base), base, vec![], None, ARN);
    put_digest(&world.archive, hour.period_of(base), &other, &world.key);
    let key = TrustedKey::new(world.key.public_key()).unwrap();
    let error = verify(
        &world.archive,
        &key,
        None::<&MemoryTable>,
        &settings,
        &mut Vec::new(),
    )
    .await
    .unwrap_err();
    // The flag to set is auditctl's words (words.rs tests them on this error).
    assert!(
        matches!(
            &error,
            crate::Error::PeriodMismatch {
                found: 3600,
                given: 60,
                ..
            }
        ),
        "{error}"
    );

    // Keys under digest/ that are no digest of this length: the summary names the flag.
    let world = World::new();
    world.events_at_no_table(base);
    put(
        &world.archive,
        "digest/dt=2026-11-22/hour=10/p1795341601.json",
        b"{}".to_vec(),
        &[],
    );
    let (problems, summary) = world.verify(&settings, false).await;
    assert!(
        summary.chain.contains("--period-seconds"),
        "{}",
        summary.chain
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
}

#[tokio::test]
async fn objects_a_digest_lists_as_unattested_are_each_reported_once() {
    let mut world = World::new();
    let base = at(START);
    world.events(&["a"], base, base);
    let planted = world.events(&["forged"], base, base + Duration::seconds(3));
    world.table.remove("forged", &canonical_time(base));
    let version = current(&world.archive, &planted).0;
    let bytes = current(&world.archive, &planted).1;
    world.seal_next_with(|digest| {
        digest.objects.retain(|o| o.key != planted);
        digest.unattested.push(UnattestedObject {
            key: planted.clone(),
            version_id: version.clone(),
            sha256: hex(&sha256(&bytes)),
            size: bytes.len() as u64,
            reason: "no marker names it".into(),
        });
    });
    let settings = world.settings(START, "2026-11-22T10:00:59Z", base + Duration::hours(1));
    let (problems, summary) = world.verify(&settings, true).await;
    assert_eq!(
        sorted(&problems),
        [(ProblemKind::ObjectNotAttested, planted.clone())]
    );
    assert!(
        problems[0].detail.contains("no marker names it"),
        "{}",
        problems[0].detail
    );
    assert_eq!(summary.unattested, 1);
    assert_eq!(summary.trail_objects, 1);
}

#[tokio::test]
async fn an_object_that_landed_after_its_period_was_sealed_is_explained_by_a_later_digests_late_list()
 {
    let mut world = World::new();
    let base = at(START);
    world.events(&["a"], base, base);
    world.seal_through(base + Duration::minutes(1));
    // A write of 10:01 that landed after 10:01 was sealed; its events archived again at 10:03.
    let late = world.events(
        &["late"],
        base + Duration::minutes(1),
        base + Duration::minutes(1),
    );
    let late_version = current(&world.archive, &late).0;
    let again = world.events(
        &["late-again"],
        base + Duration::minutes(3),
        base + Duration::minutes(3),
    );
    world
        .table
        .remove("late", &canonical_time(base + Duration::minutes(1)));
    world.seal_through(base + Duration::minutes(2));
    let listed = LateObject {
        key: late.clone(),
        version_id: late_version,
        sha256: String::new(),
        events: 1,
        archived_as: again,
    };
    world.seal_next_with(|digest| digest.late.push(listed.clone()));
    world.seal_through(base + Duration::minutes(5));

    // The later digest in the range, or after it (read on until it is found).
    for to in ["2026-11-22T10:05:59Z", "2026-11-22T10:01:59Z"] {
        let settings = world.settings(START, to, base + Duration::hours(1));
        let (problems, summary) = world.verify(&settings, false).await;
        assert_eq!(problems, [], "{to}");
        assert_eq!(summary.late_objects, 1, "{to}");
        assert!(
            summary.lines()[3].contains("late objects: 1"),
            "{:?}",
            summary.lines()
        );
    }

    // No digest lists it: not in digest.
    let mut world = World::new();
    world.events(&["a"], base, base);
    world.seal_through(base + Duration::minutes(1));
    let slipped = world.events(
        &["x"],
        base + Duration::minutes(1),
        base + Duration::minutes(1),
    );
    world.seal_through(base + Duration::minutes(5));
    let settings = world.settings(START, "2026-11-22T10:01:59Z", base + Duration::hours(1));
    let (problems, summary) = world.verify(&settings, false).await;
    assert_eq!(
        sorted(&problems),
        [(ProblemKind::ObjectNotInDigest, slipped)]
    );
    assert_eq!(summary.late_objects, 0);
}

#[tokio::test]
async fn an_event_archived_twice_is_duplicated_across_periods_and_within_an_object() {
    let mut world = World::new();
    let base = at(START);
    world.events(&["a", "b"], base, base);
    // The line of a again, two periods later (a retry that wrote it a second time), in an
    // object that holds c's line twice.
    let line = world
        .table
        .get_item("a", &canonical_time(base))
        .unwrap()
        .line;
    let c = world.item(
        "c",
        base + Duration::minutes(2),
        base + Duration::minutes(2),
    );
    world.table.put(c.clone());
    let again = write_object(
        &world.archive,
        ObjectKind::Trail,
        base + Duration::minutes(2),
        length(),
        900,
        &[line, c.line.clone(), c.line],
    );
    world.seal_through(base + Duration::minutes(3));
    let settings = world.settings(START, "2026-11-22T10:03:59Z", base + Duration::hours(1));
    for with_table in [false, true] {
        let (problems, summary) = world.verify(&settings, with_table).await;
        assert_eq!(
            sorted(&problems),
            [
                (ProblemKind::EventDuplicated, "a".to_owned()),
                (ProblemKind::EventDuplicated, "c".to_owned()),
            ]
        );
        assert!(
            problems[0].detail.contains(&again) && problems[0].detail.contains("already in"),
            "{}",
            problems[0].detail
        );
        assert_eq!(problems[1].detail, format!("archived twice in {again}"));
        assert_eq!(summary.duplicated, 2);
    }
}

#[tokio::test]
async fn an_item_archived_hours_late_is_counted_and_one_later_than_the_stream_keeps_it_is_not_archived()
 {
    let mut world = World::new();
    let base = at(START);
    world.events(&["on-time"], base, base);
    // Received at 10:01, archived at 15:01 after an outage (the stream kept it).
    let late = world.item(
        "late",
        base + Duration::minutes(1),
        base + Duration::minutes(1),
    );
    world.table.put(late.clone());
    write_object(
        &world.archive,
        ObjectKind::Trail,
        base + Duration::hours(5) + Duration::minutes(1),
        length(),
        900,
        &[late.line],
    );
    // Received at 10:02, "archived" 26 hours later: no stream holds a record that long.
    let too_late = world.item(
        "too-late",
        base + Duration::minutes(2),
        base + Duration::minutes(2),
    );
    world.table.put(too_late.clone());
    write_object(
        &world.archive,
        ObjectKind::Trail,
        base + Duration::hours(26),
        length(),
        901,
        &[too_late.line],
    );
    let now = base + Duration::hours(30);
    world.seal_through(now - Duration::hours(1));
    let settings = world.settings(START, "2026-11-22T10:02:59Z", now);
    let (problems, summary) = world.verify(&settings, true).await;
    assert_eq!(
        sorted(&problems),
        [(ProblemKind::ItemNotArchived, "too-late".to_owned())]
    );
    let table = summary.table.clone().unwrap();
    assert_eq!((table.items, table.items_archived), (3, 2));
    assert_eq!(table.archived_late, 1);
    assert!(
        summary.lines()[5].ends_with("1 archived late"),
        "{:?}",
        summary.lines()
    );
}

#[tokio::test]
async fn a_planted_earlier_digest_key_is_reported_and_never_starts_the_chain() {
    let (world, _) = trail();
    // A digest of 09:50, earlier than the chain's first, signed by another key, and one that is
    // no digest at all at 09:55.
    let other = TestKey::new("arn:aws:kms:us-east-1:111122223333:key/other");
    let planted = period(at("2026-11-22T09:50:00Z"));
    let digest = Digest::new(BUCKET, planted, at(START), vec![], None, ARN);
    put_digest(&world.archive, planted, &digest, &other);
    let junk = digest_key(period(at("2026-11-22T09:55:00Z")));
    put(&world.archive, &junk, b"{}".to_vec(), &[]);
    let settings = world.settings("2026-11-22T09:50:00Z", END, at(END) + Duration::hours(1));
    let (problems, summary) = world.verify(&settings, false).await;
    assert_eq!(
        sorted(&problems),
        [
            (ProblemKind::SignatureInvalid, digest_key(planted)),
            (ProblemKind::SignatureInvalid, junk.clone()),
        ]
    );
    assert!(
        problems[0].detail.contains("not the chain's start"),
        "{}",
        problems[0].detail
    );
    assert_eq!(summary.before_trail, 10);
    assert_eq!(
        summary.chain,
        format!(
            "trusted from {}: the chain's first digest (previous null)",
            digest_key(period(at(START)))
        )
    );
    // A range inside the trail trusts its first period, linked to the digest before it.
    let settings = world.settings(
        "2026-11-22T10:05:00Z",
        "2026-11-22T10:06:59Z",
        at(END) + Duration::hours(1),
    );
    let (_, summary) = world.verify(&settings, false).await;
    assert_eq!(
        summary.chain,
        format!(
            "trusted from {}: the range's first period; its link to {} checked",
            digest_key(period(at("2026-11-22T10:05:00Z"))),
            digest_key(period(at("2026-11-22T10:04:00Z")))
        )
    );
}

#[tokio::test]
async fn a_digest_at_an_alternate_name_is_followed_and_names_not_validly_signed_are_reported() {
    let mut world = World::new();
    let base = at(START);
    world.events(&["a"], base, base);
    world.seal_through(base);
    // 10:01's name taken before the sealer got there; its digest at the first alternate name.
    let squatted = period(base + Duration::minutes(1));
    let name = digest_key(squatted);
    put(&world.archive, &name, b"squatted".to_vec(), &[]);
    world.events(
        &["b"],
        base + Duration::minutes(1),
        base + Duration::minutes(1),
    );
    let previous = world.sealed.as_ref().map(|(_, d)| d.clone());
    let digest = digest_of(
        &world.archive,
        BUCKET,
        squatted,
        previous.as_ref(),
        &world.key,
    );
    let alternate = digest_key_alternate(squatted, 1);
    let sealed = put_digest_at(&world.archive, &alternate, &digest, &world.key);
    world.sealed = Some((squatted, sealed));
    // And a second alternate signed by another key.
    let other = TestKey::new("arn:aws:kms:us-east-1:111122223333:key/other");
    put_digest_at(
        &world.archive,
        &digest_key_alternate(squatted, 2),
        &digest,
        &other,
    );
    world.seal_through(base + Duration::minutes(3));
    let next = Digest::parse(&current(&world.archive, &digest_key(squatted.next())).1).unwrap();
    assert_eq!(next.previous.unwrap().key, alternate);

    let (problems, summary) = world
        .verify(
            &world.settings(START, "2026-11-22T10:03:59Z", base + Duration::hours(1)),
            true,
        )
        .await;
    assert_eq!(
        sorted(&problems),
        [
            (
                ProblemKind::SignatureInvalid,
                digest_key_alternate(squatted, 2)
            ),
            (ProblemKind::SignatureInvalid, name.clone()),
        ]
    );
    let on_name = problems.iter().find(|p| p.subject == name).unwrap();
    assert!(on_name.detail.contains(&alternate), "{}", on_name.detail);
    assert_eq!(summary.sealed, 4);
    assert_eq!(summary.trail_objects, 2);

    // A next digest that links to a name the bucket does not hold breaks the chain.
    let mut world2 = World::new();
    world2.events(&["a"], base, base);
    world2.seal_through(base);
    let mut digest = digest_of(
        &world2.archive,
        BUCKET,
        squatted,
        world2.sealed.as_ref().map(|(_, d)| d),
        &world2.key,
    );
    if let Some(link) = digest.previous.as_mut() {
        link.key = digest_key_alternate(period(base), 3);
    }
    put_digest(&world2.archive, squatted, &digest, &world2.key);
    let (problems, _) = world2
        .verify(
            &world2.settings(START, "2026-11-22T10:01:59Z", base + Duration::hours(1)),
            false,
        )
        .await;
    assert_eq!(sorted(&problems), [(ProblemKind::ChainBroken, name)]);
    assert!(
        problems[0]
            .detail
            .contains("which the bucket does not hold"),
        "{}",
        problems[0].detail
    );
}

#[test]
fn the_late_bound_covers_what_the_templates_mapping_retries() {
    // The archiver's stream event retries a failing batch for as long as the stream holds its
    // records (no age limit of its own), so a record can be archived up to the stream's 24 hours
    // after it was written: LATE_ARCHIVE_SECONDS must reach that far, and the template must keep
    // the mapping's age limit off (or LATE_ARCHIVE_SECONDS must follow it).
    let template = include_str!("../../../../template.yaml");
    let mapping = template
        .split("MaximumRetryAttempts: {Ref: ArchiveRetryAttempts}")
        .nth(1)
        .expect("the archiver's stream event retries ArchiveRetryAttempts times");
    let age = mapping
        .lines()
        .find_map(|l| l.trim().strip_prefix("MaximumRecordAgeInSeconds:"))
        .map(str::trim);
    assert_eq!(age, Some("-1"), "the mapping's MaximumRecordAgeInSeconds");
    const {
        assert!(
            super::LATE_ARCHIVE_SECONDS
                >= super::STREAM_RETENTION_SECONDS + super::ARCHIVE_LAG_SECONDS
        );
        assert!(super::STREAM_RETENTION_SECONDS == 86_400);
    }
}

/// The transparency log's checks.
mod log;
