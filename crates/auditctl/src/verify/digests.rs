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

use audit_model::archive::{Period, PeriodLength, object_prefixes};
use audit_model::digest::ProblemKind;
use audit_model::digest::{
    DIGEST_FORMAT, DIGEST_PREFIX, Digest, SIGNATURE_METADATA, SIGNING_ALGORITHM, SealedDigest,
    chain_break, hex, parse_digest_key, sha256, signing_string_of, unhex,
};
use futures::TryStreamExt;

use super::key::TrustedKey;
use super::ports::Archive;
use super::report::Problem;
use crate::TrailError;

/// A digest as the bucket holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    pub key: String,
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

/// The digest at `key`: its versions listed, its sealed version read. `None` when the key has no
/// version (none was written, or it was removed for good).
pub async fn load<A: Archive>(archive: &A, key: &str) -> Result<Option<Loaded>, TrailError> {
    let entries: Vec<_> = archive
        .versions(key.to_owned())
        .try_filter(|entry| std::future::ready(entry.key == key))
        .try_collect()
        .await?;
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
        version_id: (*sealed).to_owned(),
        bytes: fetched.bytes().await?,
        signature,
        hidden: entries.iter().any(|e| e.delete_marker && e.latest),
        newer: newer.iter().map(|v| (*v).to_owned()).collect(),
    }))
}

/// The period of the chain's first digest: the first key under `digest/` that is a digest key of
/// `length`, whether a version or only a delete marker is left of it (a deleted first digest
/// still starts the chain). `None` when the bucket holds no digest.
pub async fn first_digest<A: Archive>(
    archive: &A,
    length: PeriodLength,
) -> Result<Option<Period>, TrailError> {
    let mut entries = archive.versions(format!("{DIGEST_PREFIX}dt="));
    while let Some(entry) = entries.try_next().await? {
        if let Some(period) = parse_digest_key(&entry.key, length) {
            return Ok(Some(period));
        }
    }
    Ok(None)
}

/// A digest checked: what is wrong with it, and its body when it is one.
#[derive(Debug)]
pub struct Checked {
    pub problems: Vec<Problem>,
    pub digest: Option<Digest>,
}

/// Checks the sealed version of `loaded`, the digest of `period`: a digest at all, signed by the
/// digest key, its fields those of its key, linked to `before` (the previous period's sealed
/// digest, `None` when it has none). `first`: it is the first digest the bucket holds, which must
/// start the chain (a link from it names digests that were removed for good, markers and all).
pub fn check(
    loaded: &Loaded,
    period: Period,
    bucket: &str,
    key: &TrustedKey,
    before: Option<&SealedDigest>,
    first: bool,
) -> Checked {
    let mut problems = Vec::new();
    let digest = match Digest::parse(&loaded.bytes) {
        Ok(digest) => digest,
        Err(why) => {
            problems.push(Problem::new(
                ProblemKind::SignatureInvalid,
                &loaded.key,
                format!("version {}: {why}", loaded.version_id),
            ));
            return Checked {
                problems,
                digest: None,
            };
        }
    };
    if let Some(why) = signature_problem(&digest, loaded, key) {
        problems.push(Problem::new(
            ProblemKind::SignatureInvalid,
            &loaded.key,
            format!("version {}: {why}", loaded.version_id),
        ));
    }
    if let Some(why) = field_problem(&digest, period, bucket) {
        problems.push(Problem::new(ProblemKind::ChainBroken, &loaded.key, why));
    }
    if let Some(why) = chain_break(&digest, &loaded.key, before) {
        problems.push(Problem::new(ProblemKind::ChainBroken, &loaded.key, why));
    } else if let (true, Some(link), None) = (first, &digest.previous, before) {
        problems.push(Problem::new(
            ProblemKind::ChainBroken,
            &loaded.key,
            format!(
                "the first digest in the bucket, but it links to {}: the digests before it are gone (not even a delete marker is left of them)",
                link.key
            ),
        ));
    }
    Checked {
        problems,
        digest: Some(digest),
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
) -> Result<Vec<Problem>, TrailError> {
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
