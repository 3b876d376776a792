//! verify's behaviour on the digest chain, given an archive the archiver wrote and its own sealer
//! sealed (tests/support), then changed as an attacker, an insider or an accident would: each
//! change reported once, with its kind and the key it concerns, and nothing on a trail as sealed.

use audit_aws::kms::MemoryKey;
use audit_model::archive::PeriodLength;
use audit_model::digest::{Digest, ProblemKind, digest_key, digest_key_alternate};
use audit_proof::verify::key::TrustedKey;
use audit_proof::verify::ports::MemoryTable;
use audit_proof::verify::walk::verify;
use chrono::Duration;

mod support;

use support::*;

#[tokio::test]
async fn a_trail_as_sealed_holds_over_many_periods_empty_ones_included() {
    let (world, _) = trail().await;
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
    let (world, _) = trail().await;
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
    world.seal_through(base + Duration::minutes(4)).await;
    // Its sealed version removed for good (a bucket without Object Lock): the next digest
    // still links to it.
    world.remove_digest(period(base + Duration::minutes(2)));
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
    let (world, _) = trail().await;
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
    let (world, _) = trail().await;
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
    let other = MemoryKey::new("arn:aws:kms:us-east-1:111122223333:key/other");
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
    let (world, _) = trail().await;
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
    let (world, _) = trail().await;
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
    let (world, _) = trail().await;
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
    // Sealed before the log began: the insider's digests below carry no tree.
    world.logged = false;
    world.events(&["a"], base, base);
    world.seal_through(base + Duration::minutes(1)).await;
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
    let before = audit_proof::verify::digests::load(&world.archive, &digest_key(restarted))
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
    // The archiver's schedule first ran when 10:01 was sealable: the chain starts at 10:01
    // (the oldest object's period); sealed up to 10:05; now is 10:08:10.
    let first = period(base + Duration::minutes(1));
    seal_up_to(&world.archive, &world.key, first).await;
    world.sealed = Some(first);
    world.seal_through(base + Duration::minutes(5)).await;
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
    let (world, _) = trail().await;
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
    let (world, _) = trail().await;
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
            audit_proof::Error::PeriodMismatch {
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
async fn a_planted_earlier_digest_key_is_reported_and_never_starts_the_chain() {
    let (world, _) = trail().await;
    // A digest of 09:50, earlier than the chain's first, signed by another key, and one that is
    // no digest at all at 09:55.
    let other = MemoryKey::new("arn:aws:kms:us-east-1:111122223333:key/other");
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
    world.seal_through(base).await;
    // 10:01's name taken before the sealer got there; its digest at the first alternate name.
    let squatted = period(base + Duration::minutes(1));
    let name = digest_key(squatted);
    put(&world.archive, &name, b"squatted".to_vec(), &[]);
    world.events(
        &["b"],
        base + Duration::minutes(1),
        base + Duration::minutes(1),
    );
    // The archiver's sealer finds the name taken and seals at the first alternate name.
    world.seal_through(base + Duration::minutes(3)).await;
    let alternate = digest_key_alternate(squatted, 1);
    let digest = Digest::parse(&current(&world.archive, &alternate).1).unwrap();
    assert_eq!(digest.objects.len(), 1);
    // And a second alternate signed by another key.
    let other = MemoryKey::new("arn:aws:kms:us-east-1:111122223333:key/other");
    put_digest_at(
        &world.archive,
        &digest_key_alternate(squatted, 2),
        &digest,
        &other,
    );
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
    world2.seal_through(base).await;
    world2.seal_through(base + Duration::minutes(1)).await;
    rewrite_digest(&world2.archive, &world2.key, squatted, |digest| {
        if let Some(link) = digest.previous.as_mut() {
            link.key = digest_key_alternate(period(base), 3);
        }
    });
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
