//! Owns the receiver's attestation of an item (docs/archive.md "Items attested at birth"): what
//! the receiver signs for each item (its line without `attestation`, numbers in the canonical
//! form DynamoDB stores), the tree of one batch's items whose root one signature covers, the
//! certificate of the run's key (signed once by KMS at start-up), the attribute's text, and
//! checking one item's attestation offline from its archived line. Must not know KMS, DynamoDB or
//! how a batch is written.
//!
//! Why a batch and not each item: one Ed25519 signature costs about as much CPU as the rest of a
//! record's work, so the receiver signs the root of a Merkle tree over the batch's items (RFC
//! 9162's hashing, as the transparency log) once, and each item carries its inclusion path.

use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1, ED25519, UnparsedPublicKey};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::ops::Not as _;

use crate::keys::{
    AUDIT_BUCKET, LOOKUP_SHARDS, PARTITION_KEY, SORT_KEY, lookup_key_of_shard,
    lookup_value_is_hashed,
};
use crate::message::AuditItem;

use crate::tlog::{Hash, TlogError, leaf_hash, node_hash, root_of_inclusion};

/// The item's attribute (a String) that carries its attestation.
pub const ATTESTATION: &str = "attestation";
/// What a certificate's statement starts with: the domain of the KMS signature.
pub const CERTIFICATE_DOMAIN: &[u8] = b"audit-receiver attestation key v1\n";
/// What a batch's signed message starts with: the domain of the run key's signature.
pub const BATCH_DOMAIN: &[u8] = b"audit-receiver batch v1\n";
/// The attribute's version tag.
const VERSION: &str = "v1";
/// Longest inclusion path accepted: a batch of at most 2^32 items.
const MAX_PATH: usize = 32;

/// The run's public key, certified: KMS signed `statement(public_key, issued_at_ms)` with the
/// receiver's attestation key (ECDSA P-256, SHA-256), which only the receiver's role may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificate {
    /// The run's Ed25519 public key.
    pub public_key: [u8; 32],
    /// When the run made the key (epoch milliseconds).
    pub issued_at_ms: u64,
    /// KMS's ECDSA signature over the statement (DER).
    pub signature: Vec<u8>,
}

impl Certificate {
    /// What KMS signs: the domain, the public key, the time (8 bytes, big-endian).
    pub fn statement(public_key: &[u8; 32], issued_at_ms: u64) -> Vec<u8> {
        let mut statement = CERTIFICATE_DOMAIN.to_vec();
        statement.extend_from_slice(public_key);
        statement.extend_from_slice(&issued_at_ms.to_be_bytes());
        statement
    }

    /// The certificate as the attribute carries it (base64url without padding of the key, the
    /// time and KMS's signature).
    pub fn encode(&self) -> String {
        let mut bytes = self.public_key.to_vec();
        bytes.extend_from_slice(&self.issued_at_ms.to_be_bytes());
        bytes.extend_from_slice(&self.signature);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    fn decode(text: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        if bytes.len() <= 40 || bytes.len() > 40 + 80 {
            return None;
        }
        Some(Self {
            public_key: bytes[..32].try_into().ok()?,
            issued_at_ms: u64::from_be_bytes(bytes[32..40].try_into().ok()?),
            signature: bytes[40..].to_vec(),
        })
    }
}

/// What the run key signs for a batch: the domain, the tree's root, its size (8 bytes,
/// big-endian).
pub fn batch_message(root: &Hash, size: u64) -> Vec<u8> {
    let mut message = BATCH_DOMAIN.to_vec();
    message.extend_from_slice(root);
    message.extend_from_slice(&size.to_be_bytes());
    message
}

/// One item's attestation: the certificate of the run's key, the key's signature over its batch's
/// root, and where the item is in that batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attestation {
    pub certificate: Certificate,
    /// Ed25519 over `batch_message(root, size)`.
    pub signature: Vec<u8>,
    pub index: u64,
    pub size: u64,
    /// The item's inclusion path in the batch's tree (RFC 9162 PATH).
    pub path: Vec<Hash>,
}

impl Attestation {
    /// The attribute's text: `v1.<certificate>.<signature>.<index>.<size>.<path>` (base64url
    /// without padding; the path its hashes one after another).
    pub fn encode(&self) -> String {
        attestation_text(
            &self.certificate.encode(),
            &URL_SAFE_NO_PAD.encode(&self.signature),
            self.index,
            self.size,
            &self.path,
        )
    }

    /// The attribute's text read back.
    pub fn parse(text: &str) -> Result<Self, NotAttested> {
        let malformed = |why: &str| NotAttested::Malformed(why.to_owned());
        let parts: Vec<&str> = text.split('.').collect();
        let [version, certificate, signature, index, size, path] = parts[..] else {
            return Err(malformed("not six dot-separated parts"));
        };
        if version != VERSION {
            return Err(malformed("not version v1"));
        }
        let certificate =
            Certificate::decode(certificate).ok_or_else(|| malformed("the certificate"))?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .ok()
            .filter(|s| s.len() == 64)
            .ok_or_else(|| malformed("the signature"))?;
        let number = |text: &str| -> Option<u64> {
            (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
                .then(|| text.parse().ok())
                .flatten()
        };
        let (Some(index), Some(size)) = (number(index), number(size)) else {
            return Err(malformed("the index or size"));
        };
        let path = URL_SAFE_NO_PAD
            .decode(path)
            .ok()
            .filter(|p| p.len() % 32 == 0 && p.len() / 32 <= MAX_PATH)
            .ok_or_else(|| malformed("the path"))?;
        Ok(Self {
            certificate,
            signature,
            index,
            size,
            path: path
                .chunks_exact(32)
                .map(|c| c.try_into().unwrap_or([0; 32]))
                .collect(),
        })
    }
}

/// An attestation's text from its parts, the certificate and signature already encoded (a batch
/// shares them: the receiver encodes each once).
pub fn attestation_text(
    certificate: &str,
    signature: &str,
    index: u64,
    size: u64,
    path: &[Hash],
) -> String {
    let path = path.as_flattened();
    let mut text = String::with_capacity(
        VERSION.len() + certificate.len() + signature.len() + 48 + path.len().div_ceil(3) * 4,
    );
    text.push_str(VERSION);
    text.push('.');
    text.push_str(certificate);
    text.push('.');
    text.push_str(signature);
    // Writing into a String cannot fail.
    let _ = write!(text, ".{index}.{size}.");
    URL_SAFE_NO_PAD.encode_string(path, &mut text);
    text
}

/// The base64url text of a batch signature.
pub fn signature_text(signature: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(signature)
}

/// Why an item is not attested.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAttested {
    #[error("it has no attestation")]
    Missing,
    #[error("its attestation is malformed ({0})")]
    Malformed(String),
    #[error("its attestation's certificate is not signed by the receiver's attestation key")]
    Certificate,
    #[error("its attestation's batch signature does not hold")]
    Signature,
    #[error("it is not the item its attestation covers ({0})")]
    NotCovered(String),
}

/// The receiver's attestation key: the public half of the KMS key that certifies each run's key,
/// as KMS's `GetPublicKey` gives it (DER SubjectPublicKeyInfo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiverKey {
    der: Vec<u8>,
}

impl ReceiverKey {
    pub fn from_der(der: &[u8]) -> Self {
        Self { der: der.to_vec() }
    }

    /// Whether `certificate` is this key's.
    pub fn certifies(&self, certificate: &Certificate) -> bool {
        let statement = Certificate::statement(&certificate.public_key, certificate.issued_at_ms);
        // The DER SubjectPublicKeyInfo: aws-lc-rs reads the point from it.
        aws_lc_rs::signature::ParsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.der)
            .is_ok_and(|key| key.verify_sig(&statement, &certificate.signature).is_ok())
    }
}

/// The bytes the receiver attests for an item whose line (plain JSON, every attribute) is `line`:
/// the line without `attestation`, every number in DynamoDB's canonical form (what the table gives
/// back whatever digits were written: `12.50` is `12.5`), fields in name order.
pub fn attested_bytes(line: &Map<String, Value>) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    write_fields(
        &mut out,
        line.iter().filter(|(name, _)| *name != ATTESTATION),
    );
    out
}

/// `attested_bytes` of the line of `item` as the table stores it, written directly from the item
/// (no JSON tree built, no field list sorted: the receiver pays this for every record, so the
/// attributes are written in their fixed name order). The same bytes as
/// `attested_bytes(&item_line)` for the item's line: `audit_aws::dynamodb` tests that.
pub fn item_attested_bytes(item: &AuditItem) -> Vec<u8> {
    let mut out = Vec::with_capacity(768 + item.audit_text.as_ref().map_or(0, String::len));
    write_item_attested_bytes(item, &mut out);
    out
}

/// The leaf of `item` in its batch's tree (`item_leaf` of its line), its bytes written into
/// `buffer` (emptied first: one buffer serves a batch).
pub fn item_attested_leaf(item: &AuditItem, buffer: &mut Vec<u8>) -> Hash {
    buffer.clear();
    write_item_attested_bytes(item, buffer);
    leaf_hash(buffer)
}

/// `item_attested_bytes`, written at the end of `out`.
fn write_item_attested_bytes(item: &AuditItem, out: &mut Vec<u8>) {
    let f = &item.fields;
    // Every lookup key's shard (`keys::lookup_key`), computed once.
    let shard = crate::message::fnv1a_32(item.message_id.as_bytes()) % LOOKUP_SHARDS;
    let mut line = Line::new(out);
    // Every attribute an item can have, in name order (`ITEM_ATTRIBUTES_IN_ORDER` is checked).
    line.text("action", f.action.as_deref());
    line.lookup("actionKey", f.action.as_deref(), shard);
    line.text("actor", f.actor.as_deref());
    line.lookup("actorKey", f.actor.as_deref(), shard);
    line.text(AUDIT_BUCKET, Some(&item.audit_bucket));
    line.text("auditText", item.audit_text.as_deref());
    line.text(SORT_KEY, Some(&item.audit_time));
    line.text("eventSource", item.event_source.as_deref());
    if let Some(expires_at) = item.expires_at {
        // An integer's decimal text is DynamoDB's canonical form of it.
        line.number("expiresAt", expires_at);
    }
    if !item.extra.is_empty() {
        line.name("extra");
        write_object(line.out, &item.extra);
    }
    line.text(PARTITION_KEY, Some(&item.message_id));
    line.text("originalSenderId", item.original_sender_id.as_deref());
    line.text("outcome", f.outcome.map(|o| o.as_str()));
    if let Some(count) = item.receive_count {
        line.number("receiveCount", count);
    }
    line.text("receivedAt", Some(&item.received_at));
    line.text("resource", f.resource.as_deref());
    line.lookup("resourceKey", f.resource.as_deref(), shard);
    line.text("senderId", item.sender_id.as_deref());
    line.text("sentAt", item.sent_at.as_deref());
    if let Some(ip) = f.source_ip {
        line.name("sourceIp");
        line.out.push(b'"');
        // An address's text needs no escaping.
        let _ = write!(line.out, "{ip}");
        line.out.push(b'"');
    }
    line.text("sqsMessageId", Some(&item.sqs_message_id));
    line.finish();
}

/// The attribute names `item_attested_bytes` writes, in the order it writes them: name order.
#[cfg(test)]
pub(crate) const ITEM_ATTRIBUTES_IN_ORDER: [&str; 21] = [
    "action",
    "actionKey",
    "actor",
    "actorKey",
    AUDIT_BUCKET,
    "auditText",
    SORT_KEY,
    "eventSource",
    "expiresAt",
    "extra",
    PARTITION_KEY,
    "originalSenderId",
    "outcome",
    "receiveCount",
    "receivedAt",
    "resource",
    "resourceKey",
    "senderId",
    "sentAt",
    "sourceIp",
    "sqsMessageId",
];

/// A line's object being written, attribute by attribute.
struct Line<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Line<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Self { out, first: true }
    }

    fn name(&mut self, name: &str) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        write_string(self.out, name);
        self.out.push(b':');
    }

    fn text(&mut self, name: &str, value: Option<&str>) {
        if let Some(value) = value {
            self.name(name);
            write_string(self.out, value);
        }
    }

    /// A lookup key (`keys::lookup_key_of_shard`): `<value>#<shard>` written as it goes, the
    /// value's hash in its place when it is too long to key.
    fn lookup(&mut self, name: &str, value: Option<&str>, shard: u32) {
        let Some(value) = value else {
            return;
        };
        self.name(name);
        if lookup_value_is_hashed(value) {
            write_string(self.out, &lookup_key_of_shard(value, shard));
        } else {
            write_string(self.out, value);
            // Before the closing quote: `#` and digits need no escape.
            self.out.pop();
            let _ = write!(self.out, "#{shard}\"");
        }
    }

    fn number(&mut self, name: &str, value: impl std::fmt::Display) {
        self.name(name);
        let _ = write!(self.out, "{value}");
    }

    fn finish(self) {
        self.out.push(b'}');
    }
}

/// A JSON string as serde_json writes it: as it is between quotes when nothing in it needs an
/// escape (serde_json escapes only `"`, `\\` and control characters).
fn write_string(out: &mut Vec<u8>, value: &str) {
    // 16 bytes at a time, without a branch per byte.
    let plain = value.as_bytes().chunks(16).all(|chunk| {
        chunk
            .iter()
            .fold(false, |escape, &b| {
                escape | (b < 0x20) | (b == b'"') | (b == b'\\')
            })
            .not()
    });
    if plain {
        out.reserve(value.len() + 2);
        out.push(b'"');
        out.extend_from_slice(value.as_bytes());
        out.push(b'"');
    } else {
        // Writing a &str into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, value);
    }
}

/// A JSON object's fields in name order, numbers canonical, as `attested_bytes` writes them.
fn write_object(out: &mut Vec<u8>, map: &Map<String, Value>) {
    write_fields(out, map.iter());
}

/// An object of these fields (given in name order, as a `Map` iterates), numbers canonical.
fn write_fields<'a>(out: &mut Vec<u8>, fields: impl Iterator<Item = (&'a String, &'a Value)>) {
    out.push(b'{');
    for (i, (name, value)) in fields.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(out, name);
        out.push(b':');
        write_value(out, value);
    }
    out.push(b'}');
}

fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Number(number) => {
            let text = number.as_str();
            let integer = text.strip_prefix('-').unwrap_or(text);
            if !integer.is_empty() && integer.bytes().all(|b| b.is_ascii_digit()) && text != "-0" {
                // A JSON integer (no leading zero) is in DynamoDB's canonical form already.
                out.extend_from_slice(text.as_bytes());
            } else {
                out.extend_from_slice(canonical_number(text).as_bytes());
            }
        }
        Value::String(text) => write_string(out, text),
        Value::Array(values) => {
            out.push(b'[');
            for (i, value) in values.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, value);
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(out, map),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Null => out.extend_from_slice(b"null"),
    }
}

/// The leaf of an item in its batch's tree.
pub fn item_leaf(line: &Map<String, Value>) -> Hash {
    leaf_hash(&attested_bytes(line))
}

/// Checks the attestation an archived line carries, offline: the certificate under `key`, the
/// batch signature under the certified run key, and the line's place in that batch.
pub fn check(line: &Map<String, Value>, key: &ReceiverKey) -> Result<Attestation, NotAttested> {
    check_with(line, key, &mut CheckCache::new(0))
}

/// What a reader of many lines remembers between checks: each certificate's verdict, and each
/// batch signature's (run key, root, size, signature): the lines of one batch share both, so
/// each is checked once. Bounded: a map that reaches `capacity` entries is emptied.
#[derive(Debug, Default)]
pub struct CheckCache {
    certificate_capacity: usize,
    batch_capacity: usize,
    certificates: HashMap<([u8; 32], u64, Vec<u8>), bool>,
    batches: HashMap<([u8; 32], Hash, u64, Vec<u8>), bool>,
}

impl CheckCache {
    /// Remembers at most `capacity` certificates and as many batch signatures (0: none).
    pub fn new(capacity: usize) -> Self {
        Self::with_capacities(capacity, capacity)
    }

    /// Remembers at most `certificates` certificates (one per run of the receiver) and
    /// `batches` batch signatures (one per batch it wrote); 0: none of that kind.
    pub fn with_capacities(certificates: usize, batches: usize) -> Self {
        Self {
            certificate_capacity: certificates,
            batch_capacity: batches,
            ..Self::default()
        }
    }

    /// How many certificates and batch signatures it remembers now.
    pub fn remembered(&self) -> (usize, usize) {
        (self.certificates.len(), self.batches.len())
    }

    fn remember<K: std::hash::Hash + Eq>(
        capacity: usize,
        map: &mut HashMap<K, bool>,
        key: K,
        verdict: impl FnOnce() -> bool,
    ) -> bool {
        if let Some(known) = map.get(&key) {
            return *known;
        }
        let verdict = verdict();
        if capacity > 0 {
            if map.len() >= capacity {
                map.clear();
            }
            map.insert(key, verdict);
        }
        verdict
    }
}

/// [`check`], remembering certificates and batch signatures in `cache`.
pub fn check_with(
    line: &Map<String, Value>,
    key: &ReceiverKey,
    cache: &mut CheckCache,
) -> Result<Attestation, NotAttested> {
    let text = match line.get(ATTESTATION) {
        None => return Err(NotAttested::Missing),
        Some(Value::String(text)) => text,
        Some(_) => return Err(NotAttested::Malformed("not a string".into())),
    };
    let attestation = Attestation::parse(text)?;
    let certificate = &attestation.certificate;
    let certified = CheckCache::remember(
        cache.certificate_capacity,
        &mut cache.certificates,
        (
            certificate.public_key,
            certificate.issued_at_ms,
            certificate.signature.clone(),
        ),
        || key.certifies(certificate),
    );
    if !certified {
        return Err(NotAttested::Certificate);
    }
    let leaf = item_leaf(line);
    // The root the path leads to is the one the signature must cover.
    let root = root_from_path(&attestation, &leaf)?;
    let signed = CheckCache::remember(
        cache.batch_capacity,
        &mut cache.batches,
        (
            certificate.public_key,
            root,
            attestation.size,
            attestation.signature.clone(),
        ),
        || {
            UnparsedPublicKey::new(&ED25519, certificate.public_key)
                .verify(
                    &batch_message(&root, attestation.size),
                    &attestation.signature,
                )
                .is_ok()
        },
    );
    if !signed {
        return Err(NotAttested::Signature);
    }
    Ok(attestation)
}

/// The root `attestation`'s path leads to from `leaf`.
fn root_from_path(attestation: &Attestation, leaf: &Hash) -> Result<Hash, NotAttested> {
    root_of_inclusion(attestation.index, attestation.size, leaf, &attestation.path)
        .map_err(|e| NotAttested::NotCovered(e.to_string()))
}

/// A batch's tree: its root and each leaf's inclusion path, in the leaves' order (RFC 9162: each
/// inner node hashed once, a path's hashes from the leaf's sibling up).
pub fn batch_tree(leaves: &[Hash]) -> Result<(Hash, Vec<Vec<Hash>>), TlogError> {
    if leaves.is_empty() {
        return Err(TlogError::IndexOutOfRange { index: 0, size: 0 });
    }
    let depth = (usize::BITS - (leaves.len() - 1).leading_zeros()) as usize;
    let mut paths: Vec<Vec<Hash>> = (0..leaves.len())
        .map(|_| Vec::with_capacity(depth))
        .collect();
    let root = subtree(leaves, &mut paths);
    Ok((root, paths))
}

/// The hash of `leaves`' tree, each leaf's path in it appended to `paths` (one per leaf).
fn subtree(leaves: &[Hash], paths: &mut [Vec<Hash>]) -> Hash {
    if leaves.len() == 1 {
        return leaves[0];
    }
    // The largest power of two smaller than the count: RFC 9162's split.
    let split = 1usize << (usize::BITS - 1 - (leaves.len() - 1).leading_zeros());
    let (left_paths, right_paths) = paths.split_at_mut(split);
    let left = subtree(&leaves[..split], left_paths);
    let right = subtree(&leaves[split..], right_paths);
    for path in left_paths {
        path.push(right);
    }
    for path in right_paths {
        path.push(left);
    }
    node_hash(&left, &right)
}

/// A JSON number's text as DynamoDB gives a number back: no exponent, no leading zeros, no
/// trailing zeros after the point, no point when whole, `0` for any zero. A text that is not a
/// JSON number, or whose exponent puts it beyond DynamoDB's range, is kept as it is.
pub fn canonical_number(text: &str) -> String {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, "0"),
    };
    let Ok(exponent) = exponent.trim_start_matches('+').parse::<i64>() else {
        return text.to_owned();
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
        || exponent.abs() > 200
    {
        return text.to_owned();
    }
    let digits = format!("{whole}{fraction}");
    let mut exponent = exponent - fraction.len() as i64;
    let digits = digits.trim_start_matches('0');
    let trimmed = digits.trim_end_matches('0');
    exponent += (digits.len() - trimmed.len()) as i64;
    if trimmed.is_empty() {
        return "0".to_owned();
    }
    let sign = if negative { "-" } else { "" };
    let len = trimmed.len() as i64;
    if exponent >= 0 {
        format!(
            "{sign}{trimmed}{}",
            "0".repeat(usize::try_from(exponent).unwrap_or(0))
        )
    } else if len > -exponent {
        let point = usize::try_from(len + exponent).unwrap_or(0);
        format!("{sign}{}.{}", &trimmed[..point], &trimmed[point..])
    } else {
        format!(
            "{sign}0.{}{trimmed}",
            "0".repeat(usize::try_from(-exponent - len).unwrap_or(0))
        )
    }
}

#[cfg(test)]
mod tests;
