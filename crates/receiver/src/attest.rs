//! Owns this run's attestation key: an Ed25519 key made at start-up, whose public half KMS
//! certifies once (`ATTESTATION_KEY_ID`, a key only the function's role may sign with), and the
//! attestation of a batch's items with one signature over their tree (`audit_model::attest`).
//! Must not know how a batch is scheduled or written.

use audit_model::attest::{
    Certificate, attestation_text, batch_message, batch_tree, item_attested_leaf, signature_text,
};
use audit_model::message::AuditItem;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair as _};

/// Items attested under one signature at most. Each carries its inclusion path (a hash per
/// level, 43 characters): a tree of 32 keeps that to 5 hashes (4 in a batch of 10, Lambda's default)
/// while one signature (8 to 9 µs) serves 32 records. BENCHMARKS.md "CPU per record, 0 ms RTT" has
/// what the attestation costs the receiver.
pub const ITEMS_PER_SIGNATURE: usize = 32;

/// The run's key and its certificate (encoded once: every item carries it).
pub struct Attester {
    run: Ed25519KeyPair,
    certificate: String,
}

/// Why the run's key could not be made or certified: the function does not start.
#[derive(Debug, thiserror::Error)]
pub enum AttestError {
    #[error("the run's attestation key could not be made: {0}")]
    Key(String),
    #[error(
        "KMS did not certify the run's attestation key (kms:Sign with ATTESTATION_KEY_ID {key_id}): {detail}"
    )]
    Certify { key_id: String, detail: String },
}

/// A run key made, not yet certified: what KMS must sign.
pub struct Uncertified {
    run: Ed25519KeyPair,
    public_key: [u8; 32],
    issued_at_ms: u64,
}

impl Uncertified {
    /// A fresh key, made at `issued_at_ms` (epoch milliseconds).
    pub fn generate(issued_at_ms: u64) -> Result<Self, AttestError> {
        let run = Ed25519KeyPair::generate().map_err(|e| AttestError::Key(e.to_string()))?;
        let public_key: [u8; 32] = run
            .public_key()
            .as_ref()
            .try_into()
            .map_err(|_| AttestError::Key("an Ed25519 public key is 32 bytes".into()))?;
        Ok(Self {
            run,
            public_key,
            issued_at_ms,
        })
    }

    /// The statement KMS signs (`Certificate::statement`).
    pub fn statement(&self) -> Vec<u8> {
        Certificate::statement(&self.public_key, self.issued_at_ms)
    }

    /// The key, with KMS's `signature` over `statement()`.
    pub fn certified(self, signature: Vec<u8>) -> Attester {
        Attester {
            certificate: Certificate {
                public_key: self.public_key,
                issued_at_ms: self.issued_at_ms,
                signature,
            }
            .encode(),
            run: self.run,
        }
    }
}

impl Attester {
    /// Sets each item's `attestation`: one signature over the tree of each run of at most
    /// `ITEMS_PER_SIGNATURE` of them, in order.
    pub fn attest<'a>(&self, items: impl IntoIterator<Item = &'a mut AuditItem>) {
        let mut items: Vec<&mut AuditItem> = items.into_iter().collect();
        // One buffer for every item's attested bytes, hashed as soon as written.
        let mut buffer = Vec::with_capacity(2048);
        for chunk in items.chunks_mut(ITEMS_PER_SIGNATURE) {
            self.attest_tree(chunk, &mut buffer);
        }
    }

    fn attest_tree(&self, items: &mut [&mut AuditItem], buffer: &mut Vec<u8>) {
        for item in items.iter_mut() {
            item.attestation = None;
        }
        let leaves: Vec<_> = items
            .iter()
            .map(|item| item_attested_leaf(item, buffer))
            .collect();
        // A tree of at most ITEMS_PER_SIGNATURE leaves always has a root and paths.
        let Ok((root, paths)) = batch_tree(&leaves) else {
            return;
        };
        let size = leaves.len() as u64;
        let signature = signature_text(self.run.sign(&batch_message(&root, size)).as_ref());
        for (index, (item, path)) in items.iter_mut().zip(paths).enumerate() {
            item.attestation = Some(attestation_text(
                &self.certificate,
                &signature,
                index as u64,
                size,
                &path,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use audit_aws::dynamodb::item_line_map;
    use audit_aws::kms::MemoryKey;
    use audit_model::attest::{NotAttested, ReceiverKey, check};
    use audit_model::message::{AuditMessage, Delivery, parse_audit_time};

    fn item(id: &str, body_extra: &str) -> AuditItem {
        let body = format!(
            r#"{{"messageId":"{id}","auditText":"t","auditTime":"2026-11-22T10:00:00Z"{body_extra}}}"#
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

    fn attester(kms: &MemoryKey) -> Attester {
        let key = Uncertified::generate(1_795_000_000_000).unwrap();
        let signature = kms.sign(&key.statement()).unwrap();
        key.certified(signature)
    }

    #[test]
    fn every_item_of_a_batch_checks_from_its_line_as_the_table_gives_it_back() {
        let kms = MemoryKey::new("arn:aws:kms:us-east-1:000000000000:key/attest");
        let key = ReceiverKey::from_der(&kms.public_key().der);
        let attester = attester(&kms);
        let mut items: Vec<AuditItem> = (0..37)
            .map(|i| item(&format!("m-{i}"), r#","amount":12.50,"actor":"alice""#))
            .collect();
        attester.attest(items.iter_mut());
        for item in &items {
            let line = item_line_map(item);
            assert!(line.contains_key("attestation"));
            check(&line, &key).unwrap();
        }
        // One KMS signature for the run, none per batch; one run-key signature per 32 items.
        assert_eq!(kms.signed(), 1);
        let attestations: Vec<_> = items
            .iter()
            .map(|item| {
                audit_model::attest::Attestation::parse(item.attestation.as_deref().unwrap())
                    .unwrap()
            })
            .collect();
        let sizes: Vec<u64> = attestations.iter().map(|a| a.size).collect();
        assert_eq!(sizes, [vec![32; 32], vec![5; 5]].concat());
        assert_ne!(attestations[0].signature, attestations[36].signature);
        assert!(
            attestations[..32]
                .iter()
                .all(|a| a.signature == attestations[0].signature)
        );
        // An item changed after it was attested is not.
        let mut changed = items[3].clone();
        changed.fields.actor = Some("mallory".into());
        assert_eq!(
            check(&item_line_map(&changed), &key).unwrap_err(),
            NotAttested::Signature
        );
    }

    /// What the attestation adds to an item (docs/archive.md "Items attested at birth"): its
    /// attribute, name and text, for a full batch of 10, as DynamoDB counts an item's size.
    #[test]
    fn an_attestation_adds_at_most_430_bytes_to_an_item_of_a_batch_of_10() {
        let sizes = attestation_sizes(10);
        let mean = sizes.iter().sum::<usize>() as f64 / sizes.len() as f64;
        println!("attestation bytes per item, batch of 10: {sizes:?}, mean {mean:.1}");
        assert!(sizes.iter().all(|&n| (300..=430).contains(&n)), "{sizes:?}");
    }

    /// In a batch of more than 32, a tree of 32 items: one more hash in each path.
    #[test]
    fn an_attestation_adds_at_most_475_bytes_to_an_item_of_a_batch_of_32() {
        let sizes = attestation_sizes(32);
        assert!(sizes.iter().all(|&n| (300..=475).contains(&n)), "{sizes:?}");
    }

    /// The bytes each item's attestation adds (the attribute's name and text) in a batch of
    /// `count` items attested together.
    fn attestation_sizes(count: usize) -> Vec<usize> {
        let kms = MemoryKey::new("arn:aws:kms:us-east-1:000000000000:key/attest");
        let attester = attester(&kms);
        let mut items: Vec<AuditItem> = (0..count).map(|i| item(&format!("m-{i}"), "")).collect();
        attester.attest(items.iter_mut());
        items
            .iter()
            .map(|item| "attestation".len() + item.attestation.as_deref().expect("attested").len())
            .collect()
    }
}
