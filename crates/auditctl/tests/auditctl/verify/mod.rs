//! `auditctl verify` against a real local endpoint (moto's S3 with versioning and Object Lock, its
//! KMS, its DynamoDB): given a trail written by the function, archived in objects keyed as the
//! archiver keys them and sealed in digests signed with KMS (Sign, RAW, ECDSA_SHA_256) as the
//! archiver seals them, when the binary runs, then it passes; after each attack it reports the
//! attack with its kind (docs/auditctl.md "Proving the trail unchanged: verify") and key, and
//! exits 1.
//!
//! The digests are written here by `seal` until the archiver's sealer lands; the attack tests
//! will then seal with it.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::Output;
use std::str::FromStr;

use audit_model::archive::{ObjectKey, ObjectKind, Period, PeriodLength, object_prefixes};
use audit_model::digest::{
    Digest, ListedObject, PreviousDigest, SIGNATURE_METADATA, SealedDigest, TreeHead, digest_key,
    hex, sha256, signing_string_of,
};
use audit_model::note::{WitnessKey, checkpoint_key};
use audit_model::tlog::{HexHash, TreeEdge, leaf_hash};
use audit_testkit::endpoint::create_locked_bucket;
use audit_trail::item::TrailItem;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::ChecksumAlgorithm;
use chrono::{DateTime, Duration, Utc};

use crate::access::assert_access_event;
use crate::dlq::queues;
use crate::harness::*;
use crate::support::*;

/// Sealed by the archiver's own sealer, with the transparency log.
mod sealed;

const BUCKET: &str = "audit-archive-verify";
/// The shortest period: many periods in a few minutes of trail.
const SECONDS: u32 = 10;
/// Periods of the trail.
const PERIODS: i64 = 30;

fn length() -> PeriodLength {
    PeriodLength::new(SECONDS).unwrap()
}

/// The trail, its archive and its digests on moto.
struct Stack {
    moto: Moto,
    s3: aws_sdk_s3::Client,
    kms: aws_sdk_kms::Client,
    /// The digest key's ARN.
    key: String,
    /// The first period's start.
    t0: DateTime<Utc>,
    /// The archive objects, by period start.
    objects: BTreeMap<i64, Vec<String>>,
    /// The items as the table holds them: (messageId, auditTime).
    items: Vec<(String, String)>,
    sequence: u64,
}

impl Stack {
    /// A table, a bucket as the template defines it (versioning, Object Lock in COMPLIANCE
    /// mode), and a digest key (ECC_NIST_P256, SIGN_VERIFY).
    async fn new() -> Self {
        Self::started_ago(1800).await
    }

    /// The same, its first period `seconds` before now.
    async fn started_ago(seconds: i64) -> Self {
        let moto = Moto::start();
        create_table(&moto.client(), TABLE).await;
        let s3 = s3(&moto);
        create_locked_bucket(&s3, BUCKET).await;
        let kms = kms(&moto);
        let key = create_key(&kms).await;
        // Half an hour ago (by default): every period is long due.
        let now = Utc::now().timestamp();
        let t0 = DateTime::from_timestamp(
            (now - seconds).div_euclid(i64::from(SECONDS)) * i64::from(SECONDS),
            0,
        )
        .unwrap();
        Self {
            moto,
            s3,
            kms,
            key,
            t0,
            objects: BTreeMap::new(),
            items: Vec::new(),
            sequence: 1000,
        }
    }

    fn period(&self, n: i64) -> Period {
        length().period_of(self.t0 + Duration::seconds(n * i64::from(SECONDS)))
    }

    /// `n` events written through the function, their auditTime spread over the trail's periods
    /// (one every 13 s: some periods get two, some none), then archived as the archiver would
    /// have, one object per period, keyed in the period.
    async fn write_trail(&mut self, n: usize) {
        let bodies: Vec<(String, String)> = (0..n)
            .map(|i| {
                let at = self.t0 + Duration::seconds(i as i64 * 13 + 1);
                (
                    format!("v-{i:03}"),
                    serde_json::json!({
                        "messageId": format!("v-{i:03}"),
                        "auditTime": at.to_rfc3339(),
                        "action": "invoice.pay",
                        "actor": "alice",
                        "amount": serde_json::Number::from_str(BIG).unwrap(),
                    })
                    .to_string(),
                )
            })
            .collect();
        let handler = handler(&self.moto.endpoint, TABLE, settings());
        for chunk in bodies.chunks(10) {
            let records = chunk
                .iter()
                .map(|(id, body)| record(&format!("sqs-{id}"), body))
                .collect();
            let response = handler.handle(event(records)).await.unwrap();
            assert!(failed(&response).is_empty(), "{response:?}");
        }
        let mut by_period: BTreeMap<i64, Vec<TrailItem>> = BTreeMap::new();
        for item in scan(&self.moto.client(), TABLE).await {
            let item = TrailItem::from(item);
            let at = DateTime::parse_from_rfc3339(&item.audit_time)
                .unwrap()
                .to_utc();
            self.items
                .push((item.message_id.clone(), item.audit_time.clone()));
            by_period
                .entry(length().period_of(at).start)
                .or_default()
                .push(item);
        }
        for (start, items) in by_period {
            let at = DateTime::from_timestamp(start + 2, 0).unwrap();
            let lines: Vec<String> = items.iter().map(TrailItem::line).collect();
            let key = self.put_object(ObjectKind::Trail, at, &lines).await;
            self.objects.entry(start).or_default().push(key);
        }
    }

    /// An archive object written as the archiver writes it (If-None-Match, SHA-256, events).
    async fn put_object(
        &mut self,
        kind: ObjectKind,
        at: DateTime<Utc>,
        lines: &[String],
    ) -> String {
        self.sequence += 10;
        let key = ObjectKey::new(kind, at, length(), &self.sequence.to_string(), 0)
            .unwrap()
            .to_string();
        self.s3
            .put_object()
            .bucket(BUCKET)
            .key(&key)
            .if_none_match("*")
            .checksum_algorithm(ChecksumAlgorithm::Sha256)
            .metadata("events", lines.len().to_string())
            .body(ByteStream::from(gzip(lines)))
            .send()
            .await
            .unwrap();
        key
    }

    /// Seals the trail's periods in order as the archiver does; `skip`: periods left without a
    /// digest (the chain goes on from the last one sealed).
    async fn seal_all(&self, skip: &[i64]) {
        self.seal_from(0, None, skip).await;
    }

    /// Seals the periods from the `first`-th on, its digest linked to `link` (a digest the
    /// bucket may not hold).
    async fn seal_from(&self, first: i64, link: Option<PreviousDigest>, skip: &[i64]) {
        let mut previous: Option<SealedDigest> = None;
        let mut link = link;
        for n in first..PERIODS {
            if skip.contains(&n) {
                continue;
            }
            let period = self.period(n);
            let objects = self.listed(period).await;
            let link = link.take().or_else(|| {
                previous.as_ref().map(|p| PreviousDigest {
                    key: digest_key(Period {
                        start: period.start - i64::from(SECONDS),
                        length: length(),
                    }),
                    ..p.as_previous()
                })
            });
            let digest = Digest::new(
                BUCKET,
                period,
                DateTime::from_timestamp(period.sealable_at(), 0).unwrap(),
                objects,
                link,
                &self.key,
            );
            previous = Some(self.put_digest(period, &digest, &self.key, true).await);
        }
    }

    /// Seals the trail's periods in order with the transparency log, as the sealer does: each
    /// digest carries the tree after its period's lines, then its tiles and its checkpoint,
    /// signed with KMS, are written. The tree's sizes, one per period.
    async fn seal_logged(&self) -> Vec<u64> {
        let public = public_key(&self.kms, &self.key).await;
        let mut edge = TreeEdge::default();
        let mut previous: Option<SealedDigest> = None;
        let mut sizes = Vec::new();
        for n in 0..PERIODS {
            let period = self.period(n);
            let objects = self.listed(period).await;
            let start = edge.size;
            let mut tiles = Vec::new();
            for object in &objects {
                let got = self
                    .s3
                    .get_object()
                    .bucket(BUCKET)
                    .key(&object.key)
                    .version_id(&object.version_id)
                    .send()
                    .await
                    .unwrap();
                let body = got.body.collect().await.unwrap().to_vec();
                let mut text = String::new();
                flate2::read::GzDecoder::new(&body[..])
                    .read_to_string(&mut text)
                    .unwrap();
                for line in text.lines() {
                    edge.push(leaf_hash(line.as_bytes()), &mut tiles);
                }
            }
            if edge.size > start {
                tiles.extend(edge.partial_tiles());
            }
            let link = previous.as_ref().map(|p| PreviousDigest {
                key: digest_key(self.period(n - 1)),
                ..p.as_previous()
            });
            let mut digest = Digest::new(
                BUCKET,
                period,
                DateTime::from_timestamp(period.sealable_at(), 0).unwrap(),
                objects,
                link,
                &self.key,
            );
            digest.tree = Some(TreeHead {
                size: edge.size,
                root: HexHash(&edge.root()).to_string(),
                checkpoint: checkpoint_key(edge.size),
            });
            previous = Some(self.put_digest(period, &digest, &self.key, true).await);
            for (tile, bytes) in tiles {
                self.put_log(&tile.key(), bytes).await;
            }
            self.put_checkpoint(edge.size, edge.root(), &public).await;
            sizes.push(edge.size);
        }
        sizes
    }

    /// An object under `log/`, written (a new version when the key has one).
    async fn put_log(&self, key: &str, bytes: Vec<u8>) {
        self.s3
            .put_object()
            .bucket(BUCKET)
            .key(key)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .unwrap();
    }

    /// The checkpoint of the tree of `size` with `root`, signed with KMS by the digest key
    /// (RAW, ECDSA_SHA_256) as the log (`public`: the key's DER).
    async fn put_checkpoint(&self, size: u64, root: [u8; 32], public: &[u8]) {
        let note = signed_checkpoint(&self.kms, &self.key, public, BUCKET, size, root).await;
        self.put_log(&checkpoint_key(size), note.into_bytes()).await;
    }

    /// What a digest of `period` lists: each current object in its place.
    async fn listed(&self, period: Period) -> Vec<ListedObject> {
        let mut listed = Vec::new();
        for prefix in object_prefixes(period) {
            let page = self
                .s3
                .list_objects_v2()
                .bucket(BUCKET)
                .prefix(&prefix)
                .send()
                .await
                .unwrap();
            for object in page.contents() {
                let key = object.key().unwrap();
                let got = self
                    .s3
                    .get_object()
                    .bucket(BUCKET)
                    .key(key)
                    .send()
                    .await
                    .unwrap();
                let version_id = got.version_id().unwrap().to_owned();
                let events = got.metadata().unwrap()["events"].parse().unwrap();
                let body = got.body.collect().await.unwrap().to_vec();
                listed.push(ListedObject {
                    key: key.to_owned(),
                    version_id,
                    sha256: hex(&sha256(&body)),
                    events,
                    size: body.len() as u64,
                    marker: String::new(),
                });
            }
        }
        listed
    }

    /// Writes `digest` as the digest of `period`, signed by `key` with KMS (RAW, ECDSA_SHA_256);
    /// `once`: as the archiver does, only if there is none (If-None-Match).
    async fn put_digest(
        &self,
        period: Period,
        digest: &Digest,
        key: &str,
        once: bool,
    ) -> SealedDigest {
        let digest_key = digest_key(period);
        let bytes = digest.to_bytes();
        let signing = signing_string_of(digest, &digest_key, &sha256(&bytes));
        let signature = kms_sign(&self.kms, key, signing.as_bytes()).await;
        self.s3
            .put_object()
            .bucket(BUCKET)
            .key(&digest_key)
            .set_if_none_match(once.then(|| "*".to_owned()))
            .checksum_algorithm(ChecksumAlgorithm::Sha256)
            .metadata(SIGNATURE_METADATA, hex(&signature))
            .body(ByteStream::from(bytes.clone()))
            .send()
            .await
            .unwrap();
        SealedDigest {
            key: digest_key,
            sha256: sha256(&bytes),
            signature,
        }
    }

    /// The trail's whole range, as flags.
    fn range(&self) -> [String; 4] {
        let end =
            self.t0 + Duration::seconds(PERIODS * i64::from(SECONDS)) - Duration::milliseconds(1);
        [
            "--from".into(),
            self.t0.to_rfc3339(),
            "--to".into(),
            end.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ]
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("ARCHIVE_BUCKET", BUCKET.to_owned()),
            ("DIGEST_KEY_ID", self.key.clone()),
            ("DIGEST_PERIOD_SECONDS", SECONDS.to_string()),
            ("TABLE_NAME", TABLE.to_owned()),
        ]
    }

    /// `auditctl verify` over the trail's range, with `extra` flags.
    fn verify(&self, extra: &[&str]) -> Output {
        let env = self.env();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let range = self.range();
        let mut args: Vec<&str> = vec!["verify"];
        args.extend(range.iter().map(String::as_str));
        args.extend(extra);
        auditctl(&self.moto.endpoint, &args, &env)
    }
}

/// The (kind, subject) of each problem line of verify's output.
fn problems(output: &str) -> Vec<(String, String)> {
    const KINDS: [&str; 17] = [
        "digest missing",
        "chain broken",
        "signature invalid",
        "object changed",
        "object missing",
        "object not in digest",
        "object not attested",
        "event duplicated",
        "trail not sealed",
        "item changed",
        "item modified",
        "item missing",
        "item not archived",
        "item not attested",
        "checkpoint inconsistent",
        "leaf missing",
        "cosignature missing",
    ];
    output
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, "  ");
            let kind = fields.next()?;
            KINDS.contains(&kind).then(|| {
                (
                    kind.to_owned(),
                    fields.next().unwrap_or_default().to_owned(),
                )
            })
        })
        .collect()
}

#[tokio::test]
async fn verify_passes_on_a_trail_as_sealed_and_records_its_access() {
    let mut stack = Stack::new().await;
    stack.write_trail(20).await;
    stack.seal_all(&[]).await;
    let q = queues(&stack.moto).await;

    let mut env = stack.env();
    env.extend(q.env().map(|(k, v)| (k, v.to_owned())));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let range = stack.range();
    let mut args = vec!["verify", "--table"];
    args.extend(range.iter().map(String::as_str));
    let output = auditctl(&stack.moto.endpoint, &args, &env);
    let out = stdout(&output);
    assert!(output.status.success(), "{out}\n{}", stderr(&output));
    assert_eq!(problems(&out), []);
    assert!(
        out.contains(&format!("periods   {PERIODS} checked: {PERIODS} sealed")),
        "{out}"
    );
    let objects = stack.objects.values().map(Vec::len).sum::<usize>();
    assert!(
        out.contains(&format!(
            "objects   {objects} checked ({objects} trail, 0 tamper)"
        )),
        "{out}"
    );
    assert!(
        out.contains("events    20 checked (20 trail, 0 tamper)"),
        "{out}"
    );
    assert!(
        out.contains(
            "\nitems     20 archived events looked up in the table, 20 found as archived\n"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "\nitems     20 items of the table in the range looked up in the archive, 20 archived;"
        ),
        "{out}"
    );
    assert!(!out.contains("\ntrail "), "{out}");
    assert!(
        out.ends_with("problems  none: the trail is as sealed\n"),
        "{out}"
    );

    // Its access, recorded first: the bucket, the arguments.
    let (_, body) = q.one_access_event().await;
    let arguments = assert_access_event(&body, "auditctl.verify", BUCKET);
    assert_eq!(arguments["table"], true);
    assert_eq!(arguments["bucket"], BUCKET);
    assert_eq!(arguments["keyId"], stack.key.as_str());

    // Without --table, and a part of the range (its first link checked against the digest
    // before it).
    let from = (stack.t0 + Duration::seconds(95)).to_rfc3339();
    let to = (stack.t0 + Duration::seconds(178)).to_rfc3339();
    let env = stack.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = ok(auditctl(
        &stack.moto.endpoint,
        &["verify", "--from", &from, "--to", &to, "--no-audit-event"],
        &env,
    ));
    assert!(out.contains("periods   9 checked: 9 sealed"), "{out}");
}

#[tokio::test]
async fn verify_reports_each_attack_with_its_kind_and_key() {
    let mut stack = Stack::new().await;
    stack.write_trail(22).await;
    // A period whose digest was never written (the chain goes on after it).
    stack.seal_all(&[27]).await;
    let object = |n: i64| stack.objects[&stack.period(n).start][0].clone();

    // The table: an item updated and one deleted behind the function's back, one put there
    // that was never archived.
    let dynamodb = stack.moto.client();
    let (changed_id, changed_time) = stack.items[3].clone();
    dynamodb
        .update_item()
        .table_name(TABLE)
        .key("messageId", AttributeValue::S(changed_id.clone()))
        .key("auditTime", AttributeValue::S(changed_time))
        .update_expression("SET actor = :a")
        .expression_attribute_values(":a", AttributeValue::S("mallory".into()))
        .send()
        .await
        .unwrap();
    let (deleted_id, deleted_time) = stack.items[5].clone();
    dynamodb
        .delete_item()
        .table_name(TABLE)
        .key("messageId", AttributeValue::S(deleted_id.clone()))
        .key("auditTime", AttributeValue::S(deleted_time))
        .send()
        .await
        .unwrap();
    let forged_time = audit_model::message::canonical_time(stack.t0 + Duration::seconds(101));
    dynamodb
        .put_item()
        .table_name(TABLE)
        .item("messageId", AttributeValue::S("forged".into()))
        .item("auditTime", AttributeValue::S(forged_time.clone()))
        .item(
            "auditBucket",
            AttributeValue::S(audit_model::message::audit_bucket("forged", &forged_time)),
        )
        .item("receivedAt", AttributeValue::S(forged_time))
        .item("auditText", AttributeValue::S("never happened".into()))
        .send()
        .await
        .unwrap();

    // The archive: an object overwritten (a new version, as Object Lock allows) and one
    // deleted (a delete marker); an object put into a sealed period.
    let overwritten = object(9);
    stack
        .s3
        .put_object()
        .bucket(BUCKET)
        .key(&overwritten)
        .checksum_algorithm(ChecksumAlgorithm::Sha256)
        .body(ByteStream::from(gzip(&["{}".to_owned()])))
        .send()
        .await
        .unwrap();
    let deleted = object(11);
    stack
        .s3
        .delete_object()
        .bucket(BUCKET)
        .key(&deleted)
        .send()
        .await
        .unwrap();
    let at = DateTime::from_timestamp(stack.period(12).start + 5, 0).unwrap();
    let slipped = stack
        .put_object(ObjectKind::Trail, at, &["{}".to_owned()])
        .await;

    // The digests: one deleted (a delete marker), one altered (its signature kept), one
    // re-signed with another key.
    stack
        .s3
        .delete_object()
        .bucket(BUCKET)
        .key(digest_key(stack.period(17)))
        .send()
        .await
        .unwrap();
    let altered = digest_key(stack.period(20));
    let got = stack
        .s3
        .get_object()
        .bucket(BUCKET)
        .key(&altered)
        .send()
        .await
        .unwrap();
    let signature = got.metadata().unwrap()[SIGNATURE_METADATA].clone();
    let body = String::from_utf8(got.body.collect().await.unwrap().to_vec()).unwrap();
    stack
        .s3
        .put_object()
        .bucket(BUCKET)
        .key(&altered)
        .checksum_algorithm(ChecksumAlgorithm::Sha256)
        .metadata(SIGNATURE_METADATA, signature)
        .body(ByteStream::from(
            body.replace("\"events\":", "\"events\":1").into_bytes(),
        ))
        .send()
        .await
        .unwrap();
    let other_key = create_key(&stack.kms).await;
    let resigned = stack.period(23);
    let got = stack
        .s3
        .get_object()
        .bucket(BUCKET)
        .key(digest_key(resigned))
        .send()
        .await
        .unwrap();
    let mut digest = Digest::parse(&got.body.collect().await.unwrap().to_vec()).unwrap();
    digest.objects.clear();
    digest.events = 0;
    digest.key_id = other_key.clone();
    stack.put_digest(resigned, &digest, &other_key, false).await;

    let output = stack.verify(&["--table", "--no-audit-event"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}\n{}", stderr(&output));
    let mut found = problems(&out);
    found.sort();
    let mut expected: Vec<(String, String)> = [
        ("digest missing", digest_key(stack.period(17))),
        ("digest missing", digest_key(stack.period(27))),
        ("signature invalid", altered.clone()),
        ("signature invalid", digest_key(resigned)),
        ("object changed", overwritten.clone()),
        ("object missing", deleted.clone()),
        ("object not in digest", slipped.clone()),
        ("item changed", changed_id.clone()),
        ("item missing", deleted_id.clone()),
        ("item not archived", "forged".to_owned()),
    ]
    .into_iter()
    .map(|(k, s)| (k.to_owned(), s))
    .collect();
    expected.sort();
    assert_eq!(found, expected, "{out}");
    assert!(out.contains("problems  10 ("), "{out}");
    assert!(out.contains("actor changed"), "{out}");
}

#[tokio::test]
async fn verify_names_the_fix_when_it_cannot_start() {
    let stack = Stack::new().await;
    let run = |env: &[(&str, &str)]| {
        auditctl(
            &stack.moto.endpoint,
            &[
                "verify",
                "--from",
                "2026-11-22T10:00:00Z",
                "--to",
                "2026-11-22T11:00:00Z",
                "--no-audit-event",
            ],
            env,
        )
    };
    let no_bucket = run(&[("ARCHIVE_BUCKET", ""), ("DIGEST_KEY_ID", &stack.key)]);
    assert_eq!(no_bucket.status.code(), Some(1));
    assert!(
        stderr(&no_bucket).contains("ARCHIVE_BUCKET is not set: export it from the stack's outputs (AuditArchiveBucketName) or .local/stack.env"),
        "{}",
        stderr(&no_bucket)
    );
    let no_key = run(&[("ARCHIVE_BUCKET", BUCKET), ("DIGEST_KEY_ID", "")]);
    assert!(
        stderr(&no_key).contains("DIGEST_KEY_ID is not set"),
        "{}",
        stderr(&no_key)
    );
    let wrong_bucket = run(&[
        ("ARCHIVE_BUCKET", "no-such-bucket"),
        ("DIGEST_KEY_ID", &stack.key),
    ]);
    assert_eq!(wrong_bucket.status.code(), Some(1));
    assert!(
        stderr(&wrong_bucket).contains("archive bucket no-such-bucket not found"),
        "{}",
        stderr(&wrong_bucket)
    );
    let wrong_key = run(&[
        ("ARCHIVE_BUCKET", BUCKET),
        (
            "DIGEST_KEY_ID",
            "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000",
        ),
    ]);
    assert_eq!(wrong_key.status.code(), Some(1));
    assert!(
        stderr(&wrong_key).contains("not found"),
        "{}",
        stderr(&wrong_key)
    );
    let bad_period = run(&[("DIGEST_PERIOD_SECONDS", "7")]);
    assert_eq!(bad_period.status.code(), Some(2), "{}", stderr(&bad_period));
}

/// The line of verify's summary that starts with `name`.
fn summary_line<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find(|line| line.starts_with(name))
        .unwrap_or_default()
}

#[tokio::test]
async fn verify_never_passes_a_trail_with_data_and_no_digest() {
    let mut stack = Stack::new().await;
    stack.write_trail(12).await;
    let output = stack.verify(&["--table", "--no-audit-event"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}\n{}", stderr(&output));
    let found = problems(&out);
    // Every period that holds an object, and the table's items in their periods.
    assert!(!found.is_empty(), "{out}");
    assert!(
        found.iter().all(|(kind, _)| kind == "trail not sealed"),
        "{out}"
    );
    let periods: std::collections::BTreeSet<&str> =
        found.iter().map(|(_, key)| key.as_str()).collect();
    for start in stack.objects.keys() {
        let key = digest_key(Period {
            start: *start,
            length: length(),
        });
        assert!(periods.contains(key.as_str()), "{key}\n{out}");
    }
    assert!(
        summary_line(&out, "chain ")
            .contains(&format!("none: the bucket {BUCKET} holds no digest")),
        "{out}"
    );
    assert!(
        out.contains(
            "\nperiods   0 checked: 0 sealed (0 empty), 0 not sealed yet, 0 without a usable digest\n"
        ),
        "{out}"
    );
    assert!(
        summary_line(&out, "trail     ").starts_with(&format!(
            "trail     none: no digest chain (see chain), so none of the range's {PERIODS} period(s) is checked; "
        )),
        "{out}"
    );
    assert!(
        summary_line(&out, "trail     ").ends_with(
            " object(s) in them, which no digest can prove (trail not sealed: reported above)"
        ),
        "{out}"
    );
}

#[tokio::test]
async fn verify_reports_a_planted_earlier_digest_and_every_tamper_record_and_trusts_the_first_signed_digest()
 {
    let mut stack = Stack::new().await;
    stack.write_trail(10).await;
    // A tamper record archived before the period was sealed (an item changed, then restored).
    let line = serde_json::json!({
        "approximateCreationDateTime": stack.t0.to_rfc3339(),
        "eventID": "e-1",
        "eventName": "MODIFY",
        "keys": {"auditTime": stack.items[0].1, "messageId": stack.items[0].0},
        "newImage": {},
        "oldImage": {},
        "sequenceNumber": "1",
        "userIdentity": null
    })
    .to_string();
    let at = DateTime::from_timestamp(stack.period(3).start + 4, 0).unwrap();
    stack.put_object(ObjectKind::Tamper, at, &[line]).await;
    stack.seal_all(&[]).await;
    // A digest five periods before the chain's first, signed by another key in the name of the
    // digest key.
    let other = create_key(&stack.kms).await;
    let planted = stack.period(-5);
    let digest = Digest::new(BUCKET, planted, Utc::now(), vec![], None, &stack.key);
    stack.put_digest(planted, &digest, &other, true).await;

    let env = stack.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let from = (stack.t0 - Duration::seconds(5 * i64::from(SECONDS))).to_rfc3339();
    let to = stack.range()[3].clone();
    let output = auditctl(
        &stack.moto.endpoint,
        &["verify", "--from", &from, "--to", &to, "--no-audit-event"],
        &env,
    );
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}\n{}", stderr(&output));
    let mut found = problems(&out);
    found.sort();
    assert_eq!(
        found,
        [
            ("item modified".to_owned(), stack.items[0].0.clone()),
            ("signature invalid".to_owned(), digest_key(planted)),
        ],
        "{out}"
    );
    assert_eq!(
        summary_line(&out, "chain "),
        format!(
            "chain     trusted from {}: the chain's first digest (previous null)",
            digest_key(stack.period(0))
        ),
        "{out}"
    );
    assert_eq!(
        summary_line(&out, "trail     "),
        format!(
            "trail     the range starts before the trail: its first period is {} (digest {}); the 5 period(s) before it are not counted",
            DateTime::from_timestamp(stack.period(0).start, 0)
                .unwrap()
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            digest_key(stack.period(0))
        ),
        "{out}"
    );
    assert!(
        out.contains(&format!("\nperiods   {PERIODS} checked: {PERIODS} sealed")),
        "{out}"
    );
}

#[tokio::test]
async fn verify_takes_a_predecessor_older_than_the_buckets_retention_as_expired_lawfully() {
    // The bucket's default retention is one day (create_locked_bucket): a trail two days old
    // whose first digest links to one that is not there.
    let gone = |stack: &Stack| PreviousDigest {
        key: digest_key(stack.period(1)),
        sha256: "00".repeat(32),
        signature: "3045".to_owned(),
    };
    let mut old = Stack::started_ago(2 * 86_400).await;
    for n in 0..4 {
        let at = DateTime::from_timestamp(old.period(n).start + 3, 0).unwrap();
        old.put_object(ObjectKind::Trail, at, &["{}".to_owned()])
            .await;
    }
    old.seal_from(2, Some(gone(&old)), &[]).await;
    let from = old.period(2).start;
    let from = DateTime::from_timestamp(from, 0).unwrap().to_rfc3339();
    let to = old.range()[3].clone();
    let env = old.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = ok(auditctl(
        &old.moto.endpoint,
        &["verify", "--from", &from, "--to", &to, "--no-audit-event"],
        &env,
    ));
    assert_eq!(
        summary_line(&out, "chain "),
        format!(
            "chain     trusted from {}: its predecessor {} is older than the bucket's Object Lock retention of 1 days and may have expired lawfully",
            digest_key(old.period(2)),
            digest_key(old.period(1))
        ),
        "{out}"
    );

    // The same within the retention: removed before its time, the chain is broken.
    let young = Stack::new().await;
    young.seal_from(2, Some(gone(&young)), &[]).await;
    let from = DateTime::from_timestamp(young.period(2).start, 0)
        .unwrap()
        .to_rfc3339();
    let to = young.range()[3].clone();
    let env = young.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let output = auditctl(
        &young.moto.endpoint,
        &["verify", "--from", &from, "--to", &to, "--no-audit-event"],
        &env,
    );
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}\n{}", stderr(&output));
    assert_eq!(
        problems(&out),
        [("chain broken".to_owned(), digest_key(young.period(2)))],
        "{out}"
    );
    assert!(out.contains("retention of 1 days keeps it until"), "{out}");
}

#[tokio::test]
async fn verify_checks_the_transparency_log_the_digest_key_signed_and_the_witnesses_asked_for() {
    let mut stack = Stack::new().await;
    stack.write_trail(20).await;
    let sizes = stack.seal_logged().await;
    assert_eq!(sizes.last(), Some(&20));
    let mut distinct = sizes.clone();
    distinct.dedup();
    let out = ok(stack.verify(&["--no-audit-event"]));
    assert_eq!(problems(&out), [], "{out}");
    let log = summary_line(&out, "log ");
    assert!(
        log.contains(&format!(
            "the log begins at {}",
            digest_key(stack.period(0))
        )) && log.contains("tree sizes 0 to 20: 20 leaves")
            && log.contains(&format!("{} checkpoint(s) checked", distinct.len())),
        "{out}"
    );

    // A witness asked for that cosigned nothing: each tree size is `cosignature missing`.
    let witness = WitnessKey {
        name: "witness.example/w1".to_owned(),
        public: [0xfb; 32],
    };
    let output = stack.verify(&["--no-audit-event", "--witness-key", &witness.vkey()]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}\n{}", stderr(&output));
    let missing: Vec<(String, String)> = distinct
        .iter()
        .map(|s| ("cosignature missing".to_owned(), checkpoint_key(*s)))
        .collect();
    assert_eq!(problems(&out), missing, "{out}");
    // Not a witness key: bad usage, naming the format.
    let output = stack.verify(&["--no-audit-event", "--witness-key", "nonsense"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("<name>+<key id>+<base64 key>"),
        "{}",
        stderr(&output)
    );

    // A checkpoint written over with another root, signed by the digest key all the same.
    let public = stack
        .kms
        .get_public_key()
        .key_id(&stack.key)
        .send()
        .await
        .unwrap()
        .public_key
        .unwrap()
        .into_inner();
    let size = distinct[distinct.len() / 2];
    stack.put_checkpoint(size, [7; 32], &public).await;
    // And one hash of the tree's last partial tile changed.
    let tile = TreeEdge::edge_tiles(20)[0];
    let got = stack
        .s3
        .get_object()
        .bucket(BUCKET)
        .key(tile.key())
        .send()
        .await
        .unwrap();
    let mut bytes = got.body.collect().await.unwrap().to_vec();
    bytes[3 * 32] ^= 1;
    stack.put_log(&tile.key(), bytes).await;
    let output = stack.verify(&["--no-audit-event"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{out}\n{}", stderr(&output));
    let found = problems(&out);
    assert!(
        found.contains(&("checkpoint inconsistent".to_owned(), checkpoint_key(size))),
        "{out}"
    );
    assert!(
        found.contains(&("leaf missing".to_owned(), tile.key())),
        "{out}"
    );
    assert!(out.contains("holds another hash at leaf 3"), "{out}");
}
