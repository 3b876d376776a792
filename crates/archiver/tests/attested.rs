//! Items put in the table behind the receiver (docs/archive.md "Items attested at birth"),
//! against a real local AWS endpoint (moto's server over HTTP): the receiver attests the items it
//! writes with a run key certified by KMS, someone else copies one of them into a new item with
//! `PutItem`, and the archiver, holding the attestation key's public half (KMS `GetPublicKey`),
//! archives all three, the foreign one's line marked with why, and counts it.

#[path = "support/moto.rs"]
mod moto;
mod support;

use std::time::Duration;

use audit_archiver::attest::{AttestationCheck, NOT_ATTESTED};
use audit_archiver::batch::Settings;
use audit_archiver::telemetry::metrics_document;
use audit_archiver::{Handler, handler};
use audit_aws::kms::KmsKey;
use audit_model::archive::PeriodLength;
use audit_model::attest::{NotAttested, ReceiverKey, check};
use audit_receiver::attest::{Attester, Uncertified};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::Utc;
use moto::{BUCKET, Moto, TABLE, objects};
use serde_json::{Map, Value, json};
use support::{event, failed, gunzip_lines};

/// The receiver's run key, certified by the KMS key `kms` as at the function's start.
async fn attester(kms: &KmsKey) -> Attester {
    let issued_at_ms = u64::try_from(Utc::now().timestamp_millis()).expect("after 1970");
    let run = Uncertified::generate(issued_at_ms).expect("a run key");
    let signature = kms.sign(&run.statement()).await.expect("KMS signs");
    run.certified(signature)
}

fn body(i: usize) -> Value {
    json!({
        "messageId": format!("m-{i}"),
        "auditTime": format!("2026-11-22T10:00:0{i}.000Z"),
        "auditText": format!("alice read invoice {i}"),
        "actor": "alice",
        "action": "invoice.read",
        "amount": 12.50,
    })
}

#[tokio::test]
async fn an_item_put_behind_the_receiver_is_archived_marked_and_counted_and_its_model_is_not() {
    let moto = Moto::start();
    moto.create_table().await;
    moto.create_bucket(BUCKET).await;
    // An ECC_NIST_P256 SIGN_VERIFY key, as the template's AuditAttestationKey.
    let key_arn = moto.create_digest_key().await;
    let kms = KmsKey::new(moto.kms(), &key_arn);
    moto.write_messages_attested(&[body(1), body(2)], Some(attester(&kms).await))
        .await;

    // Someone with dynamodb:PutItem copies a real item's every field, attestation included,
    // under a new messageId.
    let dynamodb = moto.dynamodb();
    let model = dynamodb
        .scan()
        .table_name(TABLE)
        .send()
        .await
        .expect("scan")
        .items
        .unwrap_or_default()
        .into_iter()
        .find(|item| item.get("messageId") == Some(&AttributeValue::S("m-1".into())))
        .expect("m-1 written");
    assert!(model.contains_key("attestation"), "the receiver attests");
    let mut forged = model.clone();
    forged.insert("messageId".into(), AttributeValue::S("m-forged".into()));
    dynamodb
        .put_item()
        .table_name(TABLE)
        .set_item(Some(forged))
        .send()
        .await
        .expect("PutItem");

    let public_key = kms.public_key().await.expect("GetPublicKey");
    let key = ReceiverKey::from_der(&public_key.der);
    let handler = Handler::new(
        moto.archive(BUCKET),
        Settings {
            period: PeriodLength::new(60).expect("a period"),
            deadline_margin: Duration::from_millis(500),
        },
    )
    .with_attestation(AttestationCheck::new(key.clone()));
    let records = moto.stream_records();
    assert_eq!(records.len(), 3);
    let report = handler
        .archive(event(records))
        .await
        .expect("the archiver answers");
    assert!(failed(&handler::response(&report)).is_empty());
    let metrics = metrics_document(&report, Duration::ZERO, Utc::now(), Some("audit-archiver"));
    assert_eq!(metrics["ForeignItem"], 1);
    assert_eq!(metrics["Archived"], 3);

    let lines: Vec<Map<String, Value>> = objects(&moto.s3(), BUCKET, "trail/")
        .await
        .iter()
        .flat_map(|(_, body)| gunzip_lines(body))
        .map(|line| serde_json::from_str(&line).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 3, "every item archived, the foreign one too");
    let line = |id: &str| {
        lines
            .iter()
            .find(|l| l["messageId"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} archived"))
    };
    for id in ["m-1", "m-2"] {
        let attested = line(id);
        assert!(!attested.contains_key(NOT_ATTESTED), "{id}: {attested:?}");
        check(&attested, &key).unwrap_or_else(|e| panic!("{id} is attested: {e}"));
    }
    let mut foreign = line("m-forged");
    // The copied path leads to another root than the one the run key signed.
    assert_eq!(
        foreign.remove(NOT_ATTESTED),
        Some(json!(NotAttested::Signature.to_string()))
    );
    // Apart from the mark, archived exactly as it was put: its model's line with the new id.
    let mut expected = line("m-1");
    expected.insert("messageId".into(), json!("m-forged"));
    assert_eq!(foreign, expected);
}
