//! The transparency log as the sealer writes it, against the in-memory bucket and key: each
//! digest's tree is the tree of every archived line so far (computed here from the lines alone),
//! the tiles and the period index sit at their documented keys with the documented bytes, the
//! checkpoint is a signed note the key's public key checks, inclusion proofs made from the stored
//! tiles hold, and a second run, or a run after one that stopped before its checkpoint, goes on
//! with the same tree.

mod planted;
mod support;

use std::collections::HashMap;
use std::io::Read;

use audit_archiver::seal::SealError;
use audit_archiver::signer::memory::MemorySigner;
use audit_aws::s3::memory::MemoryBucket;
use audit_model::archive::Period;
use audit_model::digest::{Digest, TreeHead};
use audit_model::note::{
    Checkpoint, IndexRow, SignedNote, checkpoint_key, ecdsa_key_id, index_key, origin,
};
use audit_model::tlog::{
    EMPTY_ROOT, Hash, HexHash, TileRef, Tiles, inclusion_proof, inclusion_tiles, leaf_hash,
    node_hash, verify_inclusion,
};
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1, ParsedPublicKey};
use planted::{Marking, Planted, plant};
use support::seal::{BUCKET, KEY_ARN, minute, period, scheduled, seal, settings};
use support::{at, time_out_next_put};

/// RFC 9162's MTH, as the RFC defines it (not the sealer's edge).
fn mth(leaves: &[Hash]) -> Hash {
    match leaves.len() {
        0 => EMPTY_ROOT,
        1 => leaves[0],
        n => {
            let k = 1usize << (usize::BITS - 1 - (n - 1).leading_zeros());
            node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
        }
    }
}

/// Three busy periods (100, 200 in two objects, 300 events: across the 256 boundary), the
/// objects of each in key order.
fn plant_three(bucket: &MemoryBucket) -> Vec<Vec<Planted>> {
    let mut periods = vec![
        vec![plant(
            bucket,
            at("2026-11-22T10:15:10Z"),
            minute(),
            1,
            100,
            Marking::Attested,
        )],
        vec![
            plant(
                bucket,
                at("2026-11-22T10:16:10Z"),
                minute(),
                101,
                150,
                Marking::Attested,
            ),
            plant(
                bucket,
                at("2026-11-22T10:16:40Z"),
                minute(),
                251,
                50,
                Marking::Attested,
            ),
        ],
        vec![plant(
            bucket,
            at("2026-11-22T10:17:10Z"),
            minute(),
            301,
            300,
            Marking::Attested,
        )],
    ];
    for objects in &mut periods {
        objects.sort_by(|a, b| a.key.cmp(&b.key));
    }
    periods
}

/// Every line in archive order, with its object's key and line number.
fn lines_of(periods: &[Vec<Planted>]) -> Vec<(String, u64, String)> {
    periods
        .iter()
        .flatten()
        .flat_map(|object| {
            object
                .lines
                .iter()
                .enumerate()
                .map(|(n, line)| (object.key.clone(), n as u64, line.clone()))
        })
        .collect()
}

fn leaves_of(lines: &[(String, u64, String)]) -> Vec<Hash> {
    lines
        .iter()
        .map(|(_, _, l)| leaf_hash(l.as_bytes()))
        .collect()
}

fn digests(bucket: &MemoryBucket) -> Vec<Digest> {
    bucket
        .keys("digest/")
        .into_iter()
        .map(|key| Digest::parse(&bucket.current(&key).unwrap().body).unwrap())
        .collect()
}

fn tree(digest: &Digest) -> &TreeHead {
    digest.tree.as_ref().expect("a digest with the log's tree")
}

fn hex(hash: &Hash) -> String {
    HexHash(hash).to_string()
}

/// The checkpoint at `size` is a signed note of the log's body for `root`, signed by the key.
fn assert_checkpoint(bucket: &MemoryBucket, signer: &MemorySigner, size: u64, root: &Hash) {
    let stored = bucket
        .current(&checkpoint_key(size))
        .unwrap_or_else(|| panic!("the checkpoint of {size}"));
    let note = SignedNote::parse(std::str::from_utf8(&stored.body).unwrap()).unwrap();
    let body = Checkpoint {
        origin: origin(BUCKET),
        size,
        root: *root,
    }
    .body();
    assert_eq!(note.body, body);
    assert_eq!(
        body,
        format!("audit-receiver/{BUCKET}\n{size}\n{}\n", base64_of(root))
    );
    assert_eq!(note.signatures.len(), 1);
    let signature = &note.signatures[0];
    assert_eq!(signature.name, origin(BUCKET));
    let der = signer.public_key().der;
    assert_eq!(signature.key_id, ecdsa_key_id(&der));
    let key = ParsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &der).unwrap();
    key.verify_sig(body.as_bytes(), &signature.signature)
        .expect("the log's signature over the body");
}

/// Standard base64 with padding (RFC 4648), written out here.
fn base64_of(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// An inclusion proof made from the stored tiles alone holds for `index`.
fn assert_provable(bucket: &MemoryBucket, leaves: &[Hash], index: u64, size: u64) {
    let needed = inclusion_tiles(index, size).unwrap();
    let mut tiles = Tiles {
        size,
        tiles: HashMap::new(),
    };
    for tile in needed {
        let stored = bucket
            .current(&tile.key())
            .unwrap_or_else(|| panic!("tile {}", tile.key()));
        tiles.tiles.insert(tile, stored.body.to_vec());
    }
    let path = inclusion_proof(index, size, &mut tiles).unwrap();
    let root = mth(&leaves[..size as usize]);
    verify_inclusion(index, size, &leaves[index as usize], &path, &root)
        .unwrap_or_else(|e| panic!("leaf {index} of {size}: {e}"));
}

/// Each digest's tree is the tree of every line up to its period, with its checkpoint.
fn assert_trees(bucket: &MemoryBucket, signer: &MemorySigner, leaves: &[Hash], sizes: &[u64]) {
    let all = digests(bucket);
    assert_eq!(all.len(), sizes.len());
    for (digest, size) in all.iter().zip(sizes) {
        let root = mth(&leaves[..*size as usize]);
        assert_eq!(
            *tree(digest),
            TreeHead {
                size: *size,
                root: hex(&root),
                checkpoint: format!("log/checkpoints/{size:020}"),
            },
            "the tree after {}",
            digest.period_start
        );
        assert_checkpoint(bucket, signer, *size, &root);
    }
}

fn tile_bytes(hashes: &[Hash]) -> Vec<u8> {
    hashes.iter().flatten().copied().collect()
}

fn tile(bucket: &MemoryBucket, key: &str) -> Vec<u8> {
    bucket
        .current(key)
        .unwrap_or_else(|| panic!("{key}"))
        .body
        .to_vec()
}

fn index_rows(bucket: &MemoryBucket, period: Period) -> Vec<IndexRow> {
    let stored = bucket
        .current(&index_key(period))
        .expect("the period's index");
    let mut text = String::new();
    flate2::read::GzDecoder::new(stored.body.as_ref())
        .read_to_string(&mut text)
        .unwrap();
    text.split_inclusive('\n')
        .map(|line| IndexRow::parse(line).expect("an index row"))
        .collect()
}

#[tokio::test]
async fn every_digest_carries_the_tree_of_every_line_so_far_stored_as_tiles_and_a_signed_checkpoint()
 {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let periods = plant_three(&bucket);
    let lines = lines_of(&periods);
    let leaves = leaves_of(&lines);
    assert_eq!(leaves.len(), 600);

    let report = seal(&bucket, &signer, "2026-11-22T10:20:00Z").await;
    assert_eq!(report.failure, None);
    // 10:15 to 10:18; the last has no leaves.
    let counted: Vec<u64> = report.sealed.iter().map(|s| s.leaves).collect();
    assert_eq!(counted, [100, 200, 300, 0]);
    assert_eq!(report.tree_size, Some(600));
    assert!(
        report.sealed[..3]
            .iter()
            .all(|s| s.log_puts > 0 && s.log_bytes > 0)
    );
    // An empty period's checkpoint is the one before it: nothing new to write.
    assert_eq!(report.sealed[3].log_puts, 0);
    assert_trees(&bucket, &signer, &leaves, &[100, 300, 600, 600]);

    // Tiles at the C2SP keys: full level-0 tiles of 256 leaf hashes, the partial tiles of every
    // checkpoint's size, and a level-1 tile of the full level-0 tiles' roots.
    assert_eq!(tile(&bucket, "log/tile/0/000"), tile_bytes(&leaves[..256]));
    assert_eq!(
        tile(&bucket, "log/tile/0/001"),
        tile_bytes(&leaves[256..512])
    );
    assert_eq!(
        tile(&bucket, "log/tile/0/000.p/100"),
        tile_bytes(&leaves[..100])
    );
    assert_eq!(
        tile(&bucket, "log/tile/0/001.p/44"),
        tile_bytes(&leaves[256..300])
    );
    assert_eq!(
        tile(&bucket, "log/tile/0/002.p/88"),
        tile_bytes(&leaves[512..600])
    );
    assert_eq!(
        tile(&bucket, "log/tile/1/000.p/1"),
        tile_bytes(&[mth(&leaves[..256])])
    );
    assert_eq!(
        tile(&bucket, "log/tile/1/000.p/2"),
        tile_bytes(&[mth(&leaves[..256]), mth(&leaves[256..512])])
    );
    let mut keys = bucket.keys("log/tile/");
    keys.sort();
    assert_eq!(
        keys,
        [
            "log/tile/0/000",
            "log/tile/0/000.p/100",
            "log/tile/0/001",
            "log/tile/0/001.p/44",
            "log/tile/0/002.p/88",
            "log/tile/1/000.p/1",
            "log/tile/1/000.p/2",
        ]
    );
    for key in &keys {
        assert!(TileRef::parse_key(key).is_some(), "{key}");
    }
    assert_eq!(
        bucket.keys("log/checkpoints/"),
        [
            "log/checkpoints/00000000000000000100",
            "log/checkpoints/00000000000000000300",
            "log/checkpoints/00000000000000000600"
        ]
    );

    for (index, size) in [
        (0, 100),
        (99, 100),
        (0, 600),
        (99, 600),
        (255, 600),
        (256, 600),
        (299, 300),
        (300, 600),
        (599, 600),
    ] {
        assert_provable(&bucket, &leaves, index, size);
    }
}

#[tokio::test]
async fn the_period_index_gives_each_events_leaf() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let periods = plant_three(&bucket);
    let lines = lines_of(&periods);
    let report = seal(&bucket, &signer, "2026-11-22T10:20:00Z").await;
    assert_eq!(report.failure, None);

    let rows = index_rows(&bucket, period("2026-11-22T10:16:00Z"));
    assert_eq!(rows.len(), 200);
    for row in &rows {
        let (object, number, line) = &lines[row.leaf_index as usize];
        assert_eq!((&row.object, row.line_number), (object, *number));
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(value["messageId"], row.message_id.as_str());
        assert_eq!(value["auditTime"], row.audit_time.as_str());
    }
    let row = rows.iter().find(|r| r.message_id == "m-260").unwrap();
    assert_eq!(row.leaf_index, 259);
    assert_eq!(row.line_number, 9, "the second object's tenth line");
    assert!(lines[259].2.contains(r#""messageId":"m-260""#));
    // Periods without trail lines have no index.
    assert!(bucket.keys("log/index/").len() == 3);
    assert_eq!(
        index_rows(&bucket, period("2026-11-22T10:17:00Z"))[0].leaf_index,
        300
    );
}

#[tokio::test]
async fn a_later_run_goes_on_with_the_same_tree_from_the_stored_tiles() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let periods = plant_three(&bucket);
    let leaves = leaves_of(&lines_of(&periods));

    // At 10:18:00 only 10:15 and 10:16 are due.
    let first = seal(&bucket, &signer, "2026-11-22T10:18:00Z").await;
    assert_eq!(first.failure, None);
    assert_eq!(first.sealed.len(), 2);
    assert_eq!(first.tree_size, Some(300));
    let second = seal(&bucket, &signer, "2026-11-22T10:19:30Z").await;
    assert_eq!(second.failure, None);
    assert_eq!(second.sealed.len(), 2);
    assert_eq!(second.tree_size, Some(600));
    assert_trees(&bucket, &signer, &leaves, &[100, 300, 600, 600]);
    assert_provable(&bucket, &leaves, 42, 600);
    assert_provable(&bucket, &leaves, 555, 600);
}

#[tokio::test]
async fn a_run_that_stopped_before_its_checkpoint_is_completed_by_the_next() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let periods = plant_three(&bucket);
    let leaves = leaves_of(&lines_of(&periods));

    // The first checkpoint's PUT fails: the digest of 10:15 stands, its checkpoint does not.
    time_out_next_put(&bucket, "log/checkpoints/");
    let stopped = seal(&bucket, &signer, "2026-11-22T10:18:00Z").await;
    assert!(stopped.failure.is_some());
    assert_eq!(stopped.sealed.len(), 1);
    assert_eq!(bucket.keys("log/checkpoints/"), Vec::<String>::new());

    let next = seal(&bucket, &signer, "2026-11-22T10:18:00Z").await;
    assert_eq!(next.failure, None);
    assert_eq!(next.sealed.len(), 1, "10:16");
    assert_trees(&bucket, &signer, &leaves, &[100, 300]);
    assert_eq!(
        tile(&bucket, "log/tile/0/000.p/100"),
        tile_bytes(&leaves[..100])
    );
    assert_eq!(
        index_rows(&bucket, period("2026-11-22T10:15:00Z")).len(),
        100
    );

    // The head's checkpoint, the partial tiles of its size and its index vanish (as if its run
    // had stopped right after the digest): the next run writes them again from its listed
    // objects, on the edge of the tree before it, and goes on.
    let gone = [
        checkpoint_key(300),
        "log/tile/0/001.p/44".to_owned(),
        "log/tile/1/000.p/1".to_owned(),
        index_key(period("2026-11-22T10:16:00Z")),
    ];
    let before: Vec<Vec<u8>> = gone[1..].iter().map(|k| tile(&bucket, k)).collect();
    for key in &gone {
        let version = bucket.current(key).unwrap().version_id;
        bucket.remove_version(key, &version);
    }
    let repaired = seal(&bucket, &signer, "2026-11-22T10:20:00Z").await;
    assert_eq!(repaired.failure, None);
    let after: Vec<Vec<u8>> = gone[1..].iter().map(|k| tile(&bucket, k)).collect();
    assert_eq!(after, before);
    assert_trees(&bucket, &signer, &leaves, &[100, 300, 600, 600]);
    assert_provable(&bucket, &leaves, 270, 300);
    assert_provable(&bucket, &leaves, 270, 600);
}

#[tokio::test]
async fn a_tile_planted_at_its_name_is_passed_over_for_its_first_alternate() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let periods = plant_three(&bucket);
    let leaves = leaves_of(&lines_of(&periods));
    // Planted ahead of the sealer: the partial tile of the first tree (100 leaves), and the
    // edge tile of the second (300) with its first alternate.
    let junk = bytes::Bytes::from(vec![7u8; 3200]);
    for key in [
        "log/tile/0/000.p/100",
        "log/tile/0/001.p/44",
        "log/tile/0/001.p/44.1",
    ] {
        bucket.overwrite(key, junk.clone());
    }
    // At 10:17:00 only 10:15 is due.
    let first = seal(&bucket, &signer, "2026-11-22T10:17:00Z").await;
    assert_eq!(first.failure, None, "not stopped by a planted object");
    assert_eq!(first.tree_size, Some(100));
    assert_eq!(tile(&bucket, "log/tile/0/000.p/100"), junk, "left as it is");
    assert_eq!(
        tile(&bucket, "log/tile/0/000.p/100.1"),
        tile_bytes(&leaves[..100])
    );
    // Each next run reads the tree's edge back from the alternates, and goes on.
    let second = seal(&bucket, &signer, "2026-11-22T10:18:00Z").await;
    assert_eq!(second.failure, None);
    assert_eq!(second.tree_size, Some(300));
    assert_eq!(
        tile(&bucket, "log/tile/0/001.p/44.2"),
        tile_bytes(&leaves[256..300])
    );
    let third = seal(&bucket, &signer, "2026-11-22T10:19:30Z").await;
    assert_eq!(third.failure, None);
    assert_eq!(third.tree_size, Some(600));
    assert_trees(&bucket, &signer, &leaves, &[100, 300, 600, 600]);
}

#[tokio::test]
async fn a_checkpoint_name_holding_the_body_under_a_signature_that_does_not_hold_is_passed_over() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let periods = plant_three(&bucket);
    let leaves = leaves_of(&lines_of(&periods));
    // Planted ahead of the sealer: the first checkpoint's very body, signed by another key under
    // the log's name and key id.
    let body = Checkpoint {
        origin: origin(BUCKET),
        size: 100,
        root: mth(&leaves[..100]),
    }
    .body();
    let stranger = MemorySigner::new("arn:aws:kms:us-east-1:123456789012:key/stranger");
    let forged = SignedNote {
        body: body.clone(),
        signatures: vec![audit_model::note::NoteSignature {
            name: origin(BUCKET),
            key_id: ecdsa_key_id(&signer.public_key().der),
            signature: stranger.sign(body.as_bytes()).unwrap(),
        }],
    };
    let planted = bytes::Bytes::from(forged.text().into_bytes());
    bucket.overwrite(&checkpoint_key(100), planted.clone());
    let report = seal(&bucket, &signer, "2026-11-22T10:20:00Z").await;
    assert_eq!(
        report.failure, None,
        "not stopped, not counted as the log's"
    );
    assert_eq!(
        tile(&bucket, &checkpoint_key(100)),
        planted,
        "left as it is"
    );
    let alternate = tile(&bucket, &format!("{}.1", checkpoint_key(100)));
    let note = SignedNote::parse(std::str::from_utf8(&alternate).unwrap()).unwrap();
    assert_eq!(note.body, body);
    let der = signer.public_key().der;
    ParsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &der)
        .unwrap()
        .verify_sig(body.as_bytes(), &note.signatures[0].signature)
        .expect("the log's signature");
    assert_checkpoint(&bucket, &signer, 300, &mth(&leaves[..300]));
    assert_checkpoint(&bucket, &signer, 600, &mth(&leaves[..600]));
}

#[tokio::test]
async fn a_name_and_all_its_alternates_planted_stop_the_run_with_its_key() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    plant_three(&bucket);
    for name in audit_model::tlog::log_names("log/tile/0/000.p/100") {
        bucket.overwrite(&name, bytes::Bytes::from(vec![7u8; 3200]));
    }
    let report = seal(&bucket, &signer, "2026-11-22T10:20:00Z").await;
    assert_eq!(
        report.failure,
        Some(SealError::LogConflict {
            key: "log/tile/0/000.p/100".into()
        })
    );
    assert_eq!(report.sealed.len(), 1, "the digest is written first");
    assert_eq!(bucket.keys("log/checkpoints/"), Vec::<String>::new());
}

#[tokio::test]
async fn an_empty_chain_start_names_the_empty_trees_checkpoint() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let report = seal(&bucket, &signer, "2026-11-22T10:16:40Z").await;
    assert_eq!(report.failure, None);
    let all = digests(&bucket);
    assert_eq!(
        *tree(&all[0]),
        TreeHead {
            size: 0,
            root: hex(&EMPTY_ROOT),
            checkpoint: checkpoint_key(0),
        }
    );
    assert_checkpoint(&bucket, &signer, 0, &EMPTY_ROOT);
    assert_eq!(report.sealed[0].log_puts, 1);
}

#[tokio::test]
async fn the_seal_summary_gives_the_heads_tree_size() {
    use audit_archiver::Handler;
    use audit_archiver::clock::ManualClock;
    use lambda_runtime::{Context, LambdaEvent};
    use serde_json::json;

    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    plant(
        &bucket,
        at("2026-11-22T10:15:10Z"),
        minute(),
        1,
        7,
        Marking::Attested,
    );
    let clock = ManualClock::new(at("2026-11-22T10:16:40Z"));
    let settings = settings();
    let handler = Handler::new(&bucket, settings)
        .with_clock(&clock)
        .with_digests(BUCKET, &signer);
    let scheduled = scheduled();
    let answer = handler
        .handle_any(LambdaEvent::new(scheduled, Context::default()))
        .await
        .unwrap();
    assert_eq!(answer["failure"], json!(null));
    assert_eq!(answer["treeSize"], 7);
}

#[tokio::test]
async fn a_listed_object_that_cannot_be_read_again_stops_the_logs_repair_with_its_key() {
    let bucket = MemoryBucket::new();
    let signer = MemorySigner::new(KEY_ARN);
    let periods = plant_three(&bucket);
    time_out_next_put(&bucket, "log/checkpoints/");
    let stopped = seal(&bucket, &signer, "2026-11-22T10:18:00Z").await;
    assert_eq!(stopped.sealed.len(), 1);
    // The listed version is removed for good (possible only without Object Lock), and the
    // period's parts with it (as for a digest sealed before parts were kept): its log can only be
    // made again from the objects.
    let object = &periods[0][0];
    bucket.remove_version(&object.key, &object.version_id);
    for key in bucket.keys("state/seal/") {
        for version in bucket.versions(&key) {
            bucket.remove_version(&key, &version.version_id);
        }
    }
    let next = seal(&bucket, &signer, "2026-11-22T10:18:00Z").await;
    match next.failure {
        Some(SealError::ObjectUnreadable {
            ref key,
            ref reason,
        }) => {
            assert_eq!(key, &object.key);
            assert!(reason.contains(&object.version_id), "{reason}");
        }
        ref other => panic!("{other:?}"),
    }
    assert_eq!(next.failure.as_ref().unwrap().code(), "object_unreadable");
    assert_eq!(next.sealed, [], "nothing sealed on an unfinished log");
    assert_eq!(bucket.keys("log/checkpoints/"), Vec::<String>::new());
}
