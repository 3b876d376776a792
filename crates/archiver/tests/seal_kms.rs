//! Sealing against moto's S3 and KMS: the `marker` metadata read back from a HEAD of the version,
//! the digest key's public key fetched with GetPublicKey to check the digest chained on.

#[path = "support/moto.rs"]
mod moto;
mod planted;
mod support;

use audit_archiver::budget::Budget;
use audit_archiver::marker::{Confirmed, Marker, RunEntry, marker_key};
use audit_archiver::seal::Sealer;
use audit_archiver::signer::kms::KmsSigner;
use audit_aws::s3::{Bucket, NewObject};
use audit_model::archive::{MARKER_METADATA, ObjectKey, ObjectKind};
use audit_model::digest::{Digest, digest_key, hex, sha256};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use moto::{BUCKET, Moto};
use support::seal::minute;
use support::{at, event_id, sequence_number};

/// Records `first..first + count` written at `at` as the archiver writes them (marked or not).
async fn put(
    bucket: &impl Bucket,
    at: DateTime<Utc>,
    first: u64,
    count: u64,
    marked: bool,
) -> String {
    let key = ObjectKey::new(ObjectKind::Trail, at, minute(), &sequence_number(first), 0)
        .unwrap()
        .to_string();
    let (_, body) = planted::trail_body(first, count);
    let run: Vec<RunEntry> = (first..first + count)
        .map(|s| RunEntry(sequence_number(s), event_id(s)))
        .collect();
    let marker_key = marker_key(&run[0], 0).unwrap();
    let marker = Marker::new(
        run.clone(),
        &[Confirmed {
            key: key.clone(),
            event_ids: run.iter().map(|e| e.event_id().to_owned()).collect(),
            sha256: hex(&sha256(&body)),
        }],
        0,
    );
    let marker_body = marker.to_json();
    bucket
        .put_if_absent(NewObject {
            key: marker_key.clone(),
            sha256: sha256(&marker_body),
            body: Bytes::from(marker_body),
            content_type: "application/json",
            metadata: Vec::new(),
        })
        .await
        .unwrap();
    let mut metadata = vec![("events", count.to_string())];
    if marked {
        metadata.push((MARKER_METADATA, marker_key));
    }
    bucket
        .put_if_absent(NewObject {
            key: key.clone(),
            sha256: sha256(&body),
            body,
            content_type: "application/gzip",
            metadata,
        })
        .await
        .unwrap();
    key
}

#[tokio::test]
async fn sealing_reads_each_objects_marker_and_chains_on_a_digest_the_kms_key_verifies() {
    let moto = Moto::start();
    moto.create_bucket(BUCKET).await;
    let key_arn = moto.create_digest_key().await;
    let bucket = moto.archive(BUCKET);
    let ours = put(&bucket, at("2026-11-22T10:15:10Z"), 1, 3, true).await;
    let unmarked = put(&bucket, at("2026-11-22T10:15:20Z"), 10, 2, false).await;
    let signer = KmsSigner::new(moto.kms(), &key_arn);
    let sealer = Sealer {
        bucket: &bucket,
        signer: &signer,
        bucket_name: BUCKET,
        period: minute(),
    };

    let first = sealer
        .run(at("2026-11-22T10:16:40Z"), Budget::unlimited())
        .await;
    assert_eq!(first.failure, None);
    let key = digest_key(minute().period_of(at("2026-11-22T10:15:00Z")));
    assert_eq!(first.sealed.len(), 1);
    assert_eq!(first.sealed[0].key, key);
    let body = bucket.get(&key).await.unwrap().unwrap().body;
    let digest = Digest::parse(&body).unwrap();
    assert_eq!(digest.objects.len(), 1);
    assert_eq!(digest.objects[0].key, ours);
    assert!(digest.objects[0].marker.starts_with("state/"));
    assert_eq!(digest.unattested.len(), 1);
    assert_eq!(digest.unattested[0].key, unmarked);
    assert_eq!(digest.unattested[0].reason, "no marker names it");

    // The next run checks 10:15's signature with KMS's public key and chains on it.
    let next = sealer
        .run(at("2026-11-22T10:17:40Z"), Budget::unlimited())
        .await;
    assert_eq!(next.failure, None);
    assert_eq!(next.sealed.len(), 1);
    assert_eq!(
        next.sealed[0].key,
        digest_key(minute().period_of(at("2026-11-22T10:16:00Z"))),
        "its own name: 10:15's digest was found valid"
    );
    let body = bucket.get(&next.sealed[0].key).await.unwrap().unwrap().body;
    assert_eq!(Digest::parse(&body).unwrap().previous.unwrap().key, key);
}

#[tokio::test]
async fn the_checkpoint_is_signed_by_the_kms_key_over_its_body() {
    use audit_archiver::signer::DigestSigner;
    use audit_model::note::{Checkpoint, SignedNote, checkpoint_key, ecdsa_key_id, origin};
    use audit_model::tlog::{TreeEdge, leaf_hash};
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1, ParsedPublicKey};

    let moto = Moto::start();
    moto.create_bucket(BUCKET).await;
    let key_arn = moto.create_digest_key().await;
    let bucket = moto.archive(BUCKET);
    put(&bucket, at("2026-11-22T10:15:10Z"), 1, 3, true).await;
    let signer = KmsSigner::new(moto.kms(), &key_arn);
    let report = Sealer {
        bucket: &bucket,
        signer: &signer,
        bucket_name: BUCKET,
        period: minute(),
    }
    .run(at("2026-11-22T10:16:40Z"), Budget::unlimited())
    .await;
    assert_eq!(report.failure, None);
    assert_eq!(report.sealed[0].leaves, 3);

    let mut edge = TreeEdge::default();
    let (lines, _) = planted::trail_body(1, 3);
    for line in &lines {
        edge.push(leaf_hash(line.as_bytes()), &mut Vec::new());
    }
    let tile = bucket
        .get("log/tile/0/000.p/3")
        .await
        .unwrap()
        .unwrap()
        .body;
    let leaves: Vec<u8> = lines.iter().flat_map(|l| leaf_hash(l.as_bytes())).collect();
    assert_eq!(tile.as_ref(), leaves.as_slice());

    let text = bucket.get(&checkpoint_key(3)).await.unwrap().unwrap().body;
    let note = SignedNote::parse(std::str::from_utf8(&text).unwrap()).unwrap();
    let body = Checkpoint {
        origin: origin(BUCKET),
        size: 3,
        root: edge.root(),
    }
    .body();
    assert_eq!(note.body, body);
    let der = DigestSigner::public_key(&signer).await.unwrap();
    assert_eq!(note.signatures[0].key_id, ecdsa_key_id(&der));
    ParsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &der)
        .unwrap()
        .verify_sig(body.as_bytes(), &note.signatures[0].signature)
        .expect("KMS's signature over the checkpoint's body");
}
