//! Owns the archive's layout shared by the archiver, the digests and `auditctl verify`: object keys
//! (prefixes, Hive partitions, digest period, padded sequence numbers) and the period arithmetic
//! with its write bound. Must not know S3 or any client.
//!
//! An archive object's key is
//! `<trail|tamper>/dt=YYYY-MM-DD/hour=HH/p<periodStart>-<firstSequence>-a<attempt>.jsonl.gz`:
//! `dt` and `hour` are the UTC hour in which the object was written (Hive partitions, as
//! CloudTrail partitions by delivery time), `periodStart` the start (Unix seconds) of the digest
//! period `[k·P, (k+1)·P)` the write belongs to, `firstSequence` the stream sequence number of its
//! first event, zero-padded to [`SEQUENCE_DIGITS`] so that keys sort in stream order, and `attempt`
//! the archiver's attempt at the run of records the object belongs to (docs/archive.md).
//!
//! The write bound: a write of period P is only *started* before `end(P) + WRITE_START_SLACK`, and
//! every write is abandoned (its request dropped) [`OBJECT_WRITE_TIMEOUT`] after it starts; S3 has
//! then [`LAND_GRACE`] to finish a request whose body it had whole. So from
//! `end(P) + SEAL_DELAY` on, no object of P can still appear, and P's digest may be sealed.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Datelike, TimeZone, Timelike, Utc};

/// The events as the table received them: one `item_line` per line.
pub const TRAIL_PREFIX: &str = "trail/";
/// MODIFY and non-TTL REMOVE records of the stream, with their old and new images.
pub const TAMPER_PREFIX: &str = "tamper/";
/// The archiver's own bookkeeping (markers of what each run of records wrote); not archive objects.
pub const STATE_PREFIX: &str = "state/";
/// The suffix of every archive object (gzip-compressed JSON lines).
pub const OBJECT_SUFFIX: &str = ".jsonl.gz";
/// The user metadata (`x-amz-meta-marker`) an archive object carries: the key of the run marker
/// written just before it, which lists it with its SHA-256 (the attestation the sealer checks).
pub const MARKER_METADATA: &str = "marker";
/// Where void markers live: `state/void/<object key>.json`, written (once, `If-None-Match`) by
/// whoever decides that a listed object that was missing will never count and archives its events
/// anew. An object with a void marker is never the trail, whenever it lands.
pub const VOID_PREFIX: &str = "state/void/";

/// The void marker's key for the archive object `object_key`.
pub fn void_key(object_key: &str) -> String {
    format!("{VOID_PREFIX}{object_key}.json")
}

/// The digest period in AWS (UTC hours).
pub const DEFAULT_DIGEST_PERIOD_SECONDS: u32 = 3600;
/// The shortest period accepted (the local stack uses a short one).
pub const MIN_DIGEST_PERIOD_SECONDS: u32 = 10;
/// The longest period accepted: a day.
pub const MAX_DIGEST_PERIOD_SECONDS: u32 = 86_400;

/// The longest time between choosing an object's key (and so its period) and starting its write:
/// the archiver writes its marker in between, and does not start the write once this has passed.
pub const WRITE_START_SLACK: Duration = Duration::from_secs(5);
/// The longest time an object write may take; the archiver drops the request after it.
pub const OBJECT_WRITE_TIMEOUT: Duration = Duration::from_secs(15);
/// Time given to S3 to finish a request whose body it had whole when its client went away.
pub const LAND_GRACE: Duration = Duration::from_secs(10);
/// After `end(P) + SEAL_DELAY` no write of period P can be in flight or still land.
pub const SEAL_DELAY: Duration = Duration::from_secs(
    WRITE_START_SLACK.as_secs() + OBJECT_WRITE_TIMEOUT.as_secs() + LAND_GRACE.as_secs(),
);

/// Digits of a zero-padded sequence number (DynamoDB's have up to 40 digits).
pub const SEQUENCE_DIGITS: usize = 40;

/// A valid digest period length: from [`MIN_DIGEST_PERIOD_SECONDS`] to a day, dividing a day,
/// so that periods nest in UTC days and hours whose length they divide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeriodLength(u32);

impl PeriodLength {
    pub fn new(seconds: u32) -> Option<Self> {
        ((MIN_DIGEST_PERIOD_SECONDS..=MAX_DIGEST_PERIOD_SECONDS).contains(&seconds)
            && MAX_DIGEST_PERIOD_SECONDS.is_multiple_of(seconds))
        .then_some(Self(seconds))
    }

    pub fn seconds(self) -> u32 {
        self.0
    }

    /// The period containing `at`.
    pub fn period_of(self, at: DateTime<Utc>) -> Period {
        let length = i64::from(self.0);
        Period {
            start: at.timestamp().div_euclid(length) * length,
            length: self,
        }
    }
}

impl Default for PeriodLength {
    fn default() -> Self {
        Self(DEFAULT_DIGEST_PERIOD_SECONDS)
    }
}

/// One digest period, `[start, start + length)` in Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    pub start: i64,
    pub length: PeriodLength,
}

impl Period {
    /// The first second after the period.
    pub fn end(self) -> i64 {
        self.start + i64::from(self.length.0)
    }

    /// The last moment a write of this period may start.
    pub fn last_write_start(self) -> i64 {
        self.end() + WRITE_START_SLACK.as_secs() as i64
    }

    /// From this moment on no write of the period can be in flight: its digest may be sealed.
    pub fn sealable_at(self) -> i64 {
        self.end() + SEAL_DELAY.as_secs() as i64
    }

    /// The period after this one (the chain's next link).
    pub fn next(self) -> Period {
        Period {
            start: self.end(),
            length: self.length,
        }
    }
}

/// The two kinds of archive object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    Trail,
    Tamper,
}

impl ObjectKind {
    pub const fn prefix(self) -> &'static str {
        match self {
            Self::Trail => TRAIL_PREFIX,
            Self::Tamper => TAMPER_PREFIX,
        }
    }
}

/// A stream sequence number zero-padded to [`SEQUENCE_DIGITS`]; `None` when it is not 1 to 40
/// decimal digits (DynamoDB's always are).
pub fn padded_sequence(sequence_number: &str) -> Option<String> {
    (!sequence_number.is_empty()
        && sequence_number.len() <= SEQUENCE_DIGITS
        && sequence_number.bytes().all(|b| b.is_ascii_digit()))
    .then(|| format!("{sequence_number:0>SEQUENCE_DIGITS$}"))
}

/// The parts of an archive object's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectKey {
    pub kind: ObjectKind,
    /// The UTC hour in which the object was written (its `dt` and `hour` partitions).
    pub written_hour: DateTime<Utc>,
    /// The digest period the object belongs to.
    pub period_start: i64,
    /// The padded sequence number of its first event.
    pub first_sequence: String,
    /// The archiver's attempt at the run of records the object belongs to.
    pub attempt: u32,
}

impl ObjectKey {
    /// The key of an object of `kind` written at `at` whose first event has `first_sequence`.
    /// `None` when the sequence number cannot be padded.
    pub fn new(
        kind: ObjectKind,
        at: DateTime<Utc>,
        period: PeriodLength,
        first_sequence: &str,
        attempt: u32,
    ) -> Option<Self> {
        Some(Self {
            kind,
            written_hour: hour_of(at),
            period_start: period.period_of(at).start,
            first_sequence: padded_sequence(first_sequence)?,
            attempt,
        })
    }

    /// Reads a key written by [`ObjectKey`]'s `Display`; `None` for anything else.
    pub fn parse(key: &str) -> Option<Self> {
        let (kind, rest) = if let Some(rest) = key.strip_prefix(TRAIL_PREFIX) {
            (ObjectKind::Trail, rest)
        } else {
            (ObjectKind::Tamper, key.strip_prefix(TAMPER_PREFIX)?)
        };
        let mut parts = rest.split('/');
        let date = parts.next()?.strip_prefix("dt=")?;
        let hour = parts.next()?.strip_prefix("hour=")?;
        let name = parts
            .next()?
            .strip_suffix(OBJECT_SUFFIX)?
            .strip_prefix('p')?;
        if parts.next().is_some() || hour.len() != 2 {
            return None;
        }
        let day = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
        let written_hour = Utc
            .from_utc_datetime(&day.and_hms_opt(hour.parse().ok()?, 0, 0)?)
            .with_nanosecond(0)?;
        let mut fields = name.split('-');
        let period_start = fields.next()?.parse().ok()?;
        let first_sequence = fields.next()?.to_owned();
        let attempt = fields.next()?.strip_prefix('a')?.parse().ok()?;
        if fields.next().is_some()
            || first_sequence.len() != SEQUENCE_DIGITS
            || !first_sequence.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let parsed = Self {
            kind,
            written_hour,
            period_start,
            first_sequence,
            attempt,
        };
        // Canonical form only: one key, one spelling.
        (parsed.to_string() == key).then_some(parsed)
    }

    /// Whether the hour the object was written in can hold a write of its period: a write starts
    /// in `[start, end + WRITE_START_SLACK)`. An object outside was not written by the archiver.
    pub fn written_within_its_period(&self, period: PeriodLength) -> bool {
        let hour_start = self.written_hour.timestamp();
        let hour_end = hour_start + 3600;
        let write_start = self.period_start;
        let write_end =
            self.period_start + i64::from(period.seconds()) + WRITE_START_SLACK.as_secs() as i64;
        self.period_start.rem_euclid(i64::from(period.seconds())) == 0
            && hour_start < write_end
            && write_start < hour_end
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hour = self.written_hour;
        write!(
            f,
            "{}dt={:04}-{:02}-{:02}/hour={:02}/p{}-{}-a{}{}",
            self.kind.prefix(),
            hour.year(),
            hour.month(),
            hour.day(),
            hour.hour(),
            self.period_start,
            self.first_sequence,
            self.attempt,
            OBJECT_SUFFIX
        )
    }
}

/// The key prefixes under which objects of `period` can be (each kind, every UTC hour a write of
/// the period can be keyed in, as [`ObjectKey::written_within_its_period`] allows), in key order
/// per kind: what a digest lists and what `auditctl verify` looks under.
pub fn object_prefixes(period: Period) -> Vec<String> {
    let mut prefixes = Vec::new();
    for kind in [ObjectKind::Tamper, ObjectKind::Trail] {
        let mut hour = period.start.div_euclid(3600) * 3600;
        while hour < period.last_write_start() {
            let at = DateTime::from_timestamp(hour, 0).unwrap_or_default();
            prefixes.push(format!(
                "{}dt={:04}-{:02}-{:02}/hour={:02}/p{}-",
                kind.prefix(),
                at.year(),
                at.month(),
                at.day(),
                at.hour(),
                period.start
            ));
            hour += 3600;
        }
    }
    prefixes
}

/// The start of the UTC hour containing `at`.
fn hour_of(at: DateTime<Utc>) -> DateTime<Utc> {
    let seconds = at.timestamp().div_euclid(3600) * 3600;
    DateTime::from_timestamp(seconds, 0).unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn periods_are_aligned_on_the_epoch() {
        let hour = PeriodLength::new(3600).unwrap();
        let p = hour.period_of(at("2026-11-22T10:59:59.999Z"));
        assert_eq!(p.start, at("2026-11-22T10:00:00Z").timestamp());
        assert_eq!(p.end(), at("2026-11-22T11:00:00Z").timestamp());
        assert_eq!(p.next().start, p.end());
        assert_eq!(p.sealable_at(), p.end() + 30);
        let short = PeriodLength::new(60).unwrap();
        assert_eq!(
            short.period_of(at("2026-11-22T10:07:30Z")).start,
            at("2026-11-22T10:07:00Z").timestamp()
        );
    }

    #[test]
    fn a_periods_objects_are_under_the_hours_its_writes_can_start_in() {
        let hour = PeriodLength::new(3600).unwrap();
        let p = hour.period_of(at("2026-11-22T10:15:00Z"));
        assert_eq!(
            object_prefixes(p),
            [
                "tamper/dt=2026-11-22/hour=10/p1795341600-",
                "tamper/dt=2026-11-22/hour=11/p1795341600-",
                "trail/dt=2026-11-22/hour=10/p1795341600-",
                "trail/dt=2026-11-22/hour=11/p1795341600-",
            ]
        );
        let short = PeriodLength::new(60).unwrap();
        let p = short.period_of(at("2026-11-22T10:15:00Z"));
        assert_eq!(
            object_prefixes(p),
            [
                "tamper/dt=2026-11-22/hour=10/p1795342500-",
                "trail/dt=2026-11-22/hour=10/p1795342500-",
            ]
        );
        let key = ObjectKey::new(ObjectKind::Trail, at("2026-11-22T10:15:59Z"), short, "1", 0)
            .unwrap()
            .to_string();
        assert!(
            object_prefixes(p)
                .iter()
                .any(|prefix| key.starts_with(prefix.as_str()))
        );
    }

    #[test]
    fn a_period_divides_a_day() {
        assert!(PeriodLength::new(3600).is_some());
        assert!(PeriodLength::new(86_400).is_some());
        assert!(PeriodLength::new(10).is_some());
        assert!(PeriodLength::new(0).is_none());
        assert!(PeriodLength::new(9).is_none());
        assert!(PeriodLength::new(7).is_none());
        assert!(PeriodLength::new(3601).is_none());
        assert!(PeriodLength::new(172_800).is_none());
    }

    #[test]
    fn keys_name_hour_period_and_padded_sequence_and_read_back() {
        let key = ObjectKey::new(
            ObjectKind::Trail,
            at("2026-11-22T10:15:00Z"),
            PeriodLength::default(),
            "4421584500000000017450439091",
            0,
        )
        .unwrap();
        let text = key.to_string();
        assert_eq!(
            text,
            "trail/dt=2026-11-22/hour=10/p1795341600-000000000000\
             4421584500000000017450439091-a0.jsonl.gz"
        );
        assert_eq!(ObjectKey::parse(&text), Some(key.clone()));
        assert!(key.written_within_its_period(PeriodLength::default()));
        let tamper = ObjectKey {
            kind: ObjectKind::Tamper,
            attempt: 12,
            ..key
        };
        assert_eq!(ObjectKey::parse(&tamper.to_string()), Some(tamper));
        for bad in [
            "trail/dt=2026-11-22/hour=10/p1795341600-1-a0.jsonl.gz",
            "trail/dt=2026-11-22/hour=1/p1795341600-0000000000000000000000000000000000000001-a0.jsonl.gz",
            "state/x/a0.json",
            "trail/dt=2026-11-22/hour=10/p1795341600-0000000000000000000000000000000000000001-a0.jsonl",
        ] {
            assert_eq!(ObjectKey::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn sequence_numbers_sort_as_text_once_padded() {
        let a = padded_sequence("999").unwrap();
        let b = padded_sequence("1000").unwrap();
        assert!(a < b);
        assert_eq!(a.len(), SEQUENCE_DIGITS);
        assert_eq!(padded_sequence(""), None);
        assert_eq!(padded_sequence("12a"), None);
        assert_eq!(padded_sequence(&"1".repeat(41)), None);
    }

    #[test]
    fn an_object_written_after_its_period_and_the_slack_is_out_of_place() {
        let hour = PeriodLength::default();
        // Written in the first seconds of 11:00 for the 10:00 period: inside the slack.
        let late = ObjectKey::new(ObjectKind::Trail, at("2026-11-22T11:00:03Z"), hour, "1", 0)
            .map(|k| ObjectKey {
                period_start: at("2026-11-22T10:00:00Z").timestamp(),
                ..k
            })
            .unwrap();
        assert!(late.written_within_its_period(hour));
        let two_hours_late = ObjectKey {
            written_hour: at("2026-11-22T12:00:00Z"),
            ..late
        };
        assert!(!two_hours_late.written_within_its_period(hour));
    }
}
