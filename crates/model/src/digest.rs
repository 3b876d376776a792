//! Owns the digest's format, shared by the archiver (which seals and signs digests) and
//! `auditctl verify` (which checks them): the digest key, the JSON body, the exact string that
//! is signed, the chain's link rule and the problem kinds. Must not know S3, KMS or any client.
//!
//! A digest is one object per period `[k·P, (k+1)·P)` at
//! `digest/dt=YYYY-MM-DD/hour=HH/p<periodStart>.json` (the UTC hour of the period's start). Its
//! body is compact JSON ([`Digest`]); the object's SHA-256 is that of its bytes as stored. It is
//! signed by KMS (`ECDSA_SHA_256`, `MessageType` `RAW`: KMS hashes the message with SHA-256 and
//! signs the hash) over the [`signing_string`], five lines joined by `\n` with no trailing newline:
//!
//! ```text
//! audit-receiver-digest/1
//! <periodEnd, RFC 3339 UTC, seconds>
//! <bucket>/<digest key>
//! <hex SHA-256 of the digest object's bytes>
//! <the previous digest's signature, hex of its DER, or "null" for the chain's first digest>
//! ```
//!
//! The signature (DER, hex) is stored with the object as its user metadata `signature`
//! (`x-amz-meta-signature`), as CloudTrail stores a digest file's. Anyone can check it with
//! `openssl dgst -sha256 -verify key.pem -signature sig.der signing-string` and the key's public
//! key from KMS (docs/operations.md "Proving the trail").

use std::fmt;

use chrono::{DateTime, Datelike, Timelike, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::archive::{Period, PeriodLength};

/// Where digests live.
pub const DIGEST_PREFIX: &str = "digest/";
/// The suffix of a digest's key.
pub const DIGEST_SUFFIX: &str = ".json";
/// The format named in every digest and on the first line of its signing string.
pub const DIGEST_FORMAT: &str = "audit-receiver-digest/1";
/// The KMS signing algorithm (ECC_NIST_P256 key).
pub const SIGNING_ALGORITHM: &str = "ECDSA_SHA_256";
/// The user metadata that holds the signature (hex of the DER encoding).
pub const SIGNATURE_METADATA: &str = "signature";
/// The user metadata that names the signing algorithm.
pub const SIGNATURE_ALGORITHM_METADATA: &str = "signature-algorithm";
/// What the signing string says in place of the chain's first digest's previous signature.
pub const NO_PREVIOUS: &str = "null";

/// The key of the digest of `period`.
pub fn digest_key(period: Period) -> String {
    let start = DateTime::from_timestamp(period.start, 0).unwrap_or_default();
    format!(
        "{DIGEST_PREFIX}dt={:04}-{:02}-{:02}/hour={:02}/p{}{DIGEST_SUFFIX}",
        start.year(),
        start.month(),
        start.day(),
        start.hour(),
        period.start
    )
}

/// How many alternate names a period's digest may take when its name (and the alternates before)
/// were taken by something that is not a digest the key signed (`p<start>-1.json` …).
pub const MAX_DIGEST_ALTERNATES: u32 = 9;

/// The key of the digest of `period` at its `alternate`-th alternate name: [`digest_key`] for 0,
/// `…/p<start>-<alternate>.json` after it. The sealer moves on to the next when a name is taken
/// by anything that is not this period's digest, signed by the key; the next period's digest
/// links to the key used, and `auditctl verify` follows it.
pub fn digest_key_alternate(period: Period, alternate: u32) -> String {
    let key = digest_key(period);
    if alternate == 0 {
        return key;
    }
    let stem = key.strip_suffix(DIGEST_SUFFIX).unwrap_or(&key);
    format!("{stem}-{alternate}{DIGEST_SUFFIX}")
}

/// The period and the alternate a digest key names, when `key` is exactly
/// [`digest_key_alternate`] of a period of `length` (alternate 0 to [`MAX_DIGEST_ALTERNATES`]).
pub fn parse_any_digest_key(key: &str, length: PeriodLength) -> Option<(Period, u32)> {
    if let Some(period) = parse_digest_key(key, length) {
        return Some((period, 0));
    }
    let stem = key.strip_suffix(DIGEST_SUFFIX)?;
    let (stem, alternate) = stem.rsplit_once('-')?;
    let alternate: u32 = alternate.parse().ok()?;
    if !(1..=MAX_DIGEST_ALTERNATES).contains(&alternate) {
        return None;
    }
    let period = parse_digest_key(&format!("{stem}{DIGEST_SUFFIX}"), length)?;
    (digest_key_alternate(period, alternate) == key).then_some((period, alternate))
}

/// The period a digest key names, when `key` is exactly [`digest_key`] of a period of `length`.
pub fn parse_digest_key(key: &str, length: PeriodLength) -> Option<Period> {
    let start: i64 = key
        .rsplit_once("/p")?
        .1
        .strip_suffix(DIGEST_SUFFIX)?
        .parse()
        .ok()?;
    let period = Period { start, length };
    (start.rem_euclid(i64::from(length.seconds())) == 0 && digest_key(period) == key)
        .then_some(period)
}

/// One archive object as its period's digest lists it: the version the archiver wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedObject {
    pub key: String,
    pub version_id: String,
    /// Hex SHA-256 of the object's bytes as stored (gzip).
    pub sha256: String,
    /// Events (JSON lines) in the object.
    pub events: u64,
    pub size: u64,
    /// The run marker (`state/…/a<n>.json`) that attests the object: it lists this key with this
    /// SHA-256. Empty in digests sealed before markers carried SHA-256.
    #[serde(default)]
    pub marker: String,
}

/// Something found in a period's place that no marker attests with matching bytes (planted,
/// squatted, unreadable, or an attempt's object that a later attempt declared never to land).
/// Listed so that it is on record, never counted as the trail; `auditctl verify` reports each
/// one as `object not attested`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnattestedObject {
    pub key: String,
    pub version_id: String,
    /// Hex SHA-256 of the version's bytes; empty when S3 kept none and it could not be read.
    pub sha256: String,
    pub size: u64,
    /// Why it is not the trail, for people (`no marker names it`, `its marker lists another
    /// SHA-256`, `not readable`, …).
    pub reason: String,
}

/// An archive object found in an already sealed period's place (it landed after its period was
/// sealed), and what the sealer did about it: its events archived again in the digest's own
/// period (`archivedAs`, the new object's key), or nothing because a void marker says its events
/// were archived anew already (`archivedAs` empty). Each one raises `LateObject`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LateObject {
    pub key: String,
    pub version_id: String,
    pub sha256: String,
    pub events: u64,
    /// The key of the object that holds its events again, or empty when voided.
    pub archived_as: String,
}

/// The transparency log's tree after a period: its size (leaves) and root hash (hex), and the
/// key of the period's checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeHead {
    pub size: u64,
    pub root: String,
    pub checkpoint: String,
}

/// The link to the previous period's digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreviousDigest {
    pub key: String,
    /// Hex SHA-256 of the previous digest's bytes.
    pub sha256: String,
    /// The previous digest's signature (hex of DER).
    pub signature: String,
}

/// A digest's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Digest {
    pub format: String,
    pub bucket: String,
    /// RFC 3339, UTC, whole seconds.
    pub period_start: String,
    pub period_end: String,
    pub period_seconds: u32,
    /// When the archiver sealed the period.
    pub sealed_at: String,
    /// The period's objects under `trail/` and `tamper/`, by key.
    pub objects: Vec<ListedObject>,
    /// The sum of the objects' events.
    pub events: u64,
    /// What else sat in the period's place (by key): never part of the trail.
    #[serde(default)]
    pub unattested: Vec<UnattestedObject>,
    /// Objects of earlier, sealed periods found since their digest was written (by key).
    #[serde(default)]
    pub late: Vec<LateObject>,
    /// The transparency log after this period's leaves (docs/archive.md "The transparency
    /// log"): absent in digests sealed before the log began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<TreeHead>,
    /// `None` for the chain's first digest.
    pub previous: Option<PreviousDigest>,
    /// The KMS key that signed it (its ARN).
    pub key_id: String,
    pub signing_algorithm: String,
}

impl Digest {
    /// A new digest of `period` listing `objects` (sorted here by key).
    pub fn new(
        bucket: &str,
        period: Period,
        sealed_at: DateTime<Utc>,
        mut objects: Vec<ListedObject>,
        previous: Option<PreviousDigest>,
        key_id: &str,
    ) -> Self {
        objects.sort_by(|a, b| a.key.cmp(&b.key));
        Self {
            format: DIGEST_FORMAT.to_owned(),
            bucket: bucket.to_owned(),
            period_start: rfc3339_seconds(period.start),
            period_end: rfc3339_seconds(period.end()),
            period_seconds: period.length.seconds(),
            sealed_at: sealed_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            events: objects.iter().map(|o| o.events).sum(),
            objects,
            unattested: Vec::new(),
            late: Vec::new(),
            tree: None,
            previous,
            key_id: key_id.to_owned(),
            signing_algorithm: SIGNING_ALGORITHM.to_owned(),
        }
    }

    /// The bytes stored (compact JSON, fields in this struct's order).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a digest serialises")
    }

    /// Reads a digest's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(bytes).map_err(|e| format!("not a digest: {e}"))
    }

    /// The period the digest says it covers, when its fields agree with each other.
    pub fn period(&self) -> Option<Period> {
        let length = PeriodLength::new(self.period_seconds)?;
        let start = DateTime::parse_from_rfc3339(&self.period_start)
            .ok()?
            .timestamp();
        let period = Period { start, length };
        (rfc3339_seconds(start) == self.period_start
            && rfc3339_seconds(period.end()) == self.period_end
            && start.rem_euclid(i64::from(length.seconds())) == 0)
            .then_some(period)
    }
}

/// A stored digest: its key, its bytes' SHA-256 and its signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedDigest {
    pub key: String,
    pub sha256: [u8; 32],
    /// DER.
    pub signature: Vec<u8>,
}

impl SealedDigest {
    /// The link the next period's digest must carry.
    pub fn as_previous(&self) -> PreviousDigest {
        PreviousDigest {
            key: self.key.clone(),
            sha256: hex(&self.sha256),
            signature: hex(&self.signature),
        }
    }
}

/// The exact bytes that are signed (module docs). `previous_signature` is hex, or `None` for the
/// chain's first digest.
pub fn signing_string(
    period_end: &str,
    bucket: &str,
    digest_key: &str,
    body_sha256: &[u8; 32],
    previous_signature: Option<&str>,
) -> String {
    format!(
        "{DIGEST_FORMAT}\n{period_end}\n{bucket}/{digest_key}\n{}\n{}",
        hex(body_sha256),
        previous_signature.unwrap_or(NO_PREVIOUS)
    )
}

/// The signing string of a stored digest (from what its body says and its bytes' hash).
pub fn signing_string_of(digest: &Digest, key: &str, body_sha256: &[u8; 32]) -> String {
    signing_string(
        &digest.period_end,
        &digest.bucket,
        key,
        body_sha256,
        digest.previous.as_ref().map(|p| p.signature.as_str()),
    )
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// Bytes from hex (either case); `None` for anything else.
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Why a digest does not follow the one before it (`None` when it does). `before` is the
/// previous period's stored digest, or `None` when the previous period has none (the chain's
/// first digest, or a digest missing: reported on its own).
pub fn chain_break(digest: &Digest, key: &str, before: Option<&SealedDigest>) -> Option<String> {
    let period = digest.period()?;
    let expected_key = digest_key(Period {
        start: period.start - i64::from(period.length.seconds()),
        length: period.length,
    });
    match (&digest.previous, before) {
        (None, None) => None,
        (None, Some(before)) => Some(format!(
            "{key} starts a new chain, but the previous period's digest {} exists",
            before.key
        )),
        (Some(link), _) if link.key != expected_key => Some(format!(
            "{key} links to {}, not to the previous period's digest {expected_key}",
            link.key
        )),
        (Some(_), None) => None,
        (Some(link), Some(before)) => {
            if link.sha256 != hex(&before.sha256) {
                Some(format!(
                    "{key} names a previous digest hash that is not {}'s",
                    before.key
                ))
            } else if link.signature != hex(&before.signature) {
                Some(format!(
                    "{key} names a previous signature that is not {}'s",
                    before.key
                ))
            } else {
                None
            }
        }
    }
}

/// What `auditctl verify` can find wrong, each printed with the key or `messageId` it concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProblemKind {
    DigestMissing,
    ChainBroken,
    SignatureInvalid,
    ObjectChanged,
    ObjectMissing,
    ObjectNotInDigest,
    ObjectNotAttested,
    EventDuplicated,
    TrailNotSealed,
    ItemChanged,
    ItemModified,
    ItemMissing,
    ItemNotArchived,
    ItemNotAttested,
    CheckpointInconsistent,
    LeafMissing,
    CosignatureMissing,
    LogObjectPlanted,
}

impl ProblemKind {
    pub const ALL: [Self; 18] = [
        Self::DigestMissing,
        Self::ChainBroken,
        Self::SignatureInvalid,
        Self::ObjectChanged,
        Self::ObjectMissing,
        Self::ObjectNotInDigest,
        Self::ObjectNotAttested,
        Self::EventDuplicated,
        Self::TrailNotSealed,
        Self::ItemChanged,
        Self::ItemModified,
        Self::ItemMissing,
        Self::ItemNotArchived,
        Self::ItemNotAttested,
        Self::CheckpointInconsistent,
        Self::LeafMissing,
        Self::CosignatureMissing,
        Self::LogObjectPlanted,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::DigestMissing => "digest missing",
            Self::ChainBroken => "chain broken",
            Self::SignatureInvalid => "signature invalid",
            Self::ObjectChanged => "object changed",
            Self::ObjectMissing => "object missing",
            Self::ObjectNotInDigest => "object not in digest",
            Self::ObjectNotAttested => "object not attested",
            Self::EventDuplicated => "event duplicated",
            Self::TrailNotSealed => "trail not sealed",
            Self::ItemChanged => "item changed",
            Self::ItemModified => "item modified",
            Self::ItemMissing => "item missing",
            Self::ItemNotArchived => "item not archived",
            Self::ItemNotAttested => "item not attested",
            Self::CheckpointInconsistent => "checkpoint inconsistent",
            Self::LeafMissing => "leaf missing",
            Self::CosignatureMissing => "cosignature missing",
            Self::LogObjectPlanted => "log object planted",
        }
    }
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn rfc3339_seconds(seconds: i64) -> String {
    DateTime::from_timestamp(seconds, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hour() -> PeriodLength {
        PeriodLength::default()
    }

    fn period(start: i64) -> Period {
        Period {
            start,
            length: hour(),
        }
    }

    fn sealed(d: &Digest, key: &str, signature: &[u8]) -> SealedDigest {
        SealedDigest {
            key: key.to_owned(),
            sha256: sha256(&d.to_bytes()),
            signature: signature.to_vec(),
        }
    }

    fn digest(start: i64, previous: Option<PreviousDigest>) -> Digest {
        Digest::new(
            "b",
            period(start),
            DateTime::from_timestamp(start + 3700, 0).unwrap(),
            vec![],
            previous,
            "arn:aws:kms:us-east-1:123456789012:key/k",
        )
    }

    #[test]
    fn alternate_digest_keys_read_back_and_nothing_else_does() {
        let p = period(1_795_341_600);
        let canonical = digest_key(p);
        assert_eq!(digest_key_alternate(p, 0), canonical);
        let first = digest_key_alternate(p, 1);
        assert_eq!(first, "digest/dt=2026-11-22/hour=10/p1795341600-1.json");
        assert_eq!(parse_any_digest_key(&canonical, hour()), Some((p, 0)));
        assert_eq!(parse_any_digest_key(&first, hour()), Some((p, 1)));
        let last = digest_key_alternate(p, MAX_DIGEST_ALTERNATES);
        assert_eq!(
            parse_any_digest_key(&last, hour()),
            Some((p, MAX_DIGEST_ALTERNATES))
        );
        for wrong in [
            "digest/dt=2026-11-22/hour=10/p1795341600-0.json",
            "digest/dt=2026-11-22/hour=10/p1795341600-01.json",
            "digest/dt=2026-11-22/hour=10/p1795341600-10.json",
            "digest/dt=2026-11-22/hour=10/p1795341600--1.json",
            "digest/dt=2026-11-22/hour=11/p1795341600-1.json",
            "digest/dt=2026-11-22/hour=10/p1795341600-x.json",
        ] {
            assert_eq!(parse_any_digest_key(wrong, hour()), None, "{wrong}");
        }
        assert_eq!(parse_digest_key(&first, hour()), None);
    }

    #[test]
    fn digest_keys_name_the_periods_start_hour_and_read_back() {
        let p = period(1_795_341_600);
        let key = digest_key(p);
        assert_eq!(key, "digest/dt=2026-11-22/hour=10/p1795341600.json");
        assert_eq!(parse_digest_key(&key, hour()), Some(p));
        assert_eq!(
            parse_digest_key("digest/dt=2026-11-22/hour=11/p1795341600.json", hour()),
            None
        );
        assert_eq!(
            parse_digest_key("digest/dt=2026-11-22/hour=10/p1795341601.json", hour()),
            None
        );
        // Keys sort in period order (the seal finds the newest with one listing).
        let later = digest_key(period(1_795_341_600 + 3600 * 30));
        assert!(later > key);
    }

    #[test]
    fn the_body_reads_back_and_names_its_period() {
        let d = Digest::new(
            "bucket",
            period(1_795_341_600),
            DateTime::from_timestamp(1_795_345_231, 0).unwrap(),
            vec![
                ListedObject {
                    key: "trail/b".into(),
                    version_id: "2".into(),
                    sha256: hex(&[1; 32]),
                    events: 3,
                    size: 10,
                    marker: String::new(),
                },
                ListedObject {
                    key: "trail/a".into(),
                    version_id: "1".into(),
                    sha256: hex(&[2; 32]),
                    events: 4,
                    size: 11,
                    marker: String::new(),
                },
            ],
            None,
            "k",
        );
        assert_eq!(d.objects[0].key, "trail/a");
        assert_eq!(d.events, 7);
        assert_eq!(d.period_start, "2026-11-22T10:00:00Z");
        assert_eq!(d.period_end, "2026-11-22T11:00:00Z");
        let back = Digest::parse(&d.to_bytes()).unwrap();
        assert_eq!(back, d);
        assert_eq!(back.period(), Some(period(1_795_341_600)));
        let text = String::from_utf8(d.to_bytes()).unwrap();
        assert!(text.starts_with(r#"{"format":"audit-receiver-digest/1","bucket":"bucket","periodStart":"2026-11-22T10:00:00Z""#), "{text}");
        assert!(text.contains(r#""previous":null"#));
    }

    #[test]
    fn the_signing_string_is_five_lines_without_a_trailing_newline() {
        let s = signing_string(
            "2026-11-22T11:00:00Z",
            "bucket",
            "digest/dt=2026-11-22/hour=10/p1795341600.json",
            &[0xab; 32],
            None,
        );
        assert_eq!(
            s,
            format!(
                "audit-receiver-digest/1\n2026-11-22T11:00:00Z\nbucket/digest/dt=2026-11-22/hour=10/p1795341600.json\n{}\nnull",
                "ab".repeat(32)
            )
        );
        let chained = signing_string("e", "b", "k", &[0; 32], Some("3045"));
        assert!(chained.ends_with("\n3045"));
    }

    #[test]
    fn a_digest_links_to_the_previous_periods_hash_and_signature() {
        let first = digest(1_795_341_600, None);
        let first_key = digest_key(period(1_795_341_600));
        let first_sealed = sealed(&first, &first_key, b"sig-1");
        let second = digest(1_795_345_200, Some(first_sealed.as_previous()));
        let second_key = digest_key(period(1_795_345_200));
        assert_eq!(chain_break(&first, &first_key, None), None);
        assert_eq!(chain_break(&second, &second_key, Some(&first_sealed)), None);
        // The previous one missing is reported as such, not as a broken link.
        assert_eq!(chain_break(&second, &second_key, None), None);

        // Another previous digest (altered, or re-signed): broken.
        let altered = SealedDigest {
            sha256: [9; 32],
            ..first_sealed.clone()
        };
        assert!(
            chain_break(&second, &second_key, Some(&altered))
                .unwrap()
                .contains("hash")
        );
        let resigned = SealedDigest {
            signature: b"other".to_vec(),
            ..first_sealed.clone()
        };
        assert!(
            chain_break(&second, &second_key, Some(&resigned))
                .unwrap()
                .contains("signature")
        );
        // A new chain started while the previous period has a digest.
        let restarted = digest(1_795_345_200, None);
        assert!(chain_break(&restarted, &second_key, Some(&first_sealed)).is_some());
        // A link to a period that is not the one before.
        let skipping = digest(
            1_795_348_800,
            Some(PreviousDigest {
                key: first_key.clone(),
                ..first_sealed.as_previous()
            }),
        );
        assert!(
            chain_break(&skipping, &digest_key(period(1_795_348_800)), None)
                .unwrap()
                .contains("not to the previous period's digest")
        );
    }

    #[test]
    fn hex_round_trips() {
        let bytes = [0u8, 1, 0x7f, 0x80, 0xff];
        assert_eq!(hex(&bytes), "00017f80ff");
        assert_eq!(unhex("00017F80ff").unwrap(), bytes);
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn problem_kinds_print_as_spec_names_them() {
        let names: Vec<_> = ProblemKind::ALL.iter().map(|k| k.to_string()).collect();
        assert_eq!(
            names,
            [
                "digest missing",
                "chain broken",
                "signature invalid",
                "object changed",
                "object missing",
                "object not in digest",
                "object not attested",
                "event duplicated",
                "trail not sealed",
                "item changed",
                "item modified",
                "item missing",
                "item not archived",
                "item not attested",
                "checkpoint inconsistent",
                "leaf missing",
                "cosignature missing",
                "log object planted"
            ]
        );
    }
}
