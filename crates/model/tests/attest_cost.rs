//! What checking an item's attestation costs per record, printed (no bound asserted: timings are
//! the machine's): the whole `attest::check` (both signatures verified for every item), and what
//! the archiver pays once the certificate's and the batch signature's verdicts are remembered
//! (docs/archive.md "Items attested at birth"): the item's line made plain from DynamoDB's JSON,
//! its leaf, and its path to the root. Run in release:
//! `cargo test --release -p audit-model --test attest_cost -- --ignored --nocapture`.

use std::time::Instant;

use audit_model::attest::{
    ATTESTATION, Attestation, Certificate, ReceiverKey, batch_message, batch_tree, check, item_leaf,
};
use audit_model::line::plain_map;
use audit_model::tlog::root_of_inclusion;
use aws_lc_rs::encoding::{AsDer, PublicKeyX509Der};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _,
};
use serde_json::{Map, Value, json};

/// Items per batch signature: the receiver's `ITEMS_PER_SIGNATURE`.
const BATCH: usize = 32;
const ITEMS: usize = 1_024;

/// An item of the receiver's shape as the stream carries it (DynamoDB's JSON), about 0.7 KB.
fn image(i: usize) -> Map<String, Value> {
    let Value::Object(map) = json!({
        "messageId": {"S": format!("m-{i:06}")},
        "auditTime": {"S": "2026-11-22T10:00:00.000Z"},
        "auditBucket": {"S": "2026-11-22T10"},
        "auditText": {"S": format!("alice read invoice {i} of the orders service")},
        "actor": {"S": "alice"}, "action": {"S": "invoice.read"},
        "resource": {"S": format!("invoice/{i}")}, "outcome": {"S": "success"},
        "sourceIp": {"S": "2001:db8::1"},
        "actorKey": {"S": format!("alice#m-{i:06}")},
        "actionKey": {"S": format!("invoice.read#m-{i:06}")},
        "sqsMessageId": {"S": format!("0b1c2d3e-{i:06}")},
        "receivedAt": {"S": "2026-11-22T10:00:00.100Z"},
        "eventSource": {"S": "arn:aws:sqs:us-east-1:123456789012:AuditQueue"},
        "senderId": {"S": "AROAPRODUCER:orders-service"},
        "receiveCount": {"N": "1"}, "expiresAt": {"N": "1826877600"},
        "extra": {"M": {"amount": {"N": "12.50"}, "tags": {"L": [{"S": "a"}, {"S": "b"}]}}},
    }) else {
        unreachable!()
    };
    map
}

#[test]
#[ignore = "a measurement, run in release"]
fn cost_per_record_of_checking_an_attestation() {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
    let kms = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref()).unwrap();
    let der: PublicKeyX509Der = kms.public_key().as_der().unwrap();
    let key = ReceiverKey::from_der(der.as_ref());
    let run = Ed25519KeyPair::generate().unwrap();
    let public_key: [u8; 32] = run.public_key().as_ref().try_into().unwrap();
    let certificate = Certificate {
        public_key,
        issued_at_ms: 1_795_000_000_000,
        signature: kms
            .sign(
                &rng,
                &Certificate::statement(&public_key, 1_795_000_000_000),
            )
            .unwrap()
            .as_ref()
            .to_vec(),
    };
    // The receiver's images, each with its attestation, as the stream delivers them.
    let mut images: Vec<Map<String, Value>> = Vec::with_capacity(ITEMS);
    for start in (0..ITEMS).step_by(BATCH) {
        let batch: Vec<Map<String, Value>> = (start..start + BATCH).map(image).collect();
        let leaves: Vec<_> = batch.iter().map(|i| item_leaf(&plain_map(i))).collect();
        let (root, paths) = batch_tree(&leaves).unwrap();
        let size = BATCH as u64;
        let signature = run.sign(&batch_message(&root, size)).as_ref().to_vec();
        for (index, (mut item, path)) in batch.into_iter().zip(paths).enumerate() {
            let attestation = Attestation {
                certificate: certificate.clone(),
                signature: signature.clone(),
                index: index as u64,
                size,
                path,
            };
            item.insert(ATTESTATION.into(), json!({"S": attestation.encode()}));
            images.push(item);
        }
    }
    let per_record = |started: Instant, rounds: usize| {
        started.elapsed().as_secs_f64() * 1e6 / (ITEMS * rounds) as f64
    };
    let rounds = 20;
    let started = Instant::now();
    for _ in 0..rounds {
        for image in &images {
            check(&plain_map(image), &key).unwrap();
        }
    }
    let whole = per_record(started, rounds);
    let started = Instant::now();
    for _ in 0..rounds {
        for image in &images {
            let line = plain_map(image);
            let Some(Value::String(text)) = line.get(ATTESTATION) else {
                panic!("attested")
            };
            let attestation = Attestation::parse(text).unwrap();
            let leaf = item_leaf(&line);
            root_of_inclusion(
                attestation.index,
                attestation.size,
                &leaf,
                &attestation.path,
            )
            .unwrap();
        }
    }
    let remembered = per_record(started, rounds);
    let started = Instant::now();
    for _ in 0..rounds {
        for image in &images {
            std::hint::black_box(plain_map(image));
        }
    }
    let plain = per_record(started, rounds);
    println!(
        "{ITEMS} items, {BATCH} per signature: attest::check {whole:.1} µs/record; with the \
         verdicts remembered {remembered:.1} µs/record (of which the plain line {plain:.1})"
    );
}
