//! `auditctl verify` over an archive the archiver's own sealer sealed with the transparency log
//! (digests with `tree`, tiles, checkpoints signed with KMS), on moto: objects written and attested
//! as the archiver writes them, the sealer run once, then verify passes, and a hash changed in a
//! level-0 tile is found (exit 1).

use audit_archiver::bucket::{ArchiveBucket, NewObject};
use audit_archiver::marker::{Confirmed, Marker, RunEntry, marker_key};
use audit_aws::s3::S3Bucket;
use audit_model::archive::{MARKER_METADATA, SEAL_DELAY};
use audit_model::tlog::TileRef;

use super::*;

/// Lines `first..first + count` written at `at` as the archiver writes them: the run marker that
/// attests the object (with its SHA-256), then the object naming it.
async fn put_attested(bucket: &S3Bucket, at: DateTime<Utc>, first: u64, count: u64) {
    let sequence = |n: u64| (100_000 + n).to_string();
    let key = ObjectKey::new(ObjectKind::Trail, at, length(), &sequence(first), 0)
        .unwrap()
        .to_string();
    let lines: Vec<String> = (first..first + count)
        .map(|n| {
            serde_json::json!({
                "messageId": format!("s-{n:04}"),
                "auditTime": at.to_rfc3339(),
                "action": "invoice.pay",
            })
            .to_string()
        })
        .collect();
    let body = gzip(&lines);
    let run: Vec<RunEntry> = (first..first + count)
        .map(|n| RunEntry(sequence(n), format!("{n:032x}")))
        .collect();
    let marker_key = marker_key(&run[0], 0).unwrap();
    let marker = Marker::new(
        run.clone(),
        &[Confirmed {
            key: key.clone(),
            event_ids: run.iter().map(|e| e.1.clone()).collect(),
            sha256: hex(&sha256(&body)),
        }],
        0,
    );
    let marker_body = marker.to_json();
    bucket
        .put_if_absent(NewObject {
            key: marker_key.clone(),
            sha256: sha256(&marker_body),
            body: bytes::Bytes::from(marker_body),
            content_type: "application/json",
            metadata: Vec::new(),
        })
        .await
        .unwrap();
    bucket
        .put_if_absent(NewObject {
            key,
            sha256: sha256(&body),
            body: bytes::Bytes::from(body),
            content_type: "application/gzip",
            metadata: vec![("events", count.to_string()), (MARKER_METADATA, marker_key)],
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn verify_passes_on_a_log_the_sealer_wrote_and_finds_a_hash_changed_in_its_tiles() {
    let stack = Stack::new().await;
    let bucket = S3Bucket::new(stack.s3.clone(), BUCKET);
    // 130 lines in each of 3 periods (past a full level-0 tile), none in the others.
    for (i, n) in [0i64, 4, 9].into_iter().enumerate() {
        let at = DateTime::from_timestamp(stack.period(n).start + 2, 0).unwrap();
        put_attested(&bucket, at, i as u64 * 130, 130).await;
    }
    let now = DateTime::from_timestamp(
        stack.period(PERIODS - 1).end() + SEAL_DELAY.as_secs() as i64 + 1,
        0,
    )
    .unwrap();
    let report = seal_with_kms(&bucket, &stack.kms, &stack.key, length(), now).await;
    assert_eq!(report.failure, None, "{report:?}");

    let out = ok(stack.verify(&["--no-audit-event"]));
    assert_eq!(problems(&out), [], "{out}");
    let log = summary_line(&out, "log ");
    assert!(
        log.contains("tree sizes 0 to 390: 390 leaves") && log.contains("3 checkpoint(s)"),
        "{out}"
    );

    // One hash of the first level-0 tile changed (a new version, as a writer of the bucket
    // would make).
    let tile = TileRef {
        level: 0,
        index: 0,
        width: 256,
    }
    .key();
    let got = stack
        .s3
        .get_object()
        .bucket(BUCKET)
        .key(&tile)
        .send()
        .await
        .unwrap();
    let mut bytes = got.body.collect().await.unwrap().to_vec();
    bytes[200 * 32] ^= 1;
    stack.put_log(&tile, bytes).await;
    let output = stack.verify(&["--no-audit-event"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}\n{}", stderr(&output));
    assert!(
        problems(&out).contains(&("leaf missing".to_owned(), tile.clone())),
        "{out}"
    );
    assert!(out.contains("holds another hash at leaf 200"), "{out}");
}
