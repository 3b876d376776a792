use super::*;
use crate::event::StreamEvent;
use crate::event::read_records;
use audit_aws::dynamodb::put_item_body;
use audit_aws::kms::MemoryKey;
use audit_model::message::{AuditItem, AuditMessage, Delivery, parse_audit_time};
use audit_receiver::attest::{Attester, Uncertified};

fn item(id: &str) -> AuditItem {
    let body = format!(
        r#"{{"messageId":"{id}","auditText":"t","auditTime":"2026-11-22T10:00:00Z","amount":12.50,"actor":"alice"}}"#
    );
    let delivery = Delivery {
        sqs_message_id: format!("sqs-{id}"),
        original_message_id: format!("sqs-{id}"),
        sent_at: None,
        receive_count: Some(1),
        event_source: Some("arn:aws:sqs:us-east-1:000000000000:AuditQueue".into()),
        sender_id: Some("AROAPRODUCER:orders".into()),
        original_sender_id: None,
    };
    AuditItem::new(
        AuditMessage::parse(Some(&body), None).unwrap(),
        delivery,
        parse_audit_time("2026-11-22T10:00:01Z").unwrap(),
        Some(30),
    )
}

/// The item as the table's stream carries it (DynamoDB's JSON, as PutItem wrote it).
fn image(item: &AuditItem) -> Value {
    let body: Value = serde_json::from_slice(&put_item_body("t", item).unwrap()).unwrap();
    body["Item"].clone()
}

fn insert(seq: u64, image: Value) -> Value {
    json!({
        "eventID": format!("e-{seq}"), "eventName": "INSERT", "eventSource": "aws:dynamodb",
        "eventVersion": "1.1", "awsRegion": "us-east-1",
        "dynamodb": {"ApproximateCreationDateTime": 1_795_341_600.0,
            "Keys": {"messageId": image["messageId"], "auditTime": image["auditTime"]},
            "NewImage": image, "SequenceNumber": format!("{seq}"),
            "SizeBytes": 100, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    })
}

fn attester(kms: &MemoryKey) -> Attester {
    let key = Uncertified::generate(1_795_000_000_000).unwrap();
    let signature = kms.sign(&key.statement()).unwrap();
    key.certified(signature)
}

fn marker(read: &Read) -> Option<Value> {
    match &read.record.as_ref().unwrap().change {
        Change::Insert { new_image } => new_image.get(NOT_ATTESTED).cloned(),
        _ => None,
    }
}

#[test]
fn only_foreign_inserts_are_marked_with_their_reason_and_verdicts_are_remembered() {
    let kms = MemoryKey::new("arn:aws:kms:us-east-1:000000000000:key/attest");
    let check = AttestationCheck::new(ReceiverKey::from_der(&kms.public_key().der));
    // Two trees of the receiver's (32 items, then 8).
    let mut items: Vec<AuditItem> = (0..40).map(|i| item(&format!("m-{i}"))).collect();
    attester(&kms).attest(items.iter_mut());
    let mut records: Vec<Value> = items
        .iter()
        .enumerate()
        .map(|(i, item)| insert(100 + i as u64, image(item)))
        .collect();
    // Put in the table by someone else: a copy of item 0 with a new id and its attestation.
    let mut copied = image(&items[0]);
    copied["messageId"] = json!({"S": "m-forged"});
    records.push(insert(200, copied));
    // No attestation at all.
    let mut bare = items[1].clone();
    bare.attestation = None;
    records.push(insert(201, image(&bare)));
    // Another KMS key's run key.
    let other = MemoryKey::new("arn:aws:kms:us-east-1:000000000000:key/other");
    let mut impostor = [item("m-impostor")];
    attester(&other).attest(impostor.iter_mut());
    records.push(insert(202, image(&impostor[0])));
    let mut reads = read_records(StreamEvent { records });
    let foreign = check.mark(&mut reads);
    let reasons: Vec<(&str, &NotAttested)> = foreign
        .iter()
        .map(|f| (f.sequence_number.as_str(), &f.reason))
        .collect();
    assert!(
        matches!(
            reasons[..],
            [
                ("200", NotAttested::NotCovered(_) | NotAttested::Signature),
                ("201", NotAttested::Missing),
                ("202", NotAttested::Certificate)
            ]
        ),
        "{reasons:?}"
    );
    assert!(foreign[0].keys.contains("m-forged"));
    for read in &reads[..40] {
        assert_eq!(marker(read), None);
    }
    assert_eq!(
        marker(&reads[41]),
        Some(json!({"S": "it has no attestation"}))
    );
    // The verdicts of the run's certificate and its two batches' signatures, remembered once.
    let known = check.known.lock().unwrap();
    assert_eq!(known.remembered(), (2, 3));
}

#[test]
fn records_after_one_that_cannot_be_read_are_left_as_they_are() {
    let kms = MemoryKey::new("arn:aws:kms:us-east-1:000000000000:key/attest");
    let check = AttestationCheck::new(ReceiverKey::from_der(&kms.public_key().der));
    let bare = image(&item("m-1"));
    let mut reads = read_records(StreamEvent {
        records: vec![
            insert(1, bare.clone()),
            json!({"eventName": "INSERT"}),
            insert(3, bare),
        ],
    });
    assert_eq!(check.mark(&mut reads).len(), 1);
    assert!(marker(&reads[0]).is_some());
    assert_eq!(marker(&reads[2]), None);
}

/// What the check costs per record, printed (no bound asserted: timings are the machine's). Run
/// in release: `cargo test --release -p audit-archiver --lib attest::tests::cost -- --ignored
/// --nocapture` (docs/archive.md "Benchmark").
#[test]
#[ignore = "a measurement, run in release"]
fn cost_per_record_of_the_check_next_to_the_encoding() {
    use std::time::Instant;
    let kms = MemoryKey::new("arn:aws:kms:us-east-1:000000000000:key/attest");
    let attester = attester(&kms);
    let mut items: Vec<AuditItem> = (0..1_000).map(|i| item(&format!("m-{i:04}"))).collect();
    attester.attest(items.iter_mut());
    let records: Vec<Value> = items
        .iter()
        .enumerate()
        .map(|(i, item)| insert(1_000 + i as u64, image(item)))
        .collect();
    let fresh = || {
        read_records(StreamEvent {
            records: records.clone(),
        })
    };
    let per_record =
        |started: Instant| started.elapsed().as_secs_f64() * 1e6 / records.len() as f64;
    let check = AttestationCheck::new(ReceiverKey::from_der(&kms.public_key().der));
    let mut reads = fresh();
    let started = Instant::now();
    assert!(check.mark(&mut reads).is_empty());
    let cold = per_record(started);
    let rounds = 20;
    let mut warm = 0.0;
    let mut encoding = 0.0;
    for _ in 0..rounds {
        let mut reads = fresh();
        let started = Instant::now();
        assert!(check.mark(&mut reads).is_empty());
        warm += per_record(started) / rounds as f64;
        let of: Vec<&crate::event::StreamRecord> = reads
            .iter()
            .filter_map(|r| r.record.as_ref().ok())
            .collect();
        let started = Instant::now();
        assert_eq!(crate::objects::encode(&of).unwrap().len(), 1);
        encoding += per_record(started) / rounds as f64;
    }
    println!(
        "1,000 INSERTs (63 batches of 16): check {cold:.1} µs/record the first time (certificate \
         and signatures checked), {warm:.1} µs/record remembered; encoding the trail object \
         (lines, gzip, SHA-256) {encoding:.1} µs/record"
    );
}
