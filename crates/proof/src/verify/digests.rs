//! Owns one period's digest as `verify` reads it: its versions in the bucket (the sealed one, any
//! written over it, a delete marker hiding it), its signature, its fields, and its link to the
//! previous period's digest; and where the chain starts. Must not know the period's objects or the
//! table.
//!
//! The archiver writes a digest once (`If-None-Match: *`) in a versioned bucket under Object Lock,
//! so the sealed version is the key's **oldest**: it is what is checked and what the next period
//! links to. A newer version is a digest written over it: reported (`signature invalid` when its
//! signature does not verify, `chain broken` when it does, two signed digests for one period); an
//! identical copy is not a change. A delete marker on top hides the digest from every reader:
//! `digest missing`, and the sealed version under it is still checked, so that one deletion is
//! one problem and not a break of the chain too.
//!
//! A period's digest may sit at an alternate name (`…/p<start>-<n>.json`, `digest_key_alternate`)
//! when its name was taken before the sealer got there: every name of the period is read, the one
//! validly signed is the period's digest, and every other is reported. The next period's link
//! names the key it follows.
//!
//! The chain starts at the first digest in key order whose signature verifies with the key's
//! public key (and whose fields are its period's and this bucket's): a key planted before it is
//! reported, never taken as the start.

use std::collections::BTreeMap;

use audit_model::archive::{Period, PeriodLength, object_prefixes};
use audit_model::digest::ProblemKind;
use audit_model::digest::{
    DIGEST_FORMAT, DIGEST_PREFIX, DIGEST_SUFFIX, Digest, SIGNATURE_METADATA, SIGNING_ALGORITHM,
    SealedDigest, digest_key, hex, parse_any_digest_key, sha256, signing_string_of, unhex,
};
use futures::TryStreamExt;

use super::key::TrustedKey;
use super::ports::{Archive, Entry};
use super::report::Problem;
use crate::Error;

/// A digest as the bucket holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    pub key: String,
    /// Which of its period's names it is at (0: `digest_key`).
    pub alternate: u32,
    /// The sealed (oldest) version.
    pub version_id: String,
    pub bytes: Vec<u8>,
    /// Its user metadata `signature` (hex of DER), when there is one.
    pub signature: Option<String>,
    /// A delete marker is the key's current entry.
    pub hidden: bool,
    /// Versions written after the sealed one, newest first.
    pub newer: Vec<String>,
}

impl Loaded {
    /// The link the next period's digest must carry to this one.
    pub fn sealed(&self) -> SealedDigest {
        let signature = self.signature.as_deref().unwrap_or_default();
        SealedDigest {
            key: self.key.clone(),
            sha256: sha256(&self.bytes),
            // Not hex: kept as its bytes' hex would not match, so the link check fails on it.
            signature: unhex(signature).unwrap_or_else(|| signature.as_bytes().to_vec()),
        }
    }
}

/// The digest at `key` from its listed entries (versions and delete markers, newest first): its
/// sealed version read. `None` when the key has no version (none was written, or it was removed
/// for good).
async fn loaded_from<A: Archive>(
    archive: &A,
    key: &str,
    alternate: u32,
    entries: &[Entry],
) -> Result<Option<Loaded>, Error> {
    let versions: Vec<&str> = entries
        .iter()
        .filter(|e| !e.delete_marker)
        .map(|e| e.version_id.as_str())
        .collect();
    let Some((sealed, newer)) = versions.split_last() else {
        return Ok(None);
    };
    let Some(fetched) = archive.get(key, sealed).await? else {
        return Ok(None);
    };
    let signature = fetched.metadata.get(SIGNATURE_METADATA).cloned();
    Ok(Some(Loaded {
        key: key.to_owned(),
        alternate,
        version_id: (*sealed).to_owned(),
        bytes: fetched.bytes().await?,
        signature,
        hidden: entries.iter().any(|e| e.delete_marker && e.latest),
        newer: newer.iter().map(|v| (*v).to_owned()).collect(),
    }))
}

/// The digest at `key`, when it has a version.
pub async fn load<A: Archive>(archive: &A, key: &str) -> Result<Option<Loaded>, Error> {
    let entries: Vec<_> = archive
        .versions(key.to_owned())
        .try_filter(|entry| std::future::ready(entry.key == key))
        .try_collect()
        .await?;
    loaded_from(archive, key, 0, &entries).await
}

/// Every digest of `period` the bucket holds, at its name and its alternate names (one listing),
/// in alternate order: the name first.
pub async fn load_period<A: Archive>(archive: &A, period: Period) -> Result<Vec<Loaded>, Error> {
    let key = digest_key(period);
    let stem = key.strip_suffix(DIGEST_SUFFIX).unwrap_or(&key).to_owned();
    let mut by_key: BTreeMap<u32, (String, Vec<Entry>)> = BTreeMap::new();
    let mut entries = archive.versions(stem);
    while let Some(entry) = entries.try_next().await? {
        if let Some((p, alternate)) = parse_any_digest_key(&entry.key, period.length)
            && p == period
        {
            by_key
                .entry(alternate)
                .or_insert_with(|| (entry.key.clone(), Vec::new()))
                .1
                .push(entry);
        }
    }
    drop(entries);
    let mut loaded = Vec::new();
    for (alternate, (key, entries)) in by_key {
        if let Some(digest) = loaded_from(archive, &key, alternate, &entries).await? {
            loaded.push(digest);
        }
    }
    Ok(loaded)
}

/// Where the chain starts: the first digest in key order that is validly signed by the digest
/// key and is its period's digest of this bucket, with the problems of every digest key before it
/// (planted, or not a digest: each `signature invalid` or `chain broken`, none the start).
#[derive(Debug)]
pub struct Start {
    pub first: Option<(Period, Loaded, Digest)>,
    pub problems: Vec<Problem>,
    /// Whether `digest/` holds any key at all (to tell a chain of another period length, or of
    /// another bucket, from none).
    pub any_key: bool,
}

/// Finds where the chain starts (`Start`), reading `digest/` in key order until a digest stands.
pub async fn chain_start<A: Archive>(
    archive: &A,
    key: &TrustedKey,
    bucket: &str,
    length: PeriodLength,
) -> Result<Start, Error> {
    let mut start = Start {
        first: None,
        problems: Vec::new(),
        any_key: false,
    };
    let mut entries = archive.versions(format!("{DIGEST_PREFIX}dt="));
    let mut group: Vec<Entry> = Vec::new();
    loop {
        let next = entries.try_next().await?;
        if let Some(entry) = &next {
            start.any_key = true;
            if group.first().is_none_or(|g| g.key == entry.key) {
                group.push(entry.clone());
                continue;
            }
        }
        // A key's entries are all read: judge it.
        let done = std::mem::take(&mut group);
        if let Some(first) = done.first()
            && let Some((period, alternate)) = parse_any_digest_key(&first.key, length)
            && let Some(loaded) = loaded_from(archive, &first.key, alternate, &done).await?
        {
            let judged = judge(&loaded, period, bucket, key);
            // Signed, but of another length: the digests are the archiver's, the flag is not.
            if let Some(digest) = &judged.digest
                && judged.signed
                && digest.period_seconds != length.seconds()
                && digest.bucket == bucket
            {
                return Err(Error::PeriodMismatch {
                    key: loaded.key,
                    found: digest.period_seconds,
                    given: length.seconds(),
                });
            }
            match judged.digest {
                Some(digest) if judged.problems.is_empty() => {
                    start.first = Some((period, loaded, digest));
                    return Ok(start);
                }
                _ => start
                    .problems
                    .extend(judged.problems.into_iter().map(|mut p| {
                        p.detail.push_str(
                            "; not the chain's start (only a digest the digest key signed is)",
                        );
                        p
                    })),
            }
        }
        match next {
            Some(entry) => group.push(entry),
            None => return Ok(start),
        }
    }
}

/// One digest's own standing: a digest at all, signed by the digest key, its fields those of its
/// key's period and this bucket.
pub struct Judged {
    pub digest: Option<Digest>,
    /// Its signature verifies (and names the digest key and algorithm).
    pub signed: bool,
    pub problems: Vec<Problem>,
}

/// Judges the sealed version of `loaded`, a digest of `period`, without its link.
pub fn judge(loaded: &Loaded, period: Period, bucket: &str, key: &TrustedKey) -> Judged {
    let mut problems = Vec::new();
    let digest = match Digest::parse(&loaded.bytes) {
        Ok(digest) => digest,
        Err(why) => {
            problems.push(Problem::new(
                ProblemKind::SignatureInvalid,
                &loaded.key,
                format!("version {}: {why}", loaded.version_id),
            ));
            return Judged {
                digest: None,
                signed: false,
                problems,
            };
        }
    };
    let unsigned = signature_problem(&digest, loaded, key);
    if let Some(why) = &unsigned {
        problems.push(Problem::new(
            ProblemKind::SignatureInvalid,
            &loaded.key,
            format!("version {}: {why}", loaded.version_id),
        ));
    }
    if let Some(why) = field_problem(&digest, period, bucket) {
        problems.push(Problem::new(ProblemKind::ChainBroken, &loaded.key, why));
    }
    Judged {
        digest: Some(digest),
        signed: unsigned.is_none(),
        problems,
    }
}

/// The previous period's digests as the next link is checked against them: each name of the
/// period the bucket holds, and whether it is validly signed.
#[derive(Debug, Clone, Default)]
pub struct Before {
    pub digests: Vec<(SealedDigest, bool)>,
}

impl Before {
    /// The previous period's digests as loaded and judged.
    pub fn of(loaded: &[Loaded], period: Period, bucket: &str, key: &TrustedKey) -> Self {
        Self {
            digests: loaded
                .iter()
                .map(|l| (l.sealed(), judge(l, period, bucket, key).signed))
                .collect(),
        }
    }

    fn signed(&self) -> Option<&SealedDigest> {
        self.digests.iter().find(|(_, s)| *s).map(|(d, _)| d)
    }
}

/// Why `digest` (at `key`) does not follow the previous period's digests, if it does not.
/// `before`: `None` when the previous period has no digest at all (missing, or before the
/// chain's start: reported on their own).
pub fn link_problem(digest: &Digest, key: &str, before: Option<&Before>) -> Option<String> {
    let period = digest.period()?;
    let previous = Period {
        start: period.start - i64::from(period.length.seconds()),
        length: period.length,
    };
    let before = before.filter(|b| !b.digests.is_empty());
    match (&digest.previous, before) {
        (None, None) => None,
        (None, Some(before)) => before.signed().map(|signed| {
            format!(
                "{key} starts a new chain, but the previous period's digest {} exists",
                signed.key
            )
        }),
        (Some(link), _)
            if parse_any_digest_key(&link.key, period.length).map(|(p, _)| p) != Some(previous) =>
        {
            Some(format!(
                "{key} links to {}, not to a digest of the previous period ({})",
                link.key,
                digest_key(previous)
            ))
        }
        (Some(_), None) => None,
        (Some(link), Some(before)) => {
            let Some((linked, _)) = before.digests.iter().find(|(d, _)| d.key == link.key) else {
                let there: Vec<&str> = before.digests.iter().map(|(d, _)| d.key.as_str()).collect();
                return Some(format!(
                    "{key} links to {}, which the bucket does not hold (the previous period's digests: {})",
                    link.key,
                    there.join(", ")
                ));
            };
            if link.sha256 != hex(&linked.sha256) {
                Some(format!(
                    "{key} names a previous digest hash that is not {}'s",
                    linked.key
                ))
            } else if link.signature != hex(&linked.signature) {
                Some(format!(
                    "{key} names a previous signature that is not {}'s",
                    linked.key
                ))
            } else {
                None
            }
        }
    }
}

/// A digest checked: what is wrong with it, its body when it is one, and whether it is signed.
#[derive(Debug)]
pub struct Checked {
    pub problems: Vec<Problem>,
    pub digest: Option<Digest>,
    pub signed: bool,
}

/// Checks the sealed version of `loaded`, the digest of `period`: a digest at all, signed by the
/// digest key, its fields those of its key, linked to `before` (the previous period's digests,
/// `None` when it has none).
pub fn check(
    loaded: &Loaded,
    period: Period,
    bucket: &str,
    key: &TrustedKey,
    before: Option<&Before>,
) -> Checked {
    let Judged {
        digest,
        signed,
        mut problems,
    } = judge(loaded, period, bucket, key);
    if let Some(digest) = &digest
        && let Some(why) = link_problem(digest, &loaded.key, before)
    {
        problems.push(Problem::new(ProblemKind::ChainBroken, &loaded.key, why));
    }
    Checked {
        problems,
        digest,
        signed,
    }
}

/// Why the digest's signature does not stand, if it does not: named by another key, another
/// algorithm, no signature, or one the key's public key does not verify over the signing string.
fn signature_problem(digest: &Digest, loaded: &Loaded, key: &TrustedKey) -> Option<String> {
    if digest.key_id != key.arn() {
        return Some(format!(
            "signed by key {}, not by the digest key {} (DIGEST_KEY_ID)",
            digest.key_id,
            key.arn()
        ));
    }
    if digest.signing_algorithm != SIGNING_ALGORITHM {
        return Some(format!(
            "signed with {}, not {SIGNING_ALGORITHM}",
            digest.signing_algorithm
        ));
    }
    let Some(signature) = loaded.signature.as_deref() else {
        return Some(format!("no signature (user metadata {SIGNATURE_METADATA})"));
    };
    let Some(signature) = unhex(signature) else {
        return Some("its signature is not hex".to_owned());
    };
    let message = signing_string_of(digest, &loaded.key, &sha256(&loaded.bytes));
    (!key.verifies(message.as_bytes(), &signature))
        .then(|| "the signature does not verify with the digest key's public key".to_owned())
}

/// Why the digest's fields are not those of the period its key names, if they are not.
fn field_problem(digest: &Digest, period: Period, bucket: &str) -> Option<String> {
    if digest.format != DIGEST_FORMAT {
        return Some(format!("format {}, not {DIGEST_FORMAT}", digest.format));
    }
    if digest.period() != Some(period) {
        return Some(format!(
            "describes the period {} to {} ({} s), not the one its key names{}",
            digest.period_start,
            digest.period_end,
            digest.period_seconds,
            if digest.period_seconds == period.length.seconds() {
                String::new()
            } else {
                format!(
                    " (DIGEST_PERIOD_SECONDS is {}: set it to the archiver's)",
                    period.length.seconds()
                )
            }
        ));
    }
    if digest.bucket != bucket {
        return Some(format!("names the bucket {}, not {bucket}", digest.bucket));
    }
    let sum: u64 = digest.objects.iter().map(|o| o.events).sum();
    if digest.events != sum {
        return Some(format!(
            "says {} events, but its objects hold {sum}",
            digest.events
        ));
    }
    let prefixes = object_prefixes(period);
    for (i, object) in digest.objects.iter().enumerate() {
        if !prefixes.iter().any(|p| object.key.starts_with(p.as_str())) {
            return Some(format!(
                "lists {}, which is not an object of its period",
                object.key
            ));
        }
        if i > 0 && digest.objects[i - 1].key >= object.key {
            return Some(format!("lists {} out of order or twice", object.key));
        }
    }
    None
}

/// The versions written over the sealed one, each compared with it: an identical copy is no
/// change; another body or signature is a second digest for the period.
pub async fn check_newer<A: Archive>(
    archive: &A,
    loaded: &Loaded,
    key: &TrustedKey,
) -> Result<Vec<Problem>, Error> {
    let mut problems = Vec::new();
    for version in &loaded.newer {
        let Some(fetched) = archive.get(&loaded.key, version).await? else {
            continue; // gone since the listing: nothing written over the sealed one any more
        };
        let signature = fetched.metadata.get(SIGNATURE_METADATA).cloned();
        let bytes = fetched.bytes().await?;
        if bytes == loaded.bytes && signature == loaded.signature {
            continue;
        }
        let other = Loaded {
            version_id: version.clone(),
            bytes,
            signature,
            ..loaded.clone()
        };
        let written_over = format!(
            "version {version} was written over the sealed version {} (SHA-256 {})",
            loaded.version_id,
            hex(&sha256(&other.bytes))
        );
        problems.push(match Digest::parse(&other.bytes) {
            Err(why) => Problem::new(
                ProblemKind::SignatureInvalid,
                &loaded.key,
                format!("{written_over}: {why}"),
            ),
            Ok(digest) => match signature_problem(&digest, &other, key) {
                Some(why) => Problem::new(
                    ProblemKind::SignatureInvalid,
                    &loaded.key,
                    format!("{written_over}: {why}"),
                ),
                None => Problem::new(
                    ProblemKind::ChainBroken,
                    &loaded.key,
                    format!(
                        "{written_over}, signed by the digest key: two different digests for one period"
                    ),
                ),
            },
        });
    }
    Ok(problems)
}
