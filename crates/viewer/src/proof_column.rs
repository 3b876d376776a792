//! Owns the results' proof column: what is cheaply known of each row's proof without checking
//! it (docs/ui.md "The proof column"): whether its period has its signed digest, from the digests'
//! names (one listing per hour the rows span), and, with the receiver's attestation key, whether
//! the receiver attested the item. Must not know the markup, HTTP or the proof's check (the
//! event's page does that).

use std::collections::{BTreeSet, HashSet};

use audit_aws::s3::Bucket;
use audit_model::digest::{DIGEST_SUFFIX, digest_key, parse_any_digest_key};
use audit_proof::archive::Archive as _;
use chrono::{DateTime, Utc};

use super::Viewer;
use audit_trail::access::AccessLog;
use audit_trail::item::TrailItem;

/// Digest keys read at most per hour of periods (an hour of 1-second periods is 3,600).
const KEYS_PER_HOUR: usize = 4_000;

/// What the results say of a row's proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// Its period has its signed digest (and, with the attestation key, the receiver attested
    /// it): its event's page checks the proof.
    Sealed,
    /// Its period is not sealed yet: the archiver seals it once no write of it can be in flight.
    Pending,
    /// Its period could have been sealed and has no digest, or the receiver did not attest it.
    NotProven(String),
    /// Not known here: no archive bucket, or it could not be read.
    NotKnown(String),
}

impl Mark {
    /// The word the column shows.
    pub fn word(&self) -> &'static str {
        match self {
            Self::Sealed => "sealed",
            Self::Pending => "pending",
            Self::NotProven(_) => "not proven",
            Self::NotKnown(_) => "not known",
        }
    }

    /// Why, in a sentence (the cell's title).
    pub fn why(&self) -> String {
        match self {
            Self::Sealed => {
                "its period has its signed digest; open the event to check its proof".into()
            }
            Self::Pending => "its period is not sealed yet; the archiver seals it shortly".into(),
            Self::NotProven(why) | Self::NotKnown(why) => why.clone(),
        }
    }
}

impl<L: AccessLog + 'static, B: Bucket + 'static> Viewer<L, B> {
    /// Each row's mark, at `now`.
    pub(super) async fn marks(&self, rows: &[TrailItem], now: DateTime<Utc>) -> Vec<Mark> {
        let Some(archive) = &self.archive else {
            let why = "start auditctl ui with ARCHIVE_BUCKET to see whether its period is sealed";
            return vec![Mark::NotKnown(why.into()); rows.len()];
        };
        let periods: Vec<_> = rows
            .iter()
            .map(|row| {
                DateTime::parse_from_rfc3339(&row.audit_time)
                    .ok()
                    .map(|at| archive.length.period_of(at.to_utc()))
            })
            .collect();
        // The digests of each hour the rows' periods begin in: `digests/dt=…/hour=…/`.
        let hours: BTreeSet<String> = periods
            .iter()
            .flatten()
            .map(|period| {
                let key = digest_key(*period);
                key[..key.rfind('/').map_or(0, |at| at + 1)].to_owned()
            })
            .collect();
        let mut sealed = HashSet::new();
        for hour in &hours {
            match archive.bucket.keys(hour, None, KEYS_PER_HOUR).await {
                Ok(keys) => sealed.extend(
                    keys.iter()
                        .filter(|k| k.ends_with(DIGEST_SUFFIX))
                        .filter_map(|k| parse_any_digest_key(k, archive.length))
                        .map(|(period, _)| period.start),
                ),
                Err(error) => {
                    let why = format!(
                        "the archive could not be read: {}",
                        crate::error::read_failure(&error)
                    );
                    return vec![Mark::NotKnown(why); rows.len()];
                }
            }
        }
        rows.iter()
            .zip(periods)
            .map(|(row, period)| {
                let unattested = self
                    .attestations
                    .as_ref()
                    .and_then(|a| a.check_line(row.line().as_bytes()));
                match (unattested, period) {
                    (Some(unattested), _) => {
                        Mark::NotProven(format!("not attested: {}", unattested.why))
                    }
                    (None, None) => Mark::NotKnown("its auditTime is not a time".into()),
                    (None, Some(period)) if sealed.contains(&period.start) => Mark::Sealed,
                    (None, Some(period)) if now.timestamp() < period.sealable_at() => Mark::Pending,
                    (None, Some(_)) => Mark::NotProven(
                        "its period could have been sealed and has no digest; auditctl verify says why"
                            .into(),
                    ),
                }
            })
            .collect()
    }
}
