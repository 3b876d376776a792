//! Owns the item written for an audit message: its delivery, its attributes, `auditBucket` and
//! lookup keys (docs/events.md "The item"). Must not know the body rules or how a store writes it.

use std::borrow::Cow;

use chrono::{DateTime, Utc};

use serde_json::{Map, Value};

use super::{AuditMessage, EventFields, canonical_time};
use crate::keys::{LOOKUP_INDEXES, LookupField, lookup_key};

/// Shards per UTC day of the `byAuditTime` index: `auditBucket` is `YYYY-MM-DD#NN`, NN `00`-`31`.
pub const AUDIT_BUCKET_SHARDS: u32 = 32;

/// FNV-1a, 32 bits (offset basis 2166136261, prime 16777619), as docs/events.md "The item" fixes it
/// so that any reader can compute a bucket. Hand-written: four lines, and a crate would add a
/// dependency whose output must still be pinned by these same test vectors.
pub fn fnv1a_32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(2_166_136_261u32, |hash, &byte| {
        (hash ^ u32::from(byte)).wrapping_mul(16_777_619)
    })
}

/// The item's `auditBucket`: the UTC day of its canonical `auditTime` and the shard of its
/// `messageId`.
pub fn audit_bucket(message_id: &str, canonical_audit_time: &str) -> String {
    let day = canonical_audit_time
        .get(..10)
        .unwrap_or(canonical_audit_time);
    format!("{day}#{}", bucket_shard(message_id))
}

/// The two-digit shard of a `messageId`.
pub fn bucket_shard(message_id: &str) -> String {
    format!(
        "{:02}",
        fnv1a_32(message_id.as_bytes()) % AUDIT_BUCKET_SHARDS
    )
}

/// Where and how a message was delivered: the SQS side of the item.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// This delivery's SQS message id (the item's `sqsMessageId`).
    pub sqs_message_id: String,
    /// The SQS message id of the original delivery: this one's, or the one a redriven record
    /// carries in its `failureContext`. The item's `messageId` when the body has none.
    pub original_message_id: String,
    /// `SentTimestamp` of the original delivery.
    pub sent_at: Option<DateTime<Utc>>,
    pub receive_count: Option<u64>,
    pub event_source: Option<String>,
    /// This delivery's SQS `SenderId`: who AWS says sent it (a user id, or a role id and session
    /// name). `actor` is what the producer claims; this is attested.
    pub sender_id: Option<String>,
    /// The first delivery's `SenderId`, when a redriven record's valid `failureContext` carries it.
    pub original_sender_id: Option<String>,
}

/// The item written to the audit table, independent of how a store represents it.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditItem {
    pub message_id: String,
    pub audit_time: String,
    /// `YYYY-MM-DD#NN`, the key of the `byAuditTime` index (`audit_bucket`).
    pub audit_bucket: String,
    pub audit_text: Option<String>,
    /// `actor`, `action`, `resource`, `outcome`, `sourceIp`: top-level attributes.
    pub fields: EventFields,
    pub sqs_message_id: String,
    pub sent_at: Option<String>,
    pub receive_count: Option<u64>,
    pub event_source: Option<String>,
    /// `senderId`: the delivery's attested sender (delivery metadata, not payload).
    pub sender_id: Option<String>,
    /// `originalSenderId`: the first delivery's attested sender, across a redrive.
    pub original_sender_id: Option<String>,
    pub received_at: String,
    pub extra: Map<String, Value>,
    pub expires_at: Option<i64>,
    /// `attestation`: the receiver's attestation of the item (`crate::attest`), set for a whole
    /// batch before it is written; delivery metadata, not payload.
    pub attestation: Option<String>,
}

impl AuditItem {
    /// `retention_days` sets `expiresAt` to the audit time plus that many days: retention of an
    /// audit record is counted from the event it records.
    pub fn new(
        message: AuditMessage,
        delivery: Delivery,
        received_at: DateTime<Utc>,
        retention_days: Option<u32>,
    ) -> Self {
        let expires_at =
            retention_days.map(|days| message.audit_time.timestamp() + i64::from(days) * 86_400);
        let message_id = message
            .producer_message_id
            .unwrap_or_else(|| delivery.original_message_id.clone());
        let audit_time = canonical_time(message.audit_time);
        Self {
            audit_bucket: audit_bucket(&message_id, &audit_time),
            message_id,
            audit_time,
            audit_text: message.audit_text,
            fields: message.fields,
            sqs_message_id: delivery.sqs_message_id,
            sent_at: delivery.sent_at.map(canonical_time),
            receive_count: delivery.receive_count,
            event_source: delivery.event_source,
            sender_id: delivery.sender_id,
            original_sender_id: delivery.original_sender_id,
            received_at: canonical_time(received_at),
            extra: message.extra,
            expires_at,
            attestation: None,
        }
    }
}

impl AuditItem {
    /// The structured fields as the item's string attributes (`actor`, `action`, `resource`,
    /// `outcome`, `sourceIp`), each only when the event carries it; borrowed but for the address.
    pub fn field_attributes(&self) -> impl Iterator<Item = (&'static str, Cow<'_, str>)> + '_ {
        let f = &self.fields;
        [
            ("actor", f.actor.as_deref().map(Cow::Borrowed)),
            ("action", f.action.as_deref().map(Cow::Borrowed)),
            ("resource", f.resource.as_deref().map(Cow::Borrowed)),
            ("outcome", f.outcome.map(|o| Cow::Borrowed(o.as_str()))),
            ("sourceIp", f.source_ip.map(|ip| Cow::Owned(ip.to_string()))),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
    }

    /// The item's lookup keys: `(attribute, value)` for each lookup index whose field the item
    /// carries (`keys::LOOKUP_INDEXES`); an item without the field is not in that index.
    pub fn lookup_keys(&self) -> impl Iterator<Item = (&'static str, String)> + '_ {
        LOOKUP_INDEXES.iter().filter_map(|index| {
            let value = match index.field {
                LookupField::Actor => self.fields.actor.as_deref(),
                LookupField::Action => self.fields.action.as_deref(),
                LookupField::Resource => self.fields.resource.as_deref(),
            }?;
            Some((index.key, lookup_key(value, &self.message_id)))
        })
    }
}
