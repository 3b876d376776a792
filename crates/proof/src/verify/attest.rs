//! Owns verify's check of the receiver's attestations (docs/archive.md "Items attested at
//! birth"): the attestation key's public key as KMS describes it, checked once; each archived
//! trail line and, with `--table`, each item of the table in the range checked with
//! `audit_model::attest::check_with`, certificates and batch signatures remembered (bounded) so
//! that the lines of one batch cost one signature check; one `item not attested` per item.
//! Must not know KMS's client, S3 or the table's reader.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use audit_model::attest::{CheckCache, NotAttested, ReceiverKey, check_with};
use audit_model::digest::{ProblemKind, SIGNING_ALGORITHM};
use audit_model::keys::{PARTITION_KEY, SORT_KEY};
use aws_lc_rs::signature::{ECDSA_P256_SHA256_ASN1, ParsedPublicKey};
use serde_json::{Map, Value};

use super::key::KEY_SPEC;
use super::ports::{KeySource, PublicKeyInfo};
use super::report::Problem;
use super::table::key_hash;
use crate::Error;

/// Certificates (one per receiver run) and batch signatures remembered at most: a few MB.
pub const CACHE_ENTRIES: usize = 4096;

/// The most items reported as not attested that are remembered (so that each is reported once):
/// beyond, an item may be reported twice (from the archive and from the table), never missed.
pub const REPORTED_KEYS: usize = 1 << 20;

/// One line that is not attested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unattested {
    pub message_id: String,
    pub audit_time: String,
    pub why: NotAttested,
}

/// The receiver's attestation key, trusted, and what checking with it remembers.
#[derive(Debug)]
pub struct Attestations {
    arn: String,
    key: ReceiverKey,
    cache: Mutex<CheckCache>,
    checked: AtomicU64,
    reported: Mutex<HashSet<u128>>,
}

impl Attestations {
    /// The key KMS described (`ATTESTATION_KEY_ID`), if it is an ECDSA P-256 signing key.
    pub fn new(info: PublicKeyInfo) -> Result<Self, Error> {
        let unsuitable = |detail: String| Error::AttestationKey {
            key: info.arn.clone(),
            denied: false,
            detail,
        };
        if info.key_spec != KEY_SPEC {
            return Err(unsuitable(format!(
                "its key spec is {}, not {KEY_SPEC}",
                info.key_spec
            )));
        }
        if !info
            .signing_algorithms
            .iter()
            .any(|a| a == SIGNING_ALGORITHM)
        {
            return Err(unsuitable(format!(
                "it does not sign with {SIGNING_ALGORITHM}"
            )));
        }
        ParsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &info.der)
            .map_err(|e| unsuitable(format!("its public key is not a P-256 key ({e})")))?;
        Ok(Self {
            key: ReceiverKey::from_der(&info.der),
            arn: info.arn,
            cache: Mutex::new(CheckCache::new(CACHE_ENTRIES)),
            checked: AtomicU64::new(0),
            reported: Mutex::new(HashSet::new()),
        })
    }

    /// The key fetched once from `source` (KMS GetPublicKey), its errors said as the attestation
    /// key's.
    pub async fn fetch(source: &impl KeySource, key_id: &str) -> Result<Self, Error> {
        let info = source.public_key().await.map_err(|error| {
            let (denied, detail) = match error {
                Error::KeyNotFound { at, .. } => (false, format!("not found at {at}")),
                Error::KeyDenied { error, .. } => {
                    (true, format!("not allowed to read its public key: {error}"))
                }
                other => (false, other.to_string()),
            };
            Error::AttestationKey {
                key: key_id.to_owned(),
                denied,
                detail,
            }
        })?;
        Self::new(info)
    }

    /// The key's ARN, as KMS answered (printed with verify's verdict).
    pub fn arn(&self) -> &str {
        &self.arn
    }

    /// Lines and items checked so far.
    pub fn checked(&self) -> u64 {
        self.checked.load(Ordering::Relaxed)
    }

    /// One item's line (plain JSON, every attribute) checked; `None` when it is attested or is
    /// not an item's line.
    pub fn check_line(&self, line: &[u8]) -> Option<Unattested> {
        let fields: Map<String, Value> = serde_json::from_slice(line).ok()?;
        let text = |name: &str| fields.get(name).and_then(Value::as_str).map(str::to_owned);
        let (message_id, audit_time) = (text(PARTITION_KEY)?, text(SORT_KEY)?);
        self.checked.fetch_add(1, Ordering::Relaxed);
        let verdict = {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            check_with(&fields, &self.key, &mut cache)
        };
        verdict.err().map(|why| Unattested {
            message_id,
            audit_time,
            why,
        })
    }

    /// The problem of an item not attested, `where` it was read; `None` when that item was
    /// reported already.
    pub fn problem(&self, unattested: &Unattested, place: &str) -> Option<Problem> {
        let mut reported = self.reported.lock().unwrap_or_else(|p| p.into_inner());
        if reported.len() >= REPORTED_KEYS {
            reported.clear();
        }
        reported
            .insert(key_hash(&unattested.message_id, &unattested.audit_time))
            .then(|| {
                Problem::new(
                    ProblemKind::ItemNotAttested,
                    &unattested.message_id,
                    format!(
                        "auditTime {}: {} ({place}); the receiver did not write it as it is: an item put in the table behind the function, or changed",
                        unattested.audit_time, unattested.why
                    ),
                )
            })
    }
}
