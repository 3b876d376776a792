//! verify's behaviour on the archive's objects and the table, given an archive the archiver wrote
//! and its own sealer sealed (tests/support), then changed: each change reported once, with its
//! kind and the key or `messageId` it concerns.

use audit_model::archive::ObjectKind;
use audit_model::digest::{Digest, ProblemKind, digest_key};
use audit_model::message::canonical_time;
use chrono::Duration;

mod support;

use support::*;

#[tokio::test]
async fn an_object_overwritten_or_deleted_is_changed_or_missing() {
    // Sealed before the log began: with it, a version gone for good is also a leaf missing of
    // its digest (verify_log.rs).
    let (world, keys) = trail_sealed(false).await;
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
    let (mut world, _) = trail().await;
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
    world.seal_through(base).await;
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
async fn table_items_changed_deleted_or_expired_are_told_apart() {
    let (world, _) = trail().await;
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
    world.seal_through(base).await;
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
    world.seal_through(now - Duration::minutes(30)).await;

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
    world.seal_through(base + Duration::minutes(2)).await;
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
async fn objects_a_digest_lists_as_unattested_are_each_reported_once() {
    let mut world = World::new();
    let base = at(START);
    world.events(&["a"], base, base);
    // Written beside the archiver's objects with no marker: the sealer lists it as unattested.
    let line = world.item("forged", base, base).line;
    let planted = write_unmarked(&world.archive, base + Duration::seconds(3), 5, &[line]);
    world.seal_through(base).await;
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
    world.seal_through(base + Duration::minutes(1)).await;
    // A write of 10:01 that landed after 10:01 was sealed: the sealer of a later period finds
    // it, archives its events again and lists it in that digest's late objects.
    world.events(
        &["late"],
        base + Duration::minutes(1),
        base + Duration::minutes(1),
    );
    world.seal_through(base + Duration::minutes(5)).await;
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

    // Landed later than the sealer looks back: no digest lists it, not in digest.
    let mut world = World::new();
    world.events(&["a"], base, base);
    world.seal_through(base + Duration::minutes(8)).await;
    let slipped = world.events(
        &["x"],
        base + Duration::minutes(1),
        base + Duration::minutes(1),
    );
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
    world.seal_through(base + Duration::minutes(3)).await;
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
    world.seal_through(now - Duration::hours(1)).await;
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
        summary.lines()[6].starts_with(
            "items     3 items of the table in the range looked up in the archive, 2 archived (1 late: found beyond --archive-lag): 1 not archived (item not archived: reported above);"
        ),
        "{:?}",
        summary.lines()
    );
}
