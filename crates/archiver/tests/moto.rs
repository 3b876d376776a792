//! The archiver against a real local AWS endpoint (moto's server over HTTP): items written by the
//! receiver, the table's stream read as Lambda delivers it, the archive in an S3 bucket with
//! Object Lock, read back and compared with what `auditctl query --format jsonl` prints.

#[path = "support/moto.rs"]
mod moto;
mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use audit_archiver::Handler;
use audit_archiver::batch::{Ports, Settings, archive_batch};

use audit_archiver::budget::Budget;
use audit_archiver::clock::{Clock, ManualClock};
use audit_archiver::event::{StreamEvent, read_records};
use audit_archiver::telemetry::metrics_document;
use audit_archiver::words;
use audit_aws::error::{AwsError, ErrorKind};
use audit_aws::s3::{
    Bucket, Created, NewObject, ObjectInfo, StoredObject, StreamedObject, VersionInfo,
    VersionMarker, VersionPage,
};
use audit_model::archive::{ObjectKey, PeriodLength};
use aws_sdk_dynamodb::types::AttributeValue;
use bytes::Bytes;
use chrono::Utc;
use moto::{BUCKET, Moto, SENDER, TABLE, objects};
use serde_json::{Value, json};
use support::{at, event, failed, gunzip_lines};

fn bodies(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            json!({
                "messageId": format!("m-{i:03}"),
                "auditTime": format!("2026-11-22T10:{:02}:{:02}.000Z", i / 60, i % 60),
                "auditText": format!("alice read invoice {i}"),
                "actor": "alice",
                "action": "invoice.read",
                "resource": format!("invoice/{i}"),
                "outcome": "success",
                "sourceIp": "2001:DB8::1",
                "amount": 12.50,
                "big": 123456789012345678901234567890u128
            })
        })
        .collect()
}

fn settings() -> Settings {
    Settings {
        period: PeriodLength::new(60).expect("a period"),
        deadline_margin: Duration::from_millis(500),
    }
}

/// Feeds `records` to `handler` in batches of `size`; returns every failed sequence number.
async fn feed<B: Bucket, C: Clock>(
    handler: &Handler<B, C>,
    records: &[Value],
    size: usize,
) -> Vec<String> {
    let mut failures = Vec::new();
    for batch in records.chunks(size) {
        let response = handler
            .handle(event(batch.to_vec()))
            .await
            .expect("the archiver answers");
        failures.extend(failed(&response));
    }
    failures
}

/// Every line of every object under `prefix`.
async fn archived_lines(moto: &Moto, prefix: &str) -> Vec<String> {
    objects(&moto.s3(), BUCKET, prefix)
        .await
        .iter()
        .flat_map(|(_, body)| gunzip_lines(body))
        .collect()
}

/// Every item of the table as `auditctl query --format jsonl` prints it, sorted.
async fn auditctl_lines(moto: &Moto) -> Vec<String> {
    let items = moto
        .dynamodb()
        .scan()
        .table_name(TABLE)
        .send()
        .await
        .expect("scan")
        .items
        .unwrap_or_default();
    let mut lines: Vec<String> = items
        .into_iter()
        .map(|item: HashMap<String, AttributeValue>| {
            audit_trail::item::TrailItem::from(item).line()
        })
        .collect();
    lines.sort();
    lines
}

fn sorted(mut lines: Vec<String>) -> Vec<String> {
    lines.sort();
    lines
}

#[tokio::test]
async fn stream_batches_archive_every_item_as_auditctl_prints_it() {
    let moto = Moto::start();
    moto.create_table().await;
    moto.create_bucket(BUCKET).await;
    moto.write_messages(&bodies(25)).await;
    let records = moto.stream_records();
    assert_eq!(records.len(), 25);

    let handler = Handler::new(moto.archive(BUCKET), settings());
    assert_eq!(feed(&handler, &records, 10).await, Vec::<String>::new());

    let lines = archived_lines(&moto, "trail/").await;
    assert_eq!(lines.len(), 25, "one line per item");
    for line in &lines {
        // Every attribute of the item, the attested sender too.
        let line: Value = serde_json::from_str(line).expect("a JSON line");
        assert_eq!(line["senderId"], SENDER, "{line}");
    }
    assert_eq!(sorted(lines), auditctl_lines(&moto).await);
    assert!(archived_lines(&moto, "tamper/").await.is_empty());

    let s3 = moto.s3();
    let trail = objects(&s3, BUCKET, "trail/").await;
    assert_eq!(trail.len(), 3, "one object per batch");
    for (key, _) in &trail {
        let parsed = ObjectKey::parse(key).unwrap_or_else(|| panic!("{key}"));
        assert!(parsed.written_within_its_period(settings().period), "{key}");
        let head = s3
            .head_object()
            .bucket(BUCKET)
            .key(key)
            .send()
            .await
            .expect("head");
        let events = head.metadata().and_then(|m| m.get("events")).cloned();
        assert!(
            matches!(events.as_deref(), Some("10" | "5")),
            "{key}: {events:?}"
        );
        // The bucket's default retention locks every object, with no lock asked per request.
        assert_eq!(
            head.object_lock_mode().map(|m| m.as_str()),
            Some("COMPLIANCE"),
            "{key}"
        );
    }
}

#[tokio::test]
async fn an_update_and_a_delete_by_another_client_are_archived_as_tamper_events() {
    let moto = Moto::start();
    moto.create_table().await;
    moto.create_bucket(BUCKET).await;
    moto.write_messages(&bodies(3)).await;
    let dynamodb = moto.dynamodb();
    let key = |id: &str, time: &str| {
        HashMap::from([
            ("messageId".to_owned(), AttributeValue::S(id.into())),
            ("auditTime".to_owned(), AttributeValue::S(time.into())),
        ])
    };
    dynamodb
        .update_item()
        .table_name(TABLE)
        .set_key(Some(key("m-001", "2026-11-22T10:00:01.000Z")))
        .update_expression("SET auditText = :t")
        .expression_attribute_values(":t", AttributeValue::S("nothing happened".into()))
        .send()
        .await
        .expect("update");
    dynamodb
        .delete_item()
        .table_name(TABLE)
        .set_key(Some(key("m-002", "2026-11-22T10:00:02.000Z")))
        .send()
        .await
        .expect("delete");
    let records = moto.stream_records();
    assert_eq!(records.len(), 5);

    let bucket = moto.archive(BUCKET);
    let event = StreamEvent { records };
    let clock = audit_archiver::clock::SystemClock;
    let report = archive_batch(
        Ports {
            bucket: &bucket,
            clock: &clock,
        },
        &settings(),
        &read_records(event),
        Budget::unlimited(),
    )
    .await;
    assert_eq!(report.failed_from, None, "{:?}", report.failure);
    let metrics = metrics_document(&report, Duration::ZERO, Utc::now(), None);
    assert_eq!(metrics["TrailModified"], 2);
    assert_eq!(metrics["Archived"], 5);

    assert_eq!(archived_lines(&moto, "trail/").await.len(), 3);
    let tamper: Vec<Value> = archived_lines(&moto, "tamper/")
        .await
        .iter()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(tamper.len(), 2);
    assert_eq!(tamper[0]["eventName"], "MODIFY");
    assert_eq!(tamper[0]["keys"]["messageId"], "m-001");
    assert_eq!(tamper[0]["oldImage"]["auditText"], "alice read invoice 1");
    assert_eq!(tamper[0]["newImage"]["auditText"], "nothing happened");
    assert_eq!(tamper[1]["eventName"], "REMOVE");
    assert_eq!(tamper[1]["oldImage"]["messageId"], "m-002");
    assert_eq!(tamper[1]["newImage"], Value::Null);
}

#[tokio::test]
async fn a_missing_bucket_fails_the_batch_items_and_marks_nothing_done() {
    let moto = Moto::start();
    moto.create_table().await;
    moto.write_messages(&bodies(5)).await;
    let records = moto.stream_records();
    let handler = Handler::new(moto.archive(BUCKET), settings());

    let failures = feed(&handler, &records, 10).await;
    let all: Vec<String> = records
        .iter()
        .map(|r| {
            r["dynamodb"]["SequenceNumber"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(failures, all, "every record, in order");

    moto.create_bucket(BUCKET).await;
    assert!(
        objects(&moto.s3(), BUCKET, "").await.is_empty(),
        "nothing marked"
    );
    assert_eq!(feed(&handler, &records, 10).await, Vec::<String>::new());
    assert_eq!(
        sorted(archived_lines(&moto, "trail/").await),
        auditctl_lines(&moto).await
    );
}

/// The archiver's process dying after `puts` PUT requests: every request after that fails.
struct Dying<B> {
    inner: B,
    puts_left: AtomicUsize,
}

impl<B: Bucket> Dying<B> {
    fn dead(&self) -> AwsError {
        AwsError::without_answer(ErrorKind::Unavailable, "the process died")
    }

    fn alive(&self) -> Result<(), AwsError> {
        match self.puts_left.load(Ordering::SeqCst) {
            0 => Err(self.dead()),
            _ => Ok(()),
        }
    }
}

impl<B: Bucket> Bucket for Dying<B> {
    async fn put_if_absent(&self, object: NewObject) -> Result<Created, AwsError> {
        let left = self.puts_left.load(Ordering::SeqCst);
        if left == 0 {
            return Err(self.dead());
        }
        self.puts_left.store(left - 1, Ordering::SeqCst);
        self.inner.put_if_absent(object).await
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectInfo>, AwsError> {
        self.alive()?;
        self.inner.head(key).await
    }

    async fn get(&self, key: &str) -> Result<Option<StoredObject>, AwsError> {
        self.alive()?;
        self.inner.get(key).await
    }

    async fn get_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<StoredObject>, AwsError> {
        self.alive()?;
        self.inner.get_version(key, version_id).await
    }

    async fn stream_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<StreamedObject>, AwsError> {
        self.alive()?;
        self.inner.stream_version(key, version_id).await
    }

    async fn head_version(
        &self,
        key: &str,
        version_id: &str,
    ) -> Result<Option<VersionInfo>, AwsError> {
        self.alive()?;
        self.inner.head_version(key, version_id).await
    }

    async fn list_keys(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        max: usize,
    ) -> Result<Vec<String>, AwsError> {
        self.alive()?;
        self.inner.list_keys(prefix, start_after, max).await
    }

    async fn list_versions_page(
        &self,
        prefix: &str,
        from: Option<VersionMarker>,
    ) -> Result<VersionPage, AwsError> {
        self.alive()?;
        self.inner.list_versions_page(prefix, from).await
    }
}

#[tokio::test]
async fn a_restart_of_the_archiver_mid_stream_loses_and_doubles_nothing() {
    let moto = Moto::start();
    moto.create_table().await;
    moto.create_bucket(BUCKET).await;
    moto.write_messages(&bodies(40)).await;
    let mut records = moto.stream_records();
    // Someone changes an item; its MODIFY is in the third batch of 8, with INSERTs around it.
    let mut modify = records[20].clone();
    modify["eventName"] = json!("MODIFY");
    modify["eventID"] = json!("0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f");
    modify["dynamodb"]["OldImage"] = modify["dynamodb"]["NewImage"].clone();
    modify["dynamodb"]["NewImage"]["auditText"] = json!({"S": "nothing happened"});
    let inserted = records.len();
    records.insert(20, modify);
    for (i, record) in records.iter_mut().enumerate() {
        // Sequence numbers in stream order after the insertion.
        record["dynamodb"]["SequenceNumber"] =
            json!(format!("{}", 1_100_000_000_017_454_423_000u128 + i as u128));
    }

    // The first process archives two batches (each a marker, a marker at its half, the trail
    // object), then dies in the third between the trail object (written) and the tamper object:
    // Lambda never sees that invocation's answer.
    let clock = ManualClock::new(at("2026-11-22T10:15:00Z"));
    let first = Handler::new(
        Dying {
            inner: moto.archive(BUCKET),
            puts_left: AtomicUsize::new(9),
        },
        settings(),
    )
    .with_clock(&clock);
    assert!(feed(&first, &records[..16], 8).await.is_empty());
    let _lost = first.handle(event(records[16..24].to_vec())).await;
    drop(first);
    assert_eq!(objects(&moto.s3(), BUCKET, "trail/").await.len(), 3);
    assert!(
        objects(&moto.s3(), BUCKET, "tamper/").await.is_empty(),
        "died before it"
    );

    // A new process, an hour later: Lambda bisects the failed batch, then goes on.
    clock.advance(Duration::from_secs(3600));
    let second = Handler::new(moto.archive(BUCKET), settings()).with_clock(&clock);
    assert!(feed(&second, &records[16..20], 8).await.is_empty());
    assert!(feed(&second, &records[20..24], 8).await.is_empty());
    assert!(feed(&second, &records[24..], 8).await.is_empty());

    let trail = archived_lines(&moto, "trail/").await;
    assert_eq!(trail.len(), inserted, "every INSERT, once");
    assert_eq!(sorted(trail), auditctl_lines(&moto).await);
    let tamper = archived_lines(&moto, "tamper/").await;
    assert_eq!(tamper.len(), 1, "the MODIFY, once: {tamper:?}");
}

#[tokio::test]
async fn the_s3_adapter_creates_a_key_once_and_tells_a_missing_key_from_a_present_one() {
    let moto = Moto::start();
    moto.create_bucket(BUCKET).await;
    let bucket = moto.archive(BUCKET);
    let object = |body: &'static str| NewObject {
        key: "state/k/a0.json".into(),
        body: Bytes::from_static(body.as_bytes()),
        content_type: "application/json",
        sha256: {
            let mut sha = [0u8; 32];
            sha.copy_from_slice(
                aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, body.as_bytes()).as_ref(),
            );
            sha
        },
        metadata: Vec::new(),
    };
    assert_eq!(bucket.head("state/k/a0.json").await, Ok(None));
    assert_eq!(bucket.get("state/k/a0.json").await, Ok(None));
    assert!(matches!(
        bucket.put_if_absent(object("{}")).await,
        Ok(Created::New {
            version_id: Some(_)
        })
    ));
    // moto 5.2 answers If-None-Match: * on an existing key with 412, as S3 does.
    assert_eq!(
        bucket.put_if_absent(object("{\"other\":1}")).await,
        Ok(Created::AlreadyExists)
    );
    assert_eq!(
        bucket
            .get("state/k/a0.json")
            .await
            .map(|o| o.map(|o| o.body)),
        Ok(Some(Bytes::from_static(b"{}")))
    );
    assert!(bucket.head("state/k/a0.json").await.unwrap().is_some());
    let missing = moto.archive("no-such-bucket");
    assert!(matches!(
        missing.get("x").await,
        Err(error) if words::refused(&error) && error.code == "NoSuchBucket"
    ));
}

/// Every digest under `digest/` with its bytes and its signature metadata, in key order.
async fn stored_digests(moto: &Moto) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let s3 = moto.s3();
    let mut out = Vec::new();
    for (key, body) in objects(&s3, BUCKET, "digest/").await {
        let head = s3
            .head_object()
            .bucket(BUCKET)
            .key(&key)
            .send()
            .await
            .expect("head digest");
        let signature = head
            .metadata
            .as_ref()
            .and_then(|m| m.get("signature"))
            .and_then(|hex| audit_model::digest::unhex(hex))
            .expect("a signature in the metadata");
        out.push((key, body.to_vec(), signature));
    }
    out
}

#[tokio::test]
async fn sealing_signs_with_kms_and_lists_the_original_versions_of_a_periods_objects() {
    use audit_archiver::seal::Sealer;
    use audit_archiver::signer::kms::KmsSigner;
    use audit_model::digest::{Digest, SealedDigest, chain_break, sha256, signing_string_of};
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};

    let moto = Moto::start();
    moto.create_table().await;
    moto.create_bucket(BUCKET).await;
    let key_arn = moto.create_digest_key().await;
    moto.write_messages(&bodies(30)).await;
    let records = moto.stream_records();
    let clock = ManualClock::new(at("2026-11-22T10:15:05Z"));
    let handler = Handler::new(moto.archive(BUCKET), settings()).with_clock(&clock);
    assert_eq!(
        feed(&handler, &records[..20], 10).await,
        Vec::<String>::new()
    );
    clock.set(at("2026-11-22T10:17:20Z"));
    assert_eq!(
        feed(&handler, &records[20..], 10).await,
        Vec::<String>::new()
    );

    // Before sealing, someone overwrites one object (a newer version) and hides another (a delete
    // marker): the digest still lists the versions the archiver wrote.
    let s3 = moto.s3();
    let trail: Vec<String> = objects(&s3, BUCKET, "trail/")
        .await
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(trail.len(), 3);
    let first_versions: Vec<String> = {
        let mut v = Vec::new();
        for key in &trail {
            let head = s3
                .head_object()
                .bucket(BUCKET)
                .key(key)
                .send()
                .await
                .unwrap();
            v.push(head.version_id.unwrap());
        }
        v
    };
    s3.put_object()
        .bucket(BUCKET)
        .key(&trail[0])
        .body(aws_sdk_s3::primitives::ByteStream::from_static(b"forged"))
        .checksum_algorithm(aws_sdk_s3::types::ChecksumAlgorithm::Sha256)
        .send()
        .await
        .expect("a newer version");
    s3.delete_object()
        .bucket(BUCKET)
        .key(&trail[1])
        .send()
        .await
        .expect("a delete marker");

    let signer = KmsSigner::new(moto.kms(), &key_arn);
    let bucket = moto.archive(BUCKET);
    let report = Sealer {
        bucket: &bucket,
        signer: &signer,
        bucket_name: BUCKET,
        period: settings().period,
    }
    .run(at("2026-11-22T10:19:00Z"), Budget::unlimited())
    .await;
    assert_eq!(report.failure, None);
    assert_eq!(report.sealed.len(), 3, "10:15, 10:16 (empty), 10:17");

    // The public key from KMS checks every signature; the chain links; the listed versions are
    // the archiver's, with their hashes and event counts.
    let public_key = moto
        .kms()
        .get_public_key()
        .key_id(&key_arn)
        .send()
        .await
        .expect("public key")
        .public_key
        .expect("a public key")
        .into_inner();
    let digests = stored_digests(&moto).await;
    assert_eq!(digests.len(), 3);
    let mut before: Option<SealedDigest> = None;
    let mut listed = Vec::new();
    for (key, body, signature) in &digests {
        let digest = Digest::parse(body).expect("a digest");
        let sealed = SealedDigest {
            key: key.clone(),
            sha256: sha256(body),
            signature: signature.clone(),
        };
        let string = signing_string_of(&digest, key, &sealed.sha256);
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &public_key)
            .verify(string.as_bytes(), signature)
            .expect("KMS's signature verifies with the key's public key (SPKI DER)");
        assert_eq!(chain_break(&digest, key, before.as_ref()), None);
        assert_eq!(digest.key_id, key_arn);
        listed.extend(digest.objects.clone());
        before = Some(sealed);
    }
    let listed_keys: Vec<&str> = listed.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(
        listed_keys,
        trail.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let listed_versions: Vec<&str> = listed.iter().map(|o| o.version_id.as_str()).collect();
    assert_eq!(
        listed_versions,
        first_versions
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
    assert_eq!(listed.iter().map(|o| o.events).sum::<u64>(), 30);
    for object in &listed {
        let body = s3
            .get_object()
            .bucket(BUCKET)
            .key(&object.key)
            .version_id(&object.version_id)
            .send()
            .await
            .unwrap()
            .body
            .collect()
            .await
            .unwrap()
            .into_bytes();
        assert_eq!(object.sha256, audit_model::digest::hex(&sha256(&body)));
        assert_eq!(object.events as usize, gunzip_lines(&body).len());
    }
}
