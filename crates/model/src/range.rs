//! Owns the time range of a query: `--from`/`--to` (RFC 3339 with an offset, any precision) ->
//! inclusive bounds in the canonical millisecond form, and the UTC days they span; the trail's
//! reading, the archiver and verify share it (docs/architecture.md "The crates", model). Must not
//! know DynamoDB or any I/O.

use chrono::{DateTime, Duration, NaiveDate, SubsecRound, Utc};

use crate::message::{InvalidMessage, canonical_time, parse_audit_time};

/// Inclusive bounds on the stored `auditTime` strings. Empty when no millisecond lies between
/// the times given (`--from 10:00:00.0005Z --to 10:00:00.0009Z`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeRange {
    /// The first canonical time `>= --from`.
    pub from: String,
    /// The last canonical time `<= --to`.
    pub to: String,
}

/// A flag that is not a usable time, in words that name the fix. `auditctl` exits 2 on these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    #[error("{flag} '{text}': add an offset, e.g. 2026-11-22T10:00:00Z")]
    NoOffset { flag: &'static str, text: String },
    #[error("{flag} '{text}': not an RFC 3339 time ({reason}), e.g. 2026-11-22T10:00:00Z")]
    Invalid {
        flag: &'static str,
        text: String,
        reason: String,
    },
    #[error("--from {from} is after --to {to}")]
    Reversed { from: String, to: String },
}

impl TimeRange {
    /// Stored times are truncated to milliseconds, so `auditTime >= from` holds exactly for the
    /// canonical times from `from` rounded **up** to the next millisecond (a stored
    /// `10:00:00.000Z` is earlier than `--from 10:00:00.0001Z`), and `auditTime <= to` for those
    /// up to `to` truncated (a stored `.999Z` is within `--to .9999Z`).
    pub fn parse(from: &str, to: &str) -> Result<Self, RangeError> {
        let start = parse_flag("--from", from)?;
        let end = parse_flag("--to", to)?;
        if start > end {
            return Err(RangeError::Reversed {
                from: from.to_owned(),
                to: to.to_owned(),
            });
        }
        let truncated = start.trunc_subsecs(3);
        let start = if truncated < start {
            truncated + Duration::milliseconds(1)
        } else {
            start
        };
        Ok(Self {
            from: canonical_time(start),
            to: canonical_time(end),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.from > self.to
    }

    /// The bounds as times (both included); `None` when the range is empty.
    pub fn bounds(&self) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let time = |text: &str| DateTime::parse_from_rfc3339(text).ok().map(|t| t.to_utc());
        match (time(&self.from), time(&self.to)) {
            (Some(from), Some(to)) if from <= to => Some((from, to)),
            _ => None,
        }
    }

    /// The UTC days (`YYYY-MM-DD`) the range spans, first to last; none when empty.
    pub fn days(&self) -> Vec<String> {
        if self.is_empty() {
            return Vec::new();
        }
        let day =
            |time: &str| NaiveDate::parse_from_str(time.get(..10).unwrap_or(time), "%Y-%m-%d");
        let (Ok(first), Ok(last)) = (day(&self.from), day(&self.to)) else {
            return Vec::new();
        };
        first
            .iter_days()
            .take_while(|d| *d <= last)
            .map(|d| d.format("%Y-%m-%d").to_string())
            .collect()
    }
}

fn parse_flag(flag: &'static str, text: &str) -> Result<DateTime<Utc>, RangeError> {
    parse_audit_time(text).map_err(|error| match error {
        InvalidMessage::AuditTimeWithoutOffset => RangeError::NoOffset {
            flag,
            text: text.to_owned(),
        },
        _ if !has_offset(text) => RangeError::NoOffset {
            flag,
            text: text.to_owned(),
        },
        InvalidMessage::InvalidAuditTime(reason) => RangeError::Invalid {
            flag,
            text: text.to_owned(),
            reason,
        },
        other => RangeError::Invalid {
            flag,
            text: text.to_owned(),
            reason: other.to_string(),
        },
    })
}

/// Ends in `Z` or `±hh:mm`.
fn has_offset(text: &str) -> bool {
    let bytes = text.trim().as_bytes();
    if bytes.last().is_some_and(|b| b.eq_ignore_ascii_case(&b'z')) {
        return true;
    }
    let n = bytes.len();
    n >= 6
        && matches!(bytes[n - 6], b'+' | b'-')
        && bytes[n - 5..n - 3].iter().all(u8::is_ascii_digit)
        && bytes[n - 3] == b':'
        && bytes[n - 2..].iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(from: &str, to: &str) -> TimeRange {
        TimeRange::parse(from, to).unwrap()
    }

    #[test]
    fn bounds_are_canonical_utc_milliseconds() {
        let r = range("2026-11-22T12:00:00+02:00", "2026-11-22T10:30:00.5-01:00");
        assert_eq!(r.from, "2026-11-22T10:00:00.000Z");
        assert_eq!(r.to, "2026-11-22T11:30:00.500Z");
    }

    #[test]
    fn to_truncates_so_the_last_stored_millisecond_is_included() {
        assert_eq!(
            range("2026-11-22T10:00:00Z", "2026-11-22T10:00:00.9999Z").to,
            "2026-11-22T10:00:00.999Z"
        );
    }

    #[test]
    fn from_with_sub_millisecond_digits_rounds_up_to_keep_greater_or_equal_exact() {
        // A stored .000 is before .0001, so it must not be included.
        assert_eq!(
            range("2026-11-22T10:00:00.0001Z", "2026-11-22T11:00:00Z").from,
            "2026-11-22T10:00:00.001Z"
        );
        assert_eq!(
            range("2026-11-22T10:00:00.999999999Z", "2026-11-22T11:00:00Z").from,
            "2026-11-22T10:00:01.000Z"
        );
        // Whole milliseconds are kept as they are.
        assert_eq!(
            range("2026-11-22T10:00:00.123000Z", "2026-11-22T11:00:00Z").from,
            "2026-11-22T10:00:00.123Z"
        );
        // Rounding up crosses a day boundary correctly.
        let r = range("2026-11-22T23:59:59.9995Z", "2026-11-23T00:00:01Z");
        assert_eq!(r.from, "2026-11-23T00:00:00.000Z");
        assert_eq!(r.days(), ["2026-11-23"]);
    }

    #[test]
    fn no_millisecond_between_the_bounds_is_an_empty_range_not_an_error() {
        let r = range("2026-11-22T10:00:00.0005Z", "2026-11-22T10:00:00.0009Z");
        assert!(r.is_empty());
        assert!(r.days().is_empty());
        assert_eq!(r.bounds(), None);
        let (from, to) = range("2026-11-22T12:00:00+02:00", "2026-11-22T10:30:00.5Z")
            .bounds()
            .unwrap();
        assert_eq!(from.to_rfc3339(), "2026-11-22T10:00:00+00:00");
        assert_eq!(to.timestamp_millis() % 1000, 500);
    }

    #[test]
    fn days_span_the_utc_dates_of_the_bounds() {
        let r = range("2026-11-22T23:00:00-02:00", "2026-11-25T00:30:00+01:00");
        assert_eq!(r.days(), ["2026-11-23", "2026-11-24"]);
        let r = range("2026-12-31T12:00:00Z", "2027-01-01T12:00:00Z");
        assert_eq!(r.days(), ["2026-12-31", "2027-01-01"]);
    }

    #[test]
    fn a_time_without_offset_names_the_fix() {
        let error = TimeRange::parse("2026-11-22 10:00", "2026-11-22T11:00:00Z").unwrap_err();
        assert_eq!(
            error.to_string(),
            "--from '2026-11-22 10:00': add an offset, e.g. 2026-11-22T10:00:00Z"
        );
        let error = TimeRange::parse("2026-11-22T10:00:00Z", "2026-11-22T11:00:00").unwrap_err();
        assert!(matches!(error, RangeError::NoOffset { flag: "--to", .. }));
        let error = TimeRange::parse("yesterday+01:00", "2026-11-22T11:00:00Z").unwrap_err();
        assert!(
            matches!(error, RangeError::Invalid { flag: "--from", .. }),
            "{error}"
        );
    }

    #[test]
    fn from_after_to_is_refused() {
        let error =
            TimeRange::parse("2026-11-22T11:00:00Z", "2026-11-22T12:00:00+02:00").unwrap_err();
        assert!(matches!(error, RangeError::Reversed { .. }), "{error}");
    }
}
