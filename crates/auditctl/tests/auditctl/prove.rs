//! `auditctl prove` and `auditctl consistency` against a real local endpoint (moto's DynamoDB,
//! S3 with versioning and Object Lock, KMS): given events written by the function, archived in
//! objects of two periods (half of them in the period after their receivedAt, as a late archive
//! write puts them), and the transparency log of those periods in the bucket at its documented
//! keys (tiles, indexes, digests with their tree, checkpoints signed with KMS Sign RAW
//! ECDSA_SHA_256, a witness's cosignature), when the binary runs, then it prints a proof that
//! `check-proof` (offline) and the library's check accept, reads at most 20 objects, and records
//! its access; a consistency proof holds.

use audit_model::archive::{ObjectKey, ObjectKind, Period, PeriodLength};
use audit_model::digest::{Digest, TreeHead, digest_key};
use audit_model::note::{
    IndexRow, NoteSignature, Proof, SignedNote, WitnessKey, checkpoint_key, cosignature_key,
    cosigned_message, ecdsa_key_id, index_key, origin,
};
use audit_model::tlog::{HexHash, TreeEdge, leaf_hash, parse_hex_hash, verify_consistency};
use audit_proof::tlog::{LogKey, check_proof};
use audit_testkit::endpoint::create_locked_bucket;
use audit_trail::item::TrailItem;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};

use crate::access::assert_access_event;
use crate::dlq::queues;
use crate::harness::*;
use crate::support::*;

pub(crate) const BUCKET: &str = "audit-archive-prove";
pub(crate) const SECONDS: u32 = 10;
const EVENTS: usize = 40;

pub(crate) fn length() -> PeriodLength {
    PeriodLength::new(SECONDS).unwrap()
}

/// The trail, its archive and its log on moto.
pub(crate) struct Stack {
    pub(crate) moto: Moto,
    pub(crate) s3: aws_sdk_s3::Client,
    pub(crate) kms: aws_sdk_kms::Client,
    pub(crate) key: String,
    /// The key's DER SPKI, from GetPublicKey.
    pub(crate) der: Vec<u8>,
    pub(crate) edge: TreeEdge,
    /// Events: (messageId, auditTime), in leaf order.
    pub(crate) events: Vec<(String, String)>,
    /// The tree size after each sealed period.
    pub(crate) sizes: Vec<u64>,
    pub(crate) witness: (Ed25519KeyPair, WitnessKey),
}

impl Stack {
    pub(crate) async fn new() -> Self {
        let moto = Moto::start();
        create_table(&moto.client(), TABLE).await;
        let s3 = s3(&moto);
        create_locked_bucket(&s3, BUCKET).await;
        let kms = kms(&moto);
        let key = create_key(&kms).await;
        let der = public_key(&kms, &key).await;
        let pair = Ed25519KeyPair::generate().unwrap();
        let witness = WitnessKey {
            name: "witness.example/w1".to_owned(),
            public: pair.public_key().as_ref().try_into().unwrap(),
        };
        Self {
            moto,
            s3,
            kms,
            key,
            der,
            edge: TreeEdge::default(),
            events: Vec::new(),
            sizes: Vec::new(),
            witness: (pair, witness),
        }
    }

    pub(crate) async fn put(&self, key: &str, body: Vec<u8>) {
        put_checked(&self.s3, BUCKET, key, body).await;
    }

    /// Events written through the function (the table's items), and the last `receivedAt`:
    /// its period is the first an archive of them is written in.
    pub(crate) async fn write_events_received(&self) -> (Vec<TrailItem>, DateTime<Utc>) {
        let items = self.write_events().await;
        let received = items
            .iter()
            .map(|i| {
                DateTime::parse_from_rfc3339(&i.text("receivedAt"))
                    .unwrap()
                    .to_utc()
            })
            .max()
            .unwrap();
        (items, received)
    }

    /// Events written through the function; the table's items.
    pub(crate) async fn write_events(&self) -> Vec<TrailItem> {
        let handler = handler(&self.moto.endpoint, TABLE, settings());
        let records = (0..EVENTS)
            .map(|i| {
                let body = serde_json::json!({
                    "messageId": format!("p-{i:03}"),
                    "auditTime": format!("2026-11-24T10:00:{:02}.{i:03}Z", i % 60),
                    "action": "invoice.pay",
                    "auditText": format!("paid {i} €"),
                });
                record(&format!("sqs-{i}"), &body.to_string())
            })
            .collect::<Vec<_>>();
        for chunk in records.chunks(10) {
            let response = handler.handle(event(chunk.to_vec())).await.unwrap();
            assert!(failed(&response).is_empty(), "{response:?}");
        }
        let mut items: Vec<TrailItem> = scan(&self.moto.client(), TABLE)
            .await
            .into_iter()
            .map(TrailItem::from)
            .collect();
        items.sort_by(|a, b| a.message_id.cmp(&b.message_id));
        items
    }

    /// Archives `items` in one object of `period` and seals the period with its log, as the
    /// sealer does: leaves, digest with its tree, tiles, index, the checkpoint signed with KMS.
    pub(crate) async fn archive_and_seal(
        &mut self,
        period: Period,
        items: &[TrailItem],
        sequence: u64,
    ) {
        let at = DateTime::from_timestamp(period.start + 1, 0).unwrap();
        let object = ObjectKey::new(ObjectKind::Trail, at, length(), &sequence.to_string(), 0)
            .unwrap()
            .to_string();
        let lines: Vec<String> = items.iter().map(TrailItem::line).collect();
        self.put(&object, gzip(&lines)).await;
        let mut rows = Vec::new();
        let mut full = Vec::new();
        for (number, (item, line)) in items.iter().zip(&lines).enumerate() {
            rows.push(
                IndexRow {
                    message_id: item.message_id.clone(),
                    audit_time: item.audit_time.clone(),
                    leaf_index: self.edge.size,
                    object: object.clone(),
                    line_number: number as u64,
                }
                .line(),
            );
            self.events
                .push((item.message_id.clone(), item.audit_time.clone()));
            self.edge.push(leaf_hash(line.as_bytes()), &mut full);
        }
        let mut digest = Digest::new(BUCKET, period, Utc::now(), vec![], None, &self.key);
        digest.tree = Some(TreeHead {
            size: self.edge.size,
            root: HexHash(&self.edge.root()).to_string(),
            checkpoint: checkpoint_key(self.edge.size),
        });
        self.put(&digest_key(period), digest.to_bytes()).await;
        for (tile, bytes) in full.into_iter().chain(self.edge.partial_tiles()) {
            self.put(&tile.key(), bytes).await;
        }
        let rows: Vec<String> = rows.iter().map(|r| r.trim_end().to_owned()).collect();
        self.put(&index_key(period), gzip(&rows)).await;
        let note = signed_checkpoint(
            &self.kms,
            &self.key,
            &self.der,
            BUCKET,
            self.edge.size,
            self.edge.root(),
        )
        .await;
        self.put(&checkpoint_key(self.edge.size), note.into_bytes())
            .await;
        self.sizes.push(self.edge.size);
    }

    /// The witness cosigns the checkpoint of `size`.
    pub(crate) async fn cosign(&self, size: u64) {
        let stored = get_body(&self.s3, BUCKET, &checkpoint_key(size)).await;
        let note = SignedNote::parse(std::str::from_utf8(&stored).unwrap()).unwrap();
        let (pair, witness) = &self.witness;
        let stamp = Utc::now().timestamp() as u64;
        let mut signature = stamp.to_be_bytes().to_vec();
        signature.extend_from_slice(
            pair.sign(cosigned_message(stamp, &note.body).as_bytes())
                .as_ref(),
        );
        let line = NoteSignature {
            name: witness.name.clone(),
            key_id: witness.key_id(),
            signature,
        }
        .line();
        self.put(&cosignature_key(size, witness.key_id()), line.into_bytes())
            .await;
    }

    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("TABLE_NAME", TABLE.to_owned()),
            ("ARCHIVE_BUCKET", BUCKET.to_owned()),
            ("DIGEST_KEY_ID", self.key.clone()),
            ("DIGEST_PERIOD_SECONDS", SECONDS.to_string()),
        ]
    }

    pub(crate) fn run(
        &self,
        args: &[&str],
        extra: &[(&'static str, String)],
    ) -> std::process::Output {
        let mut env = self.env();
        env.extend(extra.iter().cloned());
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        auditctl(&self.moto.endpoint, args, &env)
    }

    pub(crate) fn pem(&self) -> String {
        format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            STANDARD.encode(&self.der)
        )
    }
}

/// "read N objects (B bytes)" from prove's stderr.
pub(crate) fn objects_read(err: &str) -> u64 {
    let at = err.find("read ").unwrap_or_else(|| panic!("{err}")) + 5;
    err[at..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{err}"))
}

#[tokio::test]
async fn prove_prints_a_proof_that_check_proof_accepts_for_events_of_two_periods() {
    let mut stack = Stack::new().await;
    // Archived in the period of the last receivedAt, and half of them in the period after it.
    let (items, received) = stack.write_events_received().await;
    let first = length().period_of(received);
    let (a, b) = items.split_at(EVENTS / 2);
    stack.archive_and_seal(first, a, 100).await;
    stack.archive_and_seal(first.next(), b, 200).await;
    stack.cosign(stack.sizes[0]).await;
    let q = queues(&stack.moto).await;
    let key = LogKey::from_der(&stack.der).unwrap();
    let dir = std::env::temp_dir().join(format!("auditctl-prove-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The log's key as a person gets it: `auditctl key --pem`, from KMS.
    let printed = ok(stack.run(&["key", "--pem"], &[]));
    let body: String = printed
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    assert_eq!(STANDARD.decode(body).unwrap(), stack.der);
    std::fs::write(dir.join("key.pem"), &printed).unwrap();
    let pem = dir.join("key.pem").to_string_lossy().into_owned();
    let vkey = stack.witness.1.vkey();
    let said = ok(stack.run(&["key", "--witness-key", &vkey], &[]));
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines[0], format!("key ARN      {}", stack.key));
    assert_eq!(
        lines[1],
        format!("KMS key id   {}", stack.key.rsplit('/').next().unwrap())
    );
    assert_eq!(
        lines[2],
        format!(
            "note key id  {} (what the log's checkpoint signatures name)",
            ecdsa_key_id(&stack.der)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        )
    );
    assert_eq!(lines[3], format!("origin       {}", origin(BUCKET)));
    assert!(lines[4].starts_with(&format!("witness      {} (key id ", stack.witness.1.name)));
    assert!(lines[4].ends_with(&format!("): {vkey}")), "{said}");
    assert_eq!(
        lines[5],
        format!(
            "check with   auditctl key --pem > digest-key.pem && auditctl check-proof PROOF.json --public-key digest-key.pem --origin {} --witness-key {vkey}",
            origin(BUCKET)
        )
    );
    assert_eq!(lines[6..].join("\n") + "\n", printed);

    for (n, (id, time)) in [(3usize, &stack.events[3]), (31, &stack.events[31])] {
        let access: Vec<(&'static str, String)> = q
            .env()
            .into_iter()
            .map(|(k, v)| (k, v.to_owned()))
            .collect();
        let vkey = stack.witness.1.vkey();
        let output = stack.run(&["prove", id, "--witness-key", &vkey], &access);
        let out = ok(output.clone());
        let err = stderr(&output);
        let proof: Proof = serde_json::from_str(&out).unwrap();
        assert_eq!((&proof.message_id, &proof.audit_time), (id, time));
        assert_eq!(proof.leaf_index, n as u64);
        // Leaf 3 is in the cosigned tree (the first period's); leaf 31 only in the newest.
        assert_eq!(
            proof.tree_size,
            if n < EVENTS / 2 {
                stack.sizes[0]
            } else {
                stack.sizes[1]
            }
        );
        let witnesses: &[WitnessKey] = if n < EVENTS / 2 {
            std::slice::from_ref(&stack.witness.1)
        } else {
            &[]
        };
        check_proof(&proof, &key, witnesses).unwrap();
        assert!(objects_read(&err) <= 20, "{err}");
        assert!(
            err.contains(&format!("proved messageId {id}: leaf {n}")),
            "{err}"
        );
        let (_, body) = q.one_access_event().await;
        let arguments = assert_access_event(&body, "auditctl.prove", BUCKET);
        assert_eq!(arguments["messageId"], id.as_str(), "{arguments}");

        // Checked offline by the binary, with no AWS configuration.
        let file = dir.join(format!("{id}.json"));
        std::fs::write(&file, &out).unwrap();
        let mut check = std::process::Command::new(env!("CARGO_BIN_EXE_auditctl"));
        check
            .env_clear()
            .args(["check-proof", &file.to_string_lossy(), "--public-key", &pem])
            .args(["--origin", &origin(BUCKET)]);
        if n < EVENTS / 2 {
            check.args(["--witness-key", &stack.witness.1.vkey()]);
        }
        let checked = check.output().unwrap();
        assert!(checked.status.success(), "{}", text(&checked));
        assert!(stdout(&checked).starts_with(&format!("OK: messageId {id} is leaf {n}")));
    }

    // --out, --tree-size, --audit-time.
    let (id, time) = stack.events[5].clone();
    let out_file = dir.join("out.json");
    let output = stack.run(
        &[
            "prove",
            &id,
            "--audit-time",
            &time,
            "--tree-size",
            &stack.sizes[1].to_string(),
            "--out",
            &out_file.to_string_lossy(),
            "--no-audit-event",
        ],
        &[],
    );
    assert_eq!(ok(output), "");
    let proof: Proof = serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    assert_eq!(proof.tree_size, stack.sizes[1]);
    check_proof(&proof, &key, &[]).unwrap();

    // Not in the table and no --audit-time: the fix is named.
    let output = stack.run(&["prove", "nobody", "--no-audit-event"], &[]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        stderr(&output).contains("pass --audit-time"),
        "{}",
        text(&output)
    );
    // With one, the indexes are searched from its period: the period after the two sealed ones is
    // not sealed yet, and is the one named, with the time its sealing run seals it by: its end,
    // the seal delay, then the schedule or one period, whichever is shorter (10 s here).
    let pending = first.next().next();
    let time = |s: i64| {
        DateTime::from_timestamp(s, 0)
            .unwrap()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    };
    let output = stack.run(
        &[
            "prove",
            "nobody",
            "--audit-time",
            &received.to_rfc3339(),
            "--no-audit-event",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert_eq!(
        stderr(&output).lines().last().unwrap_or_default(),
        format!(
            "error: the period {} to {} of messageId nobody is not sealed yet; the archiver seals it by {}",
            time(pending.start),
            time(pending.end()),
            time(pending.sealable_at() + i64::from(SECONDS)),
        ),
        "{}",
        text(&output)
    );
    assert_eq!(
        audit_proof::verify::sealed_by(&pending),
        pending.sealable_at() + i64::from(SECONDS)
    );

    // The consistency of the first period's tree with the newest.
    let output = stack.run(
        &["consistency", "--old-size", &stack.sizes[0].to_string()],
        &[],
    );
    let printed: serde_json::Value = serde_json::from_str(&ok(output)).unwrap();
    assert_eq!(printed["oldSize"], stack.sizes[0]);
    assert_eq!(printed["newSize"], stack.sizes[1]);
    let hash = |v: &serde_json::Value| parse_hex_hash(v.as_str().unwrap()).unwrap();
    let proof: Vec<_> = printed["proof"]
        .as_array()
        .unwrap()
        .iter()
        .map(hash)
        .collect();
    verify_consistency(
        stack.sizes[0],
        stack.sizes[1],
        &hash(&printed["oldRoot"]),
        &hash(&printed["newRoot"]),
        &proof,
    )
    .unwrap();
    assert!(printed["oldCheckpoint"].is_string(), "{printed}");
    let output = stack.run(
        &["consistency", "--old-size", "50", "--new-size", "20"],
        &[],
    );
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let _ = std::fs::remove_dir_all(&dir);
}

pub(crate) fn text(output: &std::process::Output) -> String {
    format!("{}{}", stdout(output), stderr(output))
}

/// Archives `items` as the archiver writes them (its run marker first, listing the object with
/// its SHA-256; then the object, `If-None-Match`), written at `at`.
async fn archive_as_the_archiver(
    bucket: &audit_aws::s3::S3Bucket,
    items: &[TrailItem],
    at: DateTime<Utc>,
    first: u64,
) -> String {
    use audit_archiver::bucket::{ArchiveBucket, Created, NewObject};
    use audit_archiver::marker::{Confirmed, Marker, RunEntry, marker_key};
    use audit_archiver::objects::Encoded;
    use audit_model::digest::{hex, sha256};

    let lines: Vec<String> = items.iter().map(TrailItem::line).collect();
    let body = audit_archiver::encode::gzip_lines(lines.iter().map(String::as_str)).unwrap();
    let sequence = |n: u64| (1_000_000 + first + n).to_string();
    let count = items.len() as u64;
    let encoded = Encoded {
        kind: ObjectKind::Trail,
        first_sequence: sequence(0),
        last_sequence: sequence(count - 1),
        event_ids: (0..count).map(|n| format!("event-{first}-{n}")).collect(),
        sha256: sha256(&body),
        body: bytes::Bytes::from(body),
    };
    let key = encoded.key(at, length(), 0).unwrap();
    let run: Vec<RunEntry> = (0..count)
        .zip(&encoded.event_ids)
        .map(|(n, id)| RunEntry(sequence(n), id.clone()))
        .collect();
    let marker_key = marker_key(&run[0], 0).unwrap();
    let marker = Marker::new(
        run,
        &[Confirmed {
            key: key.clone(),
            event_ids: encoded.event_ids.clone(),
            sha256: hex(&encoded.sha256),
        }],
        at.timestamp_millis(),
    )
    .to_json();
    let created = bucket
        .put_if_absent(NewObject {
            key: marker_key.clone(),
            sha256: sha256(&marker),
            body: bytes::Bytes::from(marker),
            content_type: "application/json",
            metadata: Vec::new(),
        })
        .await
        .unwrap();
    assert!(matches!(created, Created::New { .. }));
    let created = bucket
        .put_if_absent(encoded.request(key.clone(), &marker_key))
        .await
        .unwrap();
    assert!(matches!(created, Created::New { .. }));
    key
}

#[tokio::test]
async fn prove_proves_events_of_three_periods_sealed_by_the_archivers_sealer() {
    let stack = Stack::new().await;
    let (items, received) = stack.write_events_received().await;
    // A third of the events archived in the period of their receivedAt, the others in the two
    // periods after it (late archive writes), one object each.
    let bucket = audit_aws::s3::S3Bucket::new(stack.s3.clone(), BUCKET.to_owned());
    let mut period = length().period_of(received);
    let mut objects = Vec::new();
    for (n, chunk) in items.chunks(EVENTS.div_ceil(3)).enumerate() {
        let at = DateTime::from_timestamp(period.start + 2, 0).unwrap();
        objects.push(archive_as_the_archiver(&bucket, chunk, at, n as u64 * 1000).await);
        period = period.next();
    }
    let now = DateTime::from_timestamp(
        period.start + audit_model::archive::SEAL_DELAY.as_secs() as i64 + 1,
        0,
    )
    .unwrap();
    let report = seal_with_kms(&bucket, &stack.kms, &stack.key, length(), now).await;
    assert_eq!(report.failure, None, "{report:?}");
    assert_eq!(report.tree_size, Some(EVENTS as u64), "{report:?}");

    let key = LogKey::from_der(&stack.der).unwrap();
    let dir = std::env::temp_dir().join(format!("auditctl-prove-sealed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("key.pem"), stack.pem()).unwrap();
    let mut proven_objects = std::collections::BTreeSet::new();
    for item in [&items[0], &items[EVENTS / 2], &items[EVENTS - 1]] {
        let output = stack.run(&["prove", &item.message_id, "--no-audit-event"], &[]);
        let out = ok(output.clone());
        let err = stderr(&output);
        assert!(objects_read(&err) <= 20, "{err}");
        let proof: Proof = serde_json::from_str(&out).unwrap();
        assert_eq!(proof.message_id, item.message_id);
        assert_eq!(proof.line, item.line());
        assert_eq!(proof.tree_size, EVENTS as u64);
        check_proof(&proof, &key, &[]).unwrap();
        proven_objects.insert(proof.object.clone());
        let file = dir.join(format!("{}.json", item.message_id));
        std::fs::write(&file, &out).unwrap();
        let checked = std::process::Command::new(env!("CARGO_BIN_EXE_auditctl"))
            .env_clear()
            .args(["check-proof", &file.to_string_lossy(), "--public-key"])
            .arg(dir.join("key.pem"))
            .args(["--origin", &origin(BUCKET)])
            .output()
            .unwrap();
        assert!(checked.status.success(), "{}", text(&checked));
    }
    assert_eq!(proven_objects.into_iter().collect::<Vec<_>>(), objects);
    // Consistency from the first period's tree to the newest, as the sealer wrote them.
    let first = report
        .sealed
        .iter()
        .map(|s| s.leaves)
        .find(|leaves| *leaves > 0)
        .unwrap();
    let printed: serde_json::Value = serde_json::from_str(&ok(
        stack.run(&["consistency", "--old-size", &first.to_string()], &[])
    ))
    .unwrap();
    assert_eq!(printed["newSize"], EVENTS as u64);
    assert!(printed["oldCheckpoint"].is_string(), "{printed}");
    let _ = std::fs::remove_dir_all(&dir);
}
