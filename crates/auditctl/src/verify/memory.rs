//! Owns the in-memory twins of `verify`'s ports, for its tests: a versioned bucket that behaves
//! like S3's (every put a new version, deletes as delete markers, versions removable for good as
//! only a bucket without Object Lock allows), a P-256 signer that signs as KMS does (DER, over
//! SHA-256 of a RAW message), a table, and the archiver's writes and seals. Must not know what is
//! checked.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;

use audit_model::archive::{ObjectKey, ObjectKind, Period, PeriodLength, object_prefixes};
use audit_model::digest::SIGNING_ALGORITHM;
use audit_model::digest::{
    Digest, ListedObject, SIGNATURE_METADATA, SealedDigest, digest_key, hex, sha256,
    signing_string_of,
};
use aws_lc_rs::encoding::{AsDer, PublicKeyX509Der};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};
use chrono::{DateTime, Utc};
use flate2::Compression;
use flate2::write::GzEncoder;
use futures::StreamExt;
use futures::stream::BoxStream;

use super::key::KEY_SPEC;
use super::ports::{Archive, Entry, Fetched, KeySource, PublicKeyInfo, Table, TableItem, chunked};
use crate::TrailError;
use crate::range::TimeRange;

/// One stored version; `body: None` is a delete marker.
#[derive(Debug, Clone)]
struct Stored {
    version_id: String,
    body: Option<Vec<u8>>,
    metadata: BTreeMap<String, String>,
}

/// A versioned bucket.
#[derive(Debug, Default)]
pub struct MemoryArchive {
    keys: Mutex<BTreeMap<String, Vec<Stored>>>,
    next: Mutex<u64>,
}

impl MemoryArchive {
    fn version_id(&self) -> String {
        let mut next = self.next.lock().unwrap();
        *next += 1;
        format!("v{:06}", *next)
    }

    /// A new version of `key`; its version id.
    pub fn put(&self, key: &str, body: Vec<u8>, metadata: &[(&str, &str)]) -> String {
        let version_id = self.version_id();
        self.keys
            .lock()
            .unwrap()
            .entry(key.to_owned())
            .or_default()
            .push(Stored {
                version_id: version_id.clone(),
                body: Some(body),
                metadata: metadata
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            });
        version_id
    }

    /// A delete marker on `key` (what a DELETE without a version id does in a versioned bucket).
    pub fn delete(&self, key: &str) {
        let version_id = self.version_id();
        self.keys
            .lock()
            .unwrap()
            .entry(key.to_owned())
            .or_default()
            .push(Stored {
                version_id,
                body: None,
                metadata: BTreeMap::new(),
            });
    }

    /// Removes one version for good (a DELETE with its version id: refused under Object Lock).
    pub fn remove_version(&self, key: &str, version_id: &str) {
        let mut keys = self.keys.lock().unwrap();
        if let Some(versions) = keys.get_mut(key) {
            versions.retain(|v| v.version_id != version_id);
            if versions.is_empty() {
                keys.remove(key);
            }
        }
    }

    /// The current version's id and body, if the key has one.
    pub fn current(&self, key: &str) -> Option<(String, Vec<u8>)> {
        let keys = self.keys.lock().unwrap();
        let last = keys.get(key)?.last()?;
        Some((last.version_id.clone(), last.body.clone()?))
    }

    /// The current version's user metadata.
    pub fn current_metadata(&self, key: &str) -> BTreeMap<String, String> {
        let keys = self.keys.lock().unwrap();
        keys.get(key)
            .and_then(|v| v.last())
            .map(|v| v.metadata.clone())
            .unwrap_or_default()
    }
}

impl Archive for MemoryArchive {
    fn versions(&self, prefix: String) -> BoxStream<'_, Result<Entry, TrailError>> {
        let keys = self.keys.lock().unwrap();
        let mut entries = Vec::new();
        for (key, stored) in keys.range(prefix.clone()..) {
            if !key.starts_with(&prefix) {
                break;
            }
            let latest = stored.len() - 1;
            let entry = |(i, s): (usize, &Stored)| Entry {
                key: key.clone(),
                version_id: s.version_id.clone(),
                latest: i == latest,
                delete_marker: s.body.is_none(),
            };
            let newest_first: Vec<Entry> = stored.iter().enumerate().rev().map(entry).collect();
            entries.extend(newest_first.iter().filter(|e| !e.delete_marker).cloned());
            entries.extend(newest_first.into_iter().filter(|e| e.delete_marker));
        }
        futures::stream::iter(entries.into_iter().map(Ok)).boxed()
    }

    async fn get(&self, key: &str, version_id: &str) -> Result<Option<Fetched>, TrailError> {
        let keys = self.keys.lock().unwrap();
        let Some(stored) = keys
            .get(key)
            .and_then(|v| v.iter().find(|s| s.version_id == version_id))
        else {
            return Ok(None);
        };
        let Some(body) = stored.body.clone() else {
            return Ok(None); // S3 answers a delete marker's version with 405: not an object
        };
        Ok(Some(Fetched {
            metadata: stored.metadata.clone(),
            body: chunked(body, 7),
        }))
    }
}

/// A P-256 key that signs as KMS's ECDSA_SHA_256 with MessageType RAW does.
pub struct TestKey {
    arn: String,
    pair: EcdsaKeyPair,
}

impl TestKey {
    pub fn new(arn: &str) -> Self {
        Self {
            arn: arn.to_owned(),
            pair: EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING).unwrap(),
        }
    }

    pub fn arn(&self) -> &str {
        &self.arn
    }

    /// What KMS's GetPublicKey says of it.
    pub fn info(&self) -> PublicKeyInfo {
        let der: PublicKeyX509Der = self.pair.public_key().as_der().unwrap();
        PublicKeyInfo {
            arn: self.arn.clone(),
            key_spec: KEY_SPEC.to_owned(),
            signing_algorithms: vec![SIGNING_ALGORITHM.to_owned()],
            der: der.as_ref().to_vec(),
        }
    }

    /// The DER signature of SHA-256(`message`).
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        self.pair
            .sign(&SystemRandom::new(), message)
            .unwrap()
            .as_ref()
            .to_vec()
    }
}

impl KeySource for TestKey {
    async fn public_key(&self) -> Result<PublicKeyInfo, TrailError> {
        Ok(self.info())
    }
}

/// A table.
#[derive(Debug, Default)]
pub struct MemoryTable {
    pub items: Mutex<BTreeMap<(String, String), TableItem>>,
}

impl MemoryTable {
    pub fn put(&self, item: TableItem) {
        self.items
            .lock()
            .unwrap()
            .insert((item.message_id.clone(), item.audit_time.clone()), item);
    }

    pub fn remove(&self, message_id: &str, audit_time: &str) {
        self.items
            .lock()
            .unwrap()
            .remove(&(message_id.to_owned(), audit_time.to_owned()));
    }

    pub fn get_item(&self, message_id: &str, audit_time: &str) -> Option<TableItem> {
        self.items
            .lock()
            .unwrap()
            .get(&(message_id.to_owned(), audit_time.to_owned()))
            .cloned()
    }
}

impl Table for MemoryTable {
    fn items(&self, range: &TimeRange) -> BoxStream<'static, Result<TableItem, TrailError>> {
        let mut items: Vec<TableItem> = self
            .items
            .lock()
            .unwrap()
            .values()
            .filter(|i| i.audit_time >= range.from && i.audit_time <= range.to)
            .cloned()
            .collect();
        items.sort_by(|a, b| (&a.audit_time, &a.message_id).cmp(&(&b.audit_time, &b.message_id)));
        futures::stream::iter(items.into_iter().map(Ok)).boxed()
    }

    async fn get(&self, keys: Vec<(String, String)>) -> Result<Vec<TableItem>, TrailError> {
        assert!(keys.len() <= 100, "BatchGetItem takes at most 100 keys");
        let unique: std::collections::BTreeSet<_> = keys.iter().collect();
        assert_eq!(unique.len(), keys.len(), "BatchGetItem refuses a key twice");
        let items = self.items.lock().unwrap();
        Ok(keys.iter().filter_map(|k| items.get(k).cloned()).collect())
    }
}

/// Lines gzip-compressed as the archiver writes them.
pub fn gzip_lines(lines: &[String]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    for line in lines {
        encoder.write_all(line.as_bytes()).unwrap();
        encoder.write_all(b"\n").unwrap();
    }
    encoder.finish().unwrap()
}

/// Writes an archive object of `kind` at `at` as the archiver does; its key.
pub fn write_object(
    archive: &MemoryArchive,
    kind: ObjectKind,
    at: DateTime<Utc>,
    length: PeriodLength,
    sequence: u64,
    lines: &[String],
) -> String {
    let key = ObjectKey::new(kind, at, length, &sequence.to_string(), 0)
        .unwrap()
        .to_string();
    let events = lines.len().to_string();
    archive.put(&key, gzip_lines(lines), &[("events", events.as_str())]);
    key
}

/// The digest of `period` as the archiver seals it: every current object in the period's place
/// listed with its version, SHA-256, events and size, linked to `previous`, signed by `key`.
pub fn seal(
    archive: &MemoryArchive,
    bucket: &str,
    period: Period,
    previous: Option<&SealedDigest>,
    key: &TestKey,
) -> SealedDigest {
    let mut objects = Vec::new();
    for prefix in object_prefixes(period) {
        let keys: Vec<String> = archive
            .keys
            .lock()
            .unwrap()
            .keys()
            .filter(|k| k.starts_with(&prefix))
            .cloned()
            .collect();
        for object in keys {
            let Some((version_id, body)) = archive.current(&object) else {
                continue;
            };
            let events = archive
                .current_metadata(&object)
                .get("events")
                .and_then(|e| e.parse().ok())
                .unwrap_or(0);
            objects.push(ListedObject {
                key: object,
                version_id,
                sha256: hex(&sha256(&body)),
                events,
                size: body.len() as u64,
            });
        }
    }
    let digest = Digest::new(
        bucket,
        period,
        DateTime::from_timestamp(period.sealable_at(), 0).unwrap(),
        objects,
        previous.map(SealedDigest::as_previous),
        key.arn(),
    );
    put_digest(archive, period, &digest, key)
}

/// Stores `digest` as the digest of `period`, signed by `key`.
pub fn put_digest(
    archive: &MemoryArchive,
    period: Period,
    digest: &Digest,
    key: &TestKey,
) -> SealedDigest {
    let digest_key = digest_key(period);
    let bytes = digest.to_bytes();
    let body_sha256 = sha256(&bytes);
    let signature = key.sign(signing_string_of(digest, &digest_key, &body_sha256).as_bytes());
    archive.put(
        &digest_key,
        bytes,
        &[(SIGNATURE_METADATA, hex(&signature).as_str())],
    );
    SealedDigest {
        key: digest_key,
        sha256: body_sha256,
        signature,
    }
}
