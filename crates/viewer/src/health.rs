//! Owns the seal from the digests' names alone: the newest sealed period, tamper records, an
//! event's period, read through the archive's read port (`audit_proof::archive::Archive`). Must
//! not know HTTP, signatures (verify's) or checks.rs (which imports this).

use audit_aws::s3::Bucket;
use audit_model::archive::{Period, TAMPER_PREFIX};
use audit_model::digest::{DIGEST_PREFIX, DIGEST_SUFFIX, digest_key, parse_any_digest_key};
use audit_proof::archive::Archive as _;
use chrono::{DateTime, Duration, Utc};

use super::archive::Archive;

/// Days back the health page looks for the newest digest.
pub const LOOK_BACK_DAYS: i64 = 7;
/// Digest keys read at most per day (a day of 10-second periods is 8,640).
const KEYS_PER_DAY: usize = 10_000;

/// A period with its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub period: Period,
    /// The digest's key (an alternate name when the first was taken).
    pub key: String,
}

/// Whether an event's period is sealed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeriodStatus {
    Sealed(Sealed),
    /// Not yet: the archiver seals a period once no write of it can be in flight.
    Open {
        period: Period,
    },
    /// The period could have been sealed and has no digest.
    Missing {
        period: Period,
    },
}

impl<B: Bucket> Archive<B> {
    /// The newest period with a digest, looking back `LOOK_BACK_DAYS` UTC days from `now`.
    pub async fn newest_sealed(
        &self,
        now: DateTime<Utc>,
    ) -> Result<Option<Sealed>, audit_proof::Error> {
        for back in 0..=LOOK_BACK_DAYS {
            let day = (now - Duration::days(back)).format("%Y-%m-%d");
            let prefix = format!("{DIGEST_PREFIX}dt={day}/");
            let keys = self.bucket.keys(&prefix, None, KEYS_PER_DAY).await?;
            let newest = keys
                .into_iter()
                .filter_map(|key| {
                    parse_any_digest_key(&key, self.length)
                        .map(|(period, _)| Sealed { period, key })
                })
                .max_by_key(|s| s.period.start);
            if newest.is_some() {
                return Ok(newest);
            }
        }
        Ok(None)
    }

    /// The tamper records (archive objects under `tamper/`: changes and deletions of stored
    /// items the archiver saw on the table's stream) of the last `LOOK_BACK_DAYS` UTC days,
    /// newest first, at most `max`.
    pub async fn tamper_objects(
        &self,
        now: DateTime<Utc>,
        max: usize,
    ) -> Result<Vec<String>, audit_proof::Error> {
        let mut found = Vec::new();
        for back in 0..=LOOK_BACK_DAYS {
            let day = (now - Duration::days(back)).format("%Y-%m-%d");
            let prefix = format!("{TAMPER_PREFIX}dt={day}/");
            let mut keys = self.bucket.keys(&prefix, None, max).await?;
            keys.reverse();
            found.extend(keys);
            if found.len() >= max {
                found.truncate(max);
                break;
            }
        }
        Ok(found)
    }

    /// The seal of the period holding `at`, at `now`.
    pub async fn status(
        &self,
        at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<PeriodStatus, audit_proof::Error> {
        let period = self.length.period_of(at);
        let key = digest_key(period);
        let stem = key.strip_suffix(DIGEST_SUFFIX).unwrap_or(&key);
        let keys = self.bucket.keys(stem, None, 20).await?;
        let found = keys
            .into_iter()
            .find(|k| parse_any_digest_key(k, self.length).is_some_and(|(p, _)| p == period));
        Ok(match found {
            Some(key) => PeriodStatus::Sealed(Sealed { period, key }),
            // Not missing before the scheduled run that seals it has had its time.
            None if now.timestamp() < audit_proof::verify::sealed_by(&period) => {
                PeriodStatus::Open { period }
            }
            None => PeriodStatus::Missing { period },
        })
    }
}

/// A period's bounds as text: `start – end UTC`.
pub fn bounds(period: Period) -> (String, String) {
    let time = |s: i64| {
        DateTime::from_timestamp(s, 0)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_default()
    };
    (time(period.start), time(period.end()))
}

/// A duration in words: "3 min", "2 h 5 min", "4 days 1 h".
pub fn age(seconds: i64) -> String {
    let seconds = seconds.max(0);
    let (days, hours, minutes) = (
        seconds / 86_400,
        seconds % 86_400 / 3600,
        seconds % 3600 / 60,
    );
    match (days, hours) {
        (0, 0) if minutes == 0 => format!("{seconds} s"),
        (0, 0) => format!("{minutes} min"),
        (0, h) => format!("{h} h {minutes} min"),
        (d, h) => format!("{d} day{} {h} h", if d == 1 { "" } else { "s" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use audit_aws::s3::{MemoryBucket, NewObject};
    use audit_model::archive::PeriodLength;
    use audit_proof::archive::S3Archive;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    async fn put(bucket: &MemoryBucket, key: &str) {
        bucket
            .put_if_absent(NewObject {
                key: key.to_owned(),
                body: bytes::Bytes::from_static(b"{}"),
                content_type: "application/json",
                sha256: [0; 32],
                metadata: Vec::new(),
            })
            .await
            .unwrap();
    }

    fn archive() -> Archive<MemoryBucket> {
        Archive {
            bucket: S3Archive::over(MemoryBucket::new(), "archive", "memory"),
            name: "archive".into(),
            length: PeriodLength::default(),
            key: None,
            witnesses: Vec::new(),
        }
    }

    #[tokio::test]
    async fn the_newest_sealed_period_is_found_across_days_and_alternate_names() {
        let archive = archive();
        let hour = PeriodLength::default();
        assert_eq!(
            archive
                .newest_sealed(at("2026-11-24T12:00:00Z"))
                .await
                .unwrap(),
            None
        );
        let older = hour.period_of(at("2026-11-22T21:30:00Z"));
        let newer = hour.period_of(at("2026-11-22T22:30:00Z"));
        put(&archive.bucket, &digest_key(older)).await;
        let alternate = audit_model::digest::digest_key_alternate(newer, 1);
        put(&archive.bucket, &alternate).await;
        put(
            &archive.bucket,
            "digest/dt=2026-11-22/hour=23/not-a-digest.json",
        )
        .await;
        let newest = archive
            .newest_sealed(at("2026-11-24T12:00:00Z"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(newest.period, newer);
        assert_eq!(newest.key, alternate);
        assert_eq!(
            bounds(newest.period),
            ("2026-11-22T22:00:00Z".into(), "2026-11-22T23:00:00Z".into())
        );
    }

    #[tokio::test]
    async fn an_events_period_is_sealed_open_or_missing() {
        let archive = archive();
        let event = at("2026-11-24T10:15:00Z");
        let period = PeriodLength::default().period_of(event);
        assert_eq!(
            archive
                .status(event, at("2026-11-24T11:00:10Z"))
                .await
                .unwrap(),
            PeriodStatus::Open { period }
        );
        assert_eq!(
            archive
                .status(event, at("2026-11-24T13:00:00Z"))
                .await
                .unwrap(),
            PeriodStatus::Missing { period }
        );
        put(&archive.bucket, &digest_key(period)).await;
        assert!(matches!(
            archive.status(event, at("2026-11-24T13:00:00Z")).await.unwrap(),
            PeriodStatus::Sealed(s) if s.key == digest_key(period)
        ));
    }

    #[tokio::test]
    async fn tamper_records_of_the_last_days_are_listed_newest_first() {
        let archive = archive();
        let now = at("2026-11-24T12:00:00Z");
        assert!(archive.tamper_objects(now, 20).await.unwrap().is_empty());
        for key in [
            "tamper/dt=2026-11-23/hour=10/p1-a0.jsonl.gz",
            "tamper/dt=2026-11-24/hour=09/p2-a0.jsonl.gz",
            "tamper/dt=2026-11-10/hour=09/p0-a0.jsonl.gz",
            "trail/dt=2026-11-24/hour=09/p2-a0.jsonl.gz",
        ] {
            put(&archive.bucket, key).await;
        }
        assert_eq!(
            archive.tamper_objects(now, 20).await.unwrap(),
            [
                "tamper/dt=2026-11-24/hour=09/p2-a0.jsonl.gz",
                "tamper/dt=2026-11-23/hour=10/p1-a0.jsonl.gz"
            ],
            "the last 7 days only, tamper/ only"
        );
        assert_eq!(archive.tamper_objects(now, 1).await.unwrap().len(), 1);
    }

    #[test]
    fn ages_are_words() {
        assert_eq!(age(59), "59 s");
        assert_eq!(age(61), "1 min");
        assert_eq!(age(3 * 3600 + 120), "3 h 2 min");
        assert_eq!(age(86_400 + 3600), "1 day 1 h");
        assert_eq!(age(-5), "0 s");
    }
}
