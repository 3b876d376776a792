//! The attestation as the receiver makes it and a reader checks it: a run key certified by a
//! stand-in for KMS (a local ECDSA P-256 key), one signature over a batch's tree.

use super::*;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _,
};
use serde_json::json;

/// The receiver's side: a run key, its certificate, attesting batches of lines.
struct Receiver {
    run: Ed25519KeyPair,
    certificate: Certificate,
}

/// A stand-in for the KMS key: its pair and its DER public key.
fn kms() -> (EcdsaKeyPair, ReceiverKey) {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref()).unwrap();
    let der = aws_lc_rs::encoding::AsDer::<aws_lc_rs::encoding::PublicKeyX509Der>::as_der(
        pair.public_key(),
    )
    .unwrap();
    let key = ReceiverKey::from_der(der.as_ref());
    (pair, key)
}

impl Receiver {
    fn new(kms: &EcdsaKeyPair) -> Self {
        let run = Ed25519KeyPair::generate().unwrap();
        let public_key: [u8; 32] = run.public_key().as_ref().try_into().unwrap();
        let issued_at_ms = 1_795_000_000_000;
        let signature = kms
            .sign(
                &SystemRandom::new(),
                &Certificate::statement(&public_key, issued_at_ms),
            )
            .unwrap()
            .as_ref()
            .to_vec();
        Self {
            run,
            certificate: Certificate {
                public_key,
                issued_at_ms,
                signature,
            },
        }
    }

    /// Each line with its `attestation`.
    fn attest(&self, lines: &[Map<String, Value>]) -> Vec<Map<String, Value>> {
        let leaves: Vec<Hash> = lines.iter().map(item_leaf).collect();
        let (root, paths) = batch_tree(&leaves).unwrap();
        let size = lines.len() as u64;
        let signature = self.run.sign(&batch_message(&root, size)).as_ref().to_vec();
        lines
            .iter()
            .zip(paths)
            .enumerate()
            .map(|(index, (line, path))| {
                let mut line = line.clone();
                let attestation = Attestation {
                    certificate: self.certificate.clone(),
                    signature: signature.clone(),
                    index: index as u64,
                    size,
                    path,
                };
                line.insert(ATTESTATION.into(), Value::String(attestation.encode()));
                line
            })
            .collect()
    }
}

fn line(id: usize) -> Map<String, Value> {
    let Value::Object(map) = json!({
        "messageId": format!("m-{id}"),
        "auditTime": "2026-11-22T10:00:00.000Z",
        "actor": "alice",
        "senderId": "AROAPRODUCER:orders",
        "receiveCount": 1,
        "extra": {"amount": 12.5, "tags": ["a", {"n": 1}]},
    }) else {
        unreachable!()
    };
    map
}

/// The archived line as a reader parses it.
fn archived(line: &Map<String, Value>) -> Map<String, Value> {
    serde_json::from_str(&Value::Object(line.clone()).to_string()).unwrap()
}

#[test]
fn every_item_of_a_batch_checks_offline_under_the_receivers_key() {
    let (pair, key) = kms();
    let receiver = Receiver::new(&pair);
    for size in [1, 2, 3, 10, 17, 256] {
        let lines: Vec<_> = (0..size).map(line).collect();
        for (i, attested) in receiver.attest(&lines).iter().enumerate() {
            let checked = check(&archived(attested), &key).unwrap();
            assert_eq!((checked.index, checked.size), (i as u64, size as u64));
        }
    }
}

#[test]
fn a_changed_field_a_moved_attestation_or_another_key_is_not_attested() {
    let (pair, key) = kms();
    let receiver = Receiver::new(&pair);
    let attested = receiver.attest(&(0..4).map(line).collect::<Vec<_>>());

    let mut changed = attested[1].clone();
    changed.insert("actor".into(), json!("mallory"));
    assert!(matches!(check(&changed, &key), Err(NotAttested::Signature)));
    // Another item's attestation on a line the receiver never wrote.
    let mut foreign = line(99);
    foreign.insert(ATTESTATION.into(), attested[2][ATTESTATION].clone());
    assert!(matches!(check(&foreign, &key), Err(NotAttested::Signature)));
    // A line put in the table by someone else: no attestation at all.
    assert_eq!(check(&line(5), &key).unwrap_err(), NotAttested::Missing);
    // A run key certified by another KMS key.
    let (other, _) = kms();
    let impostor = Receiver::new(&other).attest(&[line(7)]);
    assert_eq!(
        check(&impostor[0], &key).unwrap_err(),
        NotAttested::Certificate
    );
    // A certificate copied onto a batch another run key signed.
    let mut borrowed = Receiver::new(&other);
    borrowed.certificate = receiver.certificate.clone();
    let forged = borrowed.attest(&[line(8)]);
    assert_eq!(check(&forged[0], &key).unwrap_err(), NotAttested::Signature);
    // A path that does not fit the batch's size.
    let mut wrong = Attestation::parse(attested[0][ATTESTATION].as_str().unwrap()).unwrap();
    wrong.size = 9;
    let mut line0 = attested[0].clone();
    line0.insert(ATTESTATION.into(), Value::String(wrong.encode()));
    assert!(matches!(
        check(&line0, &key),
        Err(NotAttested::NotCovered(_))
    ));
}

#[test]
fn numbers_are_attested_as_dynamodb_gives_them_back() {
    let (pair, key) = kms();
    let receiver = Receiver::new(&pair);
    let mut written = line(1);
    written.insert(
        "extra".into(),
        serde_json::from_str(r#"{"amount":12.50,"big":1E+2,"small":0.0010}"#).unwrap(),
    );
    let attested = receiver.attest(&[written]);
    // The table stores and streams the canonical digits.
    let mut stored = attested[0].clone();
    stored.insert(
        "extra".into(),
        serde_json::from_str(r#"{"amount":12.5,"big":100,"small":0.001}"#).unwrap(),
    );
    check(&archived(&stored), &key).unwrap();
}

#[test]
fn canonical_numbers_have_no_exponent_and_no_extra_zeros() {
    for (text, canonical) in [
        ("12.50", "12.5"),
        ("1E+2", "100"),
        ("1e2", "100"),
        ("-0.0", "0"),
        ("0", "0"),
        ("0.001", "0.001"),
        ("1e-3", "0.001"),
        ("123.456e1", "1234.56"),
        ("-5", "-5"),
        ("10", "10"),
        ("1234567890123456789012345.5", "1234567890123456789012345.5"),
        ("-1.2300e-2", "-0.0123"),
        ("1e999", "1e999"),
        ("abc", "abc"),
    ] {
        assert_eq!(canonical_number(text), canonical, "{text}");
    }
}

#[test]
fn the_attribute_reads_back_and_malformed_text_is_named() {
    let (pair, _) = kms();
    let receiver = Receiver::new(&pair);
    let attested = receiver.attest(&(0..3).map(line).collect::<Vec<_>>());
    let text = attested[2][ATTESTATION].as_str().unwrap();
    let parsed = Attestation::parse(text).unwrap();
    assert_eq!(parsed.encode(), text);
    assert_eq!(parsed.certificate, receiver.certificate);
    for bad in [
        "",
        "v2.a.b.1.2.c",
        "v1.a.b.c",
        &text.replace(".2.3.", ".x.3."),
        &format!("{text}A"),
    ] {
        assert!(
            matches!(Attestation::parse(bad), Err(NotAttested::Malformed(_))),
            "{bad}"
        );
    }
    let mut not_a_string = line(0);
    not_a_string.insert(ATTESTATION.into(), json!(42));
    assert!(matches!(
        check(&not_a_string, &ReceiverKey::from_der(b"")),
        Err(NotAttested::Malformed(_))
    ));
}

#[test]
fn a_cache_gives_the_same_verdicts_as_a_fresh_check_and_stays_bounded() {
    let (pair, key) = kms();
    let receiver = Receiver::new(&pair);
    let attested = receiver.attest(&(0..6).map(line).collect::<Vec<_>>());
    let (other, _) = kms();
    let impostor = Receiver::new(&other).attest(&[line(7)]);
    let mut changed = attested[1].clone();
    changed.insert("actor".into(), json!("mallory"));
    let mut cache = CheckCache::new(2);
    // Twice over, so that the second pass is answered from the cache (and the cache emptied
    // when full): every verdict as without one.
    for _ in 0..2 {
        for line in attested.iter().chain(&impostor).chain([&changed]) {
            assert_eq!(
                check_with(line, &key, &mut cache).map(|a| a.index),
                check(line, &key).map(|a| a.index)
            );
        }
        assert!(cache.certificates.len() <= 2 && cache.batches.len() <= 2);
    }
    // A remembered certificate does not vouch for a batch its run key did not sign.
    let mut borrowed = Receiver::new(&other);
    borrowed.certificate = receiver.certificate.clone();
    let forged = borrowed.attest(&[line(8)]);
    assert_eq!(
        check_with(&forged[0], &key, &mut cache).unwrap_err(),
        NotAttested::Signature
    );
}

/// The transparency log's own tree over a slice of leaves (each subtree computed from them).
struct Leaves<'a>(&'a [Hash]);

impl crate::tlog::SubtreeHashes for Leaves<'_> {
    fn subtree(&mut self, subtree: crate::tlog::Subtree) -> Result<Hash, TlogError> {
        if subtree.height == 0 {
            return Ok(self.0[subtree.index as usize]);
        }
        let half = |index| crate::tlog::Subtree {
            height: subtree.height - 1,
            index,
        };
        let left = self.subtree(half(subtree.index * 2))?;
        let right = self.subtree(half(subtree.index * 2 + 1))?;
        Ok(node_hash(&left, &right))
    }
}

#[test]
fn a_batch_tree_is_the_logs_tree_with_the_logs_inclusion_paths() {
    for size in 1..=40usize {
        let leaves: Vec<Hash> = (0..size).map(|i| leaf_hash(&i.to_be_bytes())).collect();
        let (root, paths) = batch_tree(&leaves).unwrap();
        let mut log = Leaves(&leaves);
        assert_eq!(
            root,
            crate::tlog::tree_root(size as u64, &mut log).unwrap(),
            "{size}"
        );
        for (index, path) in paths.iter().enumerate() {
            let expected = crate::tlog::inclusion_proof(index as u64, size as u64, &mut log);
            assert_eq!(path, &expected.unwrap(), "leaf {index} of {size}");
            let back = root_of_inclusion(index as u64, size as u64, &leaves[index], path);
            assert_eq!(back.unwrap(), root);
        }
    }
    assert!(batch_tree(&[]).is_err());
}

#[test]
fn the_item_writer_knows_every_attribute_in_name_order() {
    let mut sorted = ITEM_ATTRIBUTES_IN_ORDER;
    sorted.sort_unstable();
    assert_eq!(sorted, ITEM_ATTRIBUTES_IN_ORDER);
    // An item with every attribute: the writer writes each of them, and in that order (the
    // bytes are those of the same object written in name order).
    use crate::message::{AuditItem, AuditMessage, Delivery, parse_audit_time};
    let body = r#"{"messageId":"m-1","auditTime":"2026-11-22T10:00:00Z","auditText":"t","actor":"alice","action":"user.login","resource":"r/1","outcome":"success","sourceIp":"192.0.2.1","amount":12.50}"#;
    let time = parse_audit_time("2026-11-22T10:00:01Z").unwrap();
    let item = AuditItem::new(
        AuditMessage::parse(Some(body), None).unwrap(),
        Delivery {
            sqs_message_id: "sqs-1".into(),
            original_message_id: "sqs-0".into(),
            sent_at: Some(time),
            receive_count: Some(2),
            event_source: Some("arn:aws:sqs:us-east-1:000000000000:AuditQueue".into()),
            sender_id: Some("AROAREDRIVER:operator".into()),
            original_sender_id: Some("AROAPRODUCER:orders".into()),
        },
        time,
        Some(30),
    );
    let bytes = item_attested_bytes(&item);
    let line: Map<String, Value> = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        line.keys().map(String::as_str).collect::<Vec<_>>(),
        ITEM_ATTRIBUTES_IN_ORDER
    );
    assert_eq!(attested_bytes(&line), bytes);
    // Each lookup index's key is one of them.
    for index in crate::keys::LOOKUP_INDEXES {
        assert!(
            ITEM_ATTRIBUTES_IN_ORDER.contains(&index.key),
            "{}",
            index.key
        );
    }
}
