//! Owns telling the items `audit-receiver` wrote from those put in the table behind it
//! (docs/archive.md "Items attested at birth"): each INSERT's new image is checked against the
//! receiver's attestation key (`audit_model::attest`), and a foreign one's archived line is
//! marked with why (`notAttested`). Must not know KMS, the bucket or how the batch is written.
//!
//! What repeats is checked once: a certificate per run of the receiver, a batch signature per
//! batch it wrote. So an item costs its leaf (one SHA-256 over its line) and its path's hashes.

use std::sync::Mutex;

use audit_model::attest::{CheckCache, NotAttested, ReceiverKey, check_with};
use audit_model::line::plain_map;
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
    /// Verdicts already reached, each map emptied when full (a bound, not a policy: an attacker
    /// who floods it only costs the archiver the signature checks again).
    known: Mutex<CheckCache>,
}

impl AttestationCheck {
    pub fn new(key: ReceiverKey) -> Self {
        Self {
            key,
            known: Mutex::new(CheckCache::with_capacities(CERTIFICATES, SIGNATURES)),
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

    /// `audit_model::attest::check_with` of one plain line, with the certificate's and the batch
    /// signature's verdicts remembered.
    pub fn check(&self, line: &Value) -> Result<(), NotAttested> {
        let Some(line) = line.as_object() else {
            return Err(NotAttested::Missing);
        };
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        check_with(line, &self.key, &mut known).map(|_| ())
    }
}

#[cfg(test)]
mod tests;
