//! Owns the layout of an evidence bundle (docs/archive.md "Evidence for auditors"): its file
//! names and its manifest, which `auditctl export --evidence` writes and `check-proof` reads.
//! Must not know how a bundle is made or checked.

use serde::{Deserialize, Serialize};

/// The manifest's `format`.
pub const EVIDENCE_FORMAT: &str = "audit-receiver-evidence/1";
/// The manifest.
pub const MANIFEST: &str = "manifest.json";
/// Each proven event as its archived line, exact bytes, one a line.
pub const EVENTS: &str = "events.jsonl";
/// One proof a line, line for line with [`EVENTS`], each as `auditctl prove` prints it.
pub const PROOFS: &str = "proofs.jsonl";
/// The checkpoint every proof is in, with every cosignature found.
pub const CHECKPOINT: &str = "checkpoint.txt";
/// The digest key's public key.
pub const PUBLIC_KEY: &str = "digest-key.pem";
/// The archived lines of the events not proven (their period not sealed yet).
pub const UNPROVEN: &str = "unproven.jsonl";

/// The file of the checkpoint of `size` that a completeness claim names.
pub fn checkpoint_file(size: u64) -> String {
    format!("checkpoints/{size}.txt")
}

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub format: String,
    /// When it was made (RFC 3339) and by whom (the caller's ARN, as its access event says).
    pub made_at: String,
    pub made_by: String,
    /// The log's origin (the first line of its checkpoints).
    pub origin: String,
    /// The digest key's ARN; its public key is [`PUBLIC_KEY`].
    pub key_arn: String,
    pub query: Query,
    /// The digest periods the range covers, in order.
    pub periods: Vec<PeriodEntry>,
    /// Events proven (lines of [`EVENTS`] and [`PROOFS`]) and listed as unproven.
    pub events: u64,
    pub unproven_events: u64,
    /// The size of the tree of [`CHECKPOINT`], which every proof is in.
    pub tree_size: u64,
    /// What the bundle proves, in words, and what it does not.
    pub proven: Vec<String>,
    pub not_proven: Vec<String>,
    /// Present when the bundle claims to hold every event of its periods.
    pub completeness: Option<Completeness>,
    /// The events of periods not sealed yet (their lines in [`UNPROVEN`]).
    pub unproven: Vec<Unproven>,
}

/// The range and the filters asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Query {
    pub from: String,
    pub to: String,
    /// The filters given (name: value); empty for the whole range.
    pub filters: serde_json::Map<String, serde_json::Value>,
    pub period_seconds: u32,
}

/// One digest period of the range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeriodEntry {
    pub start: String,
    pub end: String,
    /// `sealed`, `empty` (sealed, no event), `not sealed`, `before the log` or `no digest`.
    pub state: String,
    /// Its events in the bundle (after the filters).
    pub events: u64,
    /// Its leaves `[firstLeaf, endLeaf)` when sealed with events.
    pub first_leaf: Option<u64>,
    pub end_leaf: Option<u64>,
}

/// The claim that the events are every leaf `[start, end)` of the log: the hashes of the tree
/// of `end` leaves outside that range (hex, in the order `audit_model::tlog::range` walks it),
/// against the checkpoints of `start` (none when 0) and `end` leaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completeness {
    pub start: u64,
    pub end: u64,
    pub start_checkpoint: Option<String>,
    pub end_checkpoint: String,
    pub range_proof: Vec<String>,
}

/// An event listed, not proven.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Unproven {
    pub message_id: String,
    pub audit_time: String,
    pub object: String,
    pub line_number: u64,
    pub why: String,
}
