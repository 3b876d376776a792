//! The transparency log's checks, given digests, tiles and checkpoints written by the archiver's
//! own sealer (tests/support), then changed as an insider with the digest key could: when
//! `verify` runs, then each change is `leaf missing`, `checkpoint inconsistent` or `cosignature
//! missing`, and a log as sealed holds.

use std::io::Read;

use audit_aws::kms::MemoryKey;
use audit_model::archive::Period;
use audit_model::digest::{ListedObject, ProblemKind, TreeHead, digest_key};
use audit_model::note::{
    Checkpoint, NoteSignature, SignedNote, WitnessKey, checkpoint_key, cosignature_key,
    cosigned_message, ecdsa_key_id, origin,
};
use audit_model::tlog::{Hash, HexHash, TreeEdge, leaf_hash, object_lines};
use audit_proof::verify::report::Problem;
use bytes::Bytes;
use chrono::Duration;

mod support;

use support::*;

/// The checkpoint of the tree of `size` with `root`, signed by `key` as the log: what an insider
/// with the digest key's Sign permission can write.
fn checkpoint_note(size: u64, root: Hash, key: &MemoryKey) -> SignedNote {
    let name = origin(BUCKET);
    let body = Checkpoint {
        origin: name.clone(),
        size,
        root,
    }
    .body();
    let signature = key.sign(body.as_bytes()).unwrap();
    SignedNote {
        signatures: vec![NoteSignature {
            name,
            key_id: ecdsa_key_id(&key.public_key().der),
            signature,
        }],
        body,
    }
}

/// Stores the checkpoint of `size` (a new version over the sealer's).
fn put_checkpoint(archive: &MemoryArchive, note: &SignedNote, size: u64) {
    archive.overwrite(&checkpoint_key(size), Bytes::from(note.text()));
}

/// The leaf hashes of a listed object's lines (its listed version's, gunzipped).
fn object_leaves(archive: &MemoryArchive, object: &ListedObject) -> Vec<Hash> {
    let version = archive
        .versions(&object.key)
        .into_iter()
        .find(|v| v.version_id == object.version_id)
        .expect("the listed version");
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(version.body.as_ref())
        .read_to_end(&mut text)
        .unwrap();
    object_lines(&text).into_iter().map(leaf_hash).collect()
}

/// A trail whose digests carry the transparency log from `log_from` minutes after `START` on (the
/// periods before sealed as before the log began): 130 events in each of 7 of its 20 periods,
/// 910 leaves in all (three full level-0 tiles, partial ones at every checkpoint's size).
async fn logged_trail(log_from: i64) -> World {
    let mut world = World::new();
    world.logged = false;
    let base = at(START);
    for minute in [0i64, 1, 2, 5, 9, 10, 17] {
        let when = base + Duration::minutes(minute) + Duration::seconds(20);
        let ids: Vec<String> = (0..130).map(|i| format!("m-{minute:02}-{i:03}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        world.events(&ids, when, when + Duration::seconds(2));
    }
    if log_from > 0 {
        world
            .seal_through(base + Duration::minutes(log_from - 1))
            .await;
    }
    world.logged = true;
    world.seal_through(base + Duration::minutes(19)).await;
    world
}

/// The sizes of the trail's checkpoints (one per distinct tree size).
const LOGGED_SIZES: [u64; 7] = [130, 260, 390, 520, 650, 780, 910];

/// `minute`'s period after `START`.
fn minute(n: i64) -> Period {
    period(at(START) + Duration::minutes(n))
}

fn kinds(problems: &[Problem]) -> Vec<(ProblemKind, String)> {
    problems
        .iter()
        .map(|p| (p.kind, p.subject.clone()))
        .collect()
}

#[tokio::test]
async fn a_transparency_log_as_sealed_holds_and_the_summary_says_what_was_checked() {
    let world = logged_trail(0).await;
    let settings = world.settings(START, END, at(END) + Duration::hours(3));
    let (problems, summary) = world.verify(&settings, false).await;
    assert_eq!(problems, []);
    assert_eq!(summary.log.digests, 20);
    assert_eq!((summary.log.from, summary.log.to), (Some(0), 910));
    assert_eq!(summary.log.leaves, 910);
    assert_eq!(summary.log.checkpoints, LOGGED_SIZES.len() as u64);
    assert_eq!(summary.log.consistency, LOGGED_SIZES.len() as u64 - 1);
    assert_eq!(
        summary.log.begins.as_deref(),
        Some(digest_key(minute(0)).as_str())
    );
    let line = summary
        .lines()
        .into_iter()
        .find(|l| l.starts_with("log  "))
        .unwrap();
    assert!(
        line.contains(&format!("the log begins at {}", digest_key(minute(0))))
            && line.contains("tree sizes 0 to 910")
            && line.contains("7 checkpoint(s)")
            && line.contains("6 consistency proof(s)"),
        "{line}"
    );

    // A range inside the log: the tree before it is read from the tiles of its size.
    let inside = world.settings("2026-11-22T10:05:00Z", END, at(END) + Duration::hours(3));
    let (problems, summary) = world.verify(&inside, false).await;
    assert_eq!(problems, []);
    assert_eq!((summary.log.from, summary.log.to), (Some(390), 910));
    assert_eq!(summary.log.leaves, 520);
    assert_eq!(summary.log.begins, None);
}

#[tokio::test]
async fn digests_sealed_before_the_log_began_are_no_problem_and_the_summary_says_where_it_begins() {
    let world = logged_trail(3).await;
    let settings = world.settings(START, END, at(END) + Duration::hours(3));
    let (problems, summary) = world.verify(&settings, false).await;
    assert_eq!(problems, []);
    assert_eq!(summary.log.untreed, 3);
    assert_eq!(
        summary.log.begins.as_deref(),
        Some(digest_key(minute(3)).as_str())
    );
    // Minutes 0 to 2 are before the log: 520 leaves from minute 5 on.
    assert_eq!((summary.log.from, summary.log.to), (Some(0), 520));
    let line = summary
        .lines()
        .into_iter()
        .find(|l| l.starts_with("log  "))
        .unwrap();
    assert!(
        line.contains("3 digest(s) of the range before it carry no tree"),
        "{line}"
    );

    // Only digests from before the log: said so, no problem.
    let before = world.settings(
        START,
        "2026-11-22T10:02:59.999Z",
        at(END) + Duration::hours(3),
    );
    let (problems, summary) = world.verify(&before, false).await;
    assert_eq!(problems, []);
    assert!(
        summary
            .lines()
            .iter()
            .any(|l| l.starts_with("log       none in the range: its 3 digest(s) carry no tree")),
        "{:?}",
        summary.lines()
    );

    // A digest without a tree after the log began: its events are not leaves.
    let mut world = logged_trail(0).await;
    world.logged = false;
    let when = at(START) + Duration::minutes(20) + Duration::seconds(20);
    world.events(&["late-1"], when, when + Duration::seconds(2));
    world.seal_through(at(START) + Duration::minutes(20)).await;
    let settings = world.settings(
        START,
        "2026-11-22T10:20:59.999Z",
        at(END) + Duration::hours(3),
    );
    let (problems, _) = world.verify(&settings, false).await;
    assert_eq!(
        kinds(&problems),
        [(ProblemKind::LeafMissing, digest_key(minute(20)))]
    );
}

#[tokio::test]
async fn a_hash_changed_in_a_stored_tile_is_a_leaf_missing_at_its_leaf() {
    let world = logged_trail(0).await;
    let tile = "log/tile/0/001";
    let (_, mut bytes) = current(&world.archive, tile);
    bytes[5 * 32] ^= 1;
    put(&world.archive, tile, bytes, &[]);
    let settings = world.settings(START, END, at(END) + Duration::hours(3));
    let (problems, summary) = world.verify(&settings, false).await;
    assert!(!summary.holds());
    let leaf = problems
        .iter()
        .find(|p| p.kind == ProblemKind::LeafMissing && p.subject == tile)
        .unwrap_or_else(|| panic!("{problems:?}"));
    assert!(
        leaf.detail.contains("holds another hash at leaf 261"),
        "{leaf}"
    );
    // Nothing but what that tile holds is blamed.
    assert!(
        problems
            .iter()
            .all(|p| p.subject == tile || p.kind == ProblemKind::CheckpointInconsistent),
        "{problems:?}"
    );

    // A tile of the tree's edge gone: the leaves after it cannot be checked, said once.
    let world = logged_trail(0).await;
    world.archive.delete("log/tile/0/001.p/134");
    let inside = world.settings("2026-11-22T10:05:00Z", END, at(END) + Duration::hours(3));
    let (problems, _) = world.verify(&inside, false).await;
    assert_eq!(
        kinds(&problems),
        [(ProblemKind::LeafMissing, digest_key(minute(5)))]
    );
    assert!(
        problems[0].detail.contains("log/tile/0/001.p/134"),
        "{}",
        problems[0]
    );
}

#[tokio::test]
async fn an_archived_object_gone_is_a_leaf_missing_of_its_digest_and_the_tree_goes_on_after_it() {
    let world = logged_trail(0).await;
    let key = world.archive.keys("trail/").into_iter().nth(2).unwrap();
    let (version, _) = current(&world.archive, &key);
    world.archive.remove_version(&key, &version);
    let settings = world.settings(START, END, at(END) + Duration::hours(3));
    let (problems, _) = world.verify(&settings, false).await;
    assert_eq!(
        kinds(&problems),
        [
            (ProblemKind::ObjectMissing, key),
            (ProblemKind::LeafMissing, digest_key(minute(2))),
        ]
    );
    assert!(
        problems[1]
            .detail
            .contains("give a tree of 260 leaves with root")
            && problems[1].detail.contains("not its tree of 390 leaves"),
        "{}",
        problems[1]
    );
}

#[tokio::test]
async fn a_checkpoint_re_signed_with_another_root_or_by_another_key_or_gone_is_inconsistent() {
    let settings_of = |world: &World| world.settings(START, END, at(END) + Duration::hours(3));
    let world = logged_trail(0).await;
    put_checkpoint(
        &world.archive,
        &checkpoint_note(390, [7; 32], &world.key),
        390,
    );
    let (problems, _) = world.verify(&settings_of(&world), false).await;
    assert_eq!(
        kinds(&problems),
        [(ProblemKind::CheckpointInconsistent, checkpoint_key(390))]
    );
    assert!(
        problems[0]
            .detail
            .contains("says a tree of 390 leaves with root 0707"),
        "{}",
        problems[0]
    );

    let world = logged_trail(0).await;
    let (_, bytes) = current(&world.archive, &checkpoint_key(520));
    let note = SignedNote::parse(std::str::from_utf8(&bytes).unwrap()).unwrap();
    let root = Checkpoint::parse(&note.body).unwrap().root;
    let other = MemoryKey::new("arn:aws:kms:us-east-1:111122223333:key/other");
    put_checkpoint(&world.archive, &checkpoint_note(520, root, &other), 520);
    let (problems, _) = world.verify(&settings_of(&world), false).await;
    assert_eq!(
        kinds(&problems),
        [(ProblemKind::CheckpointInconsistent, checkpoint_key(520))]
    );
    assert!(
        problems[0].detail.contains("no signature by the log's key"),
        "{}",
        problems[0]
    );

    let world = logged_trail(0).await;
    world.archive.delete(&checkpoint_key(650));
    let (problems, _) = world.verify(&settings_of(&world), false).await;
    assert_eq!(
        kinds(&problems),
        [(ProblemKind::CheckpointInconsistent, checkpoint_key(650))]
    );
    assert!(problems[0].detail.starts_with("missing"), "{}", problems[0]);
}

#[tokio::test]
async fn a_checkpoint_that_does_not_extend_the_one_before_is_inconsistent() {
    // The log through minute 9 (650 leaves), then minute 10 sealed on another history: the
    // same number of leaves before it, other ones, its tiles and checkpoint signed by the key.
    let mut world = World::new();
    let base = at(START);
    for minute in [0i64, 1, 2, 5, 9, 10] {
        let when = base + Duration::minutes(minute) + Duration::seconds(20);
        let ids: Vec<String> = (0..130).map(|i| format!("m-{minute:02}-{i:03}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        world.events(&ids, when, when + Duration::seconds(2));
    }
    world.seal_through(base + Duration::minutes(10)).await;
    let next = minute(10);
    let mut fork = TreeEdge::default();
    for i in 0..650 {
        fork.push(
            leaf_hash(format!("another history {i}").as_bytes()),
            &mut Vec::new(),
        );
    }
    // The tiles the period's own leaves fill on the fork, and its partial ones.
    let mut tiles = Vec::new();
    let (digest, _) = sealed(&world.archive, next);
    for object in &digest.objects {
        for leaf in object_leaves(&world.archive, object) {
            fork.push(leaf, &mut tiles);
        }
    }
    tiles.extend(fork.partial_tiles());
    rewrite_digest(&world.archive, &world.key, next, |digest| {
        digest.tree = Some(TreeHead {
            size: fork.size,
            root: HexHash(&fork.root()).to_string(),
            checkpoint: checkpoint_key(fork.size),
        });
    });
    for (tile, bytes) in tiles {
        put(&world.archive, &tile.key(), bytes, &[]);
    }
    put_checkpoint(
        &world.archive,
        &checkpoint_note(780, fork.root(), &world.key),
        780,
    );
    let settings = world.settings(
        START,
        "2026-11-22T10:10:59.999Z",
        at(END) + Duration::hours(3),
    );
    let (problems, summary) = world.verify(&settings, false).await;
    assert!(!summary.holds());
    let inconsistent = problems
        .iter()
        .find(|p| p.kind == ProblemKind::CheckpointInconsistent)
        .unwrap_or_else(|| panic!("{problems:?}"));
    assert_eq!(inconsistent.subject, checkpoint_key(780));
    assert!(
        inconsistent
            .detail
            .contains("does not extend the checkpoint of size 650"),
        "{inconsistent}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.kind == ProblemKind::LeafMissing && p.subject == digest_key(next)),
        "{problems:?}"
    );
}

/// A witness: its key pair and its key as `--witness-key` gives it.
fn witness(name: &str) -> (aws_lc_rs::signature::Ed25519KeyPair, WitnessKey) {
    use aws_lc_rs::signature::KeyPair;
    let pair = aws_lc_rs::signature::Ed25519KeyPair::generate().unwrap();
    let public: [u8; 32] = pair.public_key().as_ref().try_into().unwrap();
    (
        pair,
        WitnessKey {
            name: name.to_owned(),
            public,
        },
    )
}

/// `witness`'s cosignature of the checkpoint of `size` with `root`, stored where witnesses store
/// it.
fn cosign(
    archive: &MemoryArchive,
    pair: &aws_lc_rs::signature::Ed25519KeyPair,
    witness: &WitnessKey,
    size: u64,
    root: [u8; 32],
) {
    let body = Checkpoint {
        origin: origin(BUCKET),
        size,
        root,
    }
    .body();
    let timestamp = 1_795_000_000u64;
    let mut signature = timestamp.to_be_bytes().to_vec();
    signature.extend_from_slice(
        pair.sign(cosigned_message(timestamp, &body).as_bytes())
            .as_ref(),
    );
    let line = NoteSignature {
        name: witness.name.clone(),
        key_id: witness.key_id(),
        signature,
    }
    .line();
    put(
        archive,
        &cosignature_key(size, witness.key_id()),
        line.into_bytes(),
        &[],
    );
}

/// The root the stored checkpoint of `size` says.
fn checkpoint_root(archive: &MemoryArchive, size: u64) -> [u8; 32] {
    let (_, bytes) = current(archive, &checkpoint_key(size));
    let note = SignedNote::parse(std::str::from_utf8(&bytes).unwrap()).unwrap();
    Checkpoint::parse(&note.body).unwrap().root
}

#[tokio::test]
async fn a_witness_asked_for_must_have_cosigned_every_checkpoint_of_the_range() {
    let world = logged_trail(0).await;
    let (pair, key) = witness("witness.example/w1");
    let settings = world.settings(START, END, at(END) + Duration::hours(3));
    let (problems, _) = world
        .verify_witnessed(&settings, std::slice::from_ref(&key))
        .await;
    let want: Vec<(ProblemKind, String)> = LOGGED_SIZES
        .iter()
        .map(|s| (ProblemKind::CosignatureMissing, checkpoint_key(*s)))
        .collect();
    assert_eq!(kinds(&problems), want);
    assert!(
        problems[0].detail.contains("size 130")
            && problems[0].detail.contains("witness.example/w1"),
        "{}",
        problems[0]
    );

    for size in LOGGED_SIZES {
        cosign(
            &world.archive,
            &pair,
            &key,
            size,
            checkpoint_root(&world.archive, size),
        );
    }
    let (problems, summary) = world
        .verify_witnessed(&settings, std::slice::from_ref(&key))
        .await;
    assert_eq!(problems, []);
    assert_eq!(summary.log.cosignatures, LOGGED_SIZES.len() as u64);
    assert!(
        summary
            .lines()
            .iter()
            .any(|l| l.contains("7 cosignature(s) of 1 witness(es)")),
        "{:?}",
        summary.lines()
    );

    // A cosignature of another tree of that size, or by another witness, is none.
    cosign(&world.archive, &pair, &key, 520, [9; 32]);
    let (stranger_pair, stranger) = witness("witness.example/w2");
    cosign(
        &world.archive,
        &stranger_pair,
        &stranger,
        650,
        checkpoint_root(&world.archive, 650),
    );
    let (problems, _) = world
        .verify_witnessed(&settings, &[key.clone(), stranger.clone()])
        .await;
    let missing: Vec<(ProblemKind, String)> = kinds(&problems)
        .into_iter()
        .filter(|(_, s)| s == &checkpoint_key(520) || s == &checkpoint_key(650))
        .collect();
    assert_eq!(
        missing,
        [
            (ProblemKind::CosignatureMissing, checkpoint_key(520)),
            (ProblemKind::CosignatureMissing, checkpoint_key(520)),
        ]
    );
    assert!(
        problems.iter().any(|p| p.detail.contains("does not hold")),
        "{problems:?}"
    );
    assert_eq!(problems.len(), 7, "w2 cosigned 650 alone: {problems:?}");
}

#[tokio::test]
async fn a_log_not_all_written_within_the_grace_is_counted_and_past_it_is_a_problem() {
    // The sealer writes tiles and the checkpoint after the digest; a witness cosigns later.
    let world = logged_trail(0).await;
    let tile = "log/tile/0/003.p/142";
    world.archive.delete(&checkpoint_key(910));
    world.archive.delete(tile);
    let to = "2026-11-22T10:17:59.999Z";
    // Minute 17's digest was sealed at 10:18:30: 10 s ago, within a grace of 60 s.
    let mut soon = world.settings(START, to, at("2026-11-22T10:18:40Z"));
    soon.grace_seconds = 60;
    let (problems, summary) = world.verify(&soon, false).await;
    assert_eq!(problems, []);
    assert_eq!(summary.log.pending, 2);
    assert!(
        summary
            .lines()
            .iter()
            .any(|l| l.contains("2 part(s) of the log of digests sealed within the grace")),
        "{:?}",
        summary.lines()
    );

    let late = world.settings(START, to, at(END) + Duration::hours(3));
    let (problems, _) = world.verify(&late, false).await;
    assert_eq!(
        kinds(&problems),
        [
            (ProblemKind::LeafMissing, tile.to_owned()),
            (ProblemKind::CheckpointInconsistent, checkpoint_key(910)),
        ]
    );
    assert!(
        problems[0].detail.contains("from leaf 768"),
        "{}",
        problems[0]
    );

    // A witness has not cosigned the newest checkpoint yet: counted; the older ones: missing.
    let world = logged_trail(0).await;
    let (_, key) = witness("witness.example/w1");
    let (problems, summary) = world
        .verify_witnessed(&soon, std::slice::from_ref(&key))
        .await;
    let want: Vec<(ProblemKind, String)> = LOGGED_SIZES[..6]
        .iter()
        .map(|s| (ProblemKind::CosignatureMissing, checkpoint_key(*s)))
        .collect();
    assert_eq!(kinds(&problems), want);
    assert_eq!(summary.log.uncosigned_yet, 1);
}
