//! Owns telling the items `audit-receiver` wrote from those put in the table behind it
//! (docs/archive.md "Items attested at birth"): each INSERT's new image is checked against the
//! receiver's attestation key (`audit_model::attest`), and a foreign one's archived line is
//! marked with why (`notAttested`). Must not know KMS, the bucket or how the batch is written.
//!
//! What repeats is checked once: a certificate per run of the receiver, a batch signature per
//! batch it wrote. So an item costs its leaf (one SHA-256 over its line) and its path's hashes.

use std::collections::HashMap;
use std::sync::Mutex;

use audit_model::attest::{Attestation, NotAttested, ReceiverKey, batch_message, item_leaf};
use audit_model::line::plain_map;
use audit_model::tlog::{Hash, root_of_inclusion};
use aws_lc_rs::signature::{ED25519, UnparsedPublicKey};
use serde_json::{Value, json};

use crate::event::{Change, Read, StreamRecord};

/// The field a foreign item's archived line carries at its top level: why it is not attested
/// (`NotAttested`'s text, e.g. "it has no attestation").
pub use audit_model::line::NOT_ATTESTED;

/// Certificates remembered (one per start of a receiver's execution environment).
const CERTIFICATES: usize = 1_024;
/// Batch signatures remembered (one per batch the receiver wrote).
const SIGNATURES: usize = 16_384;

/// An item of the batch that the receiver did not write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Foreign {
    pub sequence_number: String,
    /// The item's key as plain JSON (`{"auditTime":…,"messageId":…}`): never the audit text.
    pub keys: String,
    pub reason: NotAttested,
}

/// The receiver's attestation key and what was already checked with it, for the process's life.
#[derive(Debug)]
pub struct AttestationCheck {
    key: ReceiverKey,
    known: Mutex<Known>,
}

/// Verdicts already reached, each map emptied when full (a bound, not a policy: an attacker who
/// floods it only costs the archiver the signature checks again).
#[derive(Debug, Default)]
struct Known {
    /// The certificate's bytes (key, time, signature) -> whether the attestation key signed it.
    certificates: HashMap<Vec<u8>, bool>,
    /// (run key, signature, root, size) -> whether the signature holds.
    signatures: HashMap<(Vec<u8>, Hash, u64), bool>,
}

impl AttestationCheck {
    pub fn new(key: ReceiverKey) -> Self {
        Self {
            key,
            known: Mutex::default(),
        }
    }

    /// Checks every INSERT read up to the first record that cannot be read (those after it are
    /// not archived by this invocation) and marks the new image of each foreign one with
    /// [`NOT_ATTESTED`] (its line then carries the field; nothing else of it changes). Returns the
    /// foreign items, in stream order.
    pub fn mark(&self, reads: &mut [Read]) -> Vec<Foreign> {
        let mut foreign = Vec::new();
        for read in reads.iter_mut() {
            let Ok(record) = &mut read.record else {
                break;
            };
            foreign.extend(self.mark_record(record));
        }
        foreign
    }

    /// Checks `record` when it is an INSERT, and marks its new image when it is foreign.
    pub fn mark_record(&self, record: &mut StreamRecord) -> Option<Foreign> {
        let Change::Insert { new_image } = &mut record.change else {
            return None;
        };
        let reason = self.check(&Value::Object(plain_map(new_image))).err()?;
        new_image.insert(NOT_ATTESTED.into(), json!({"S": reason.to_string()}));
        Some(Foreign {
            sequence_number: record.sequence_number.clone(),
            keys: Value::Object(plain_map(&record.keys)).to_string(),
            reason,
        })
    }

    /// `audit_model::attest::check` of one plain line, with the certificate's and the batch
    /// signature's verdicts remembered.
    pub fn check(&self, line: &Value) -> Result<(), NotAttested> {
        let Some(line) = line.as_object() else {
            return Err(NotAttested::Missing);
        };
        let text = match line.get(audit_model::attest::ATTESTATION) {
            None => return Err(NotAttested::Missing),
            Some(Value::String(text)) => text,
            Some(_) => return Err(NotAttested::Malformed("not a string".into())),
        };
        let attestation = Attestation::parse(text)?;
        let certificate = &attestation.certificate;
        let mut certificate_id = certificate.public_key.to_vec();
        certificate_id.extend_from_slice(&certificate.issued_at_ms.to_be_bytes());
        certificate_id.extend_from_slice(&certificate.signature);
        let certified = self.remembered(
            |known| known.certificates.get(&certificate_id).copied(),
            || self.key.certifies(certificate),
            |known, verdict| {
                if known.certificates.len() >= CERTIFICATES {
                    known.certificates.clear();
                }
                known.certificates.insert(certificate_id.clone(), verdict);
            },
        );
        if !certified {
            return Err(NotAttested::Certificate);
        }
        let leaf = item_leaf(line);
        let root = root_of_inclusion(
            attestation.index,
            attestation.size,
            &leaf,
            &attestation.path,
        )
        .map_err(|e| NotAttested::NotCovered(e.to_string()))?;
        let mut signed_by = certificate.public_key.to_vec();
        signed_by.extend_from_slice(&attestation.signature);
        let id = (signed_by, root, attestation.size);
        let holds = self.remembered(
            |known| known.signatures.get(&id).copied(),
            || {
                UnparsedPublicKey::new(&ED25519, certificate.public_key)
                    .verify(
                        &batch_message(&root, attestation.size),
                        &attestation.signature,
                    )
                    .is_ok()
            },
            |known, verdict| {
                if known.signatures.len() >= SIGNATURES {
                    known.signatures.clear();
                }
                known.signatures.insert(id.clone(), verdict);
            },
        );
        if holds {
            Ok(())
        } else {
            Err(NotAttested::Signature)
        }
    }

    /// A verdict remembered, or reached (outside the lock) and remembered.
    fn remembered(
        &self,
        get: impl Fn(&Known) -> Option<bool>,
        reach: impl FnOnce() -> bool,
        put: impl FnOnce(&mut Known, bool),
    ) -> bool {
        let lock = || self.known.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(verdict) = get(&lock()) {
            return verdict;
        }
        let verdict = reach();
        put(&mut lock(), verdict);
        verdict
    }
}

#[cfg(test)]
mod tests;
