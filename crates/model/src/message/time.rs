//! Owns an audit message's time: `auditTime` read as RFC 3339 with an offset, its canonical UTC
//! form, SQS's `SentTimestamp` (docs/events.md). Must not know the other body rules or the item.

use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};

use super::InvalidMessage;

/// Parses an RFC 3339 time with an offset (`Z` or `±hh:mm`), any fractional precision.
pub fn parse_audit_time(text: &str) -> Result<DateTime<Utc>, InvalidMessage> {
    match DateTime::parse_from_rfc3339(text) {
        Ok(time) => {
            let utc = time.with_timezone(&Utc);
            // The canonical form has a four-digit year; an offset can push year 0000 or 9999 out.
            if !(0..=9999).contains(&chrono::Datelike::year(&utc)) {
                return Err(InvalidMessage::InvalidAuditTime(
                    "the UTC year is outside 0000-9999".into(),
                ));
            }
            Ok(utc)
        }
        Err(error) if lacks_offset(text) => {
            let _ = error;
            Err(InvalidMessage::AuditTimeWithoutOffset)
        }
        Err(error) => Err(InvalidMessage::InvalidAuditTime(error.to_string())),
    }
}

/// A local date-time that would be valid RFC 3339 if it had an offset.
fn lacks_offset(text: &str) -> bool {
    [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dt%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
    ]
    .iter()
    .any(|format| NaiveDateTime::parse_from_str(text, format).is_ok())
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`: UTC, exactly three fractional digits (truncated), so that string
/// order is time order.
pub fn canonical_time(time: DateTime<Utc>) -> String {
    // SecondsFormat::Millis truncates; `true` writes `Z` rather than `+00:00`.
    time.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The SQS `SentTimestamp` attribute (epoch milliseconds), when present and valid.
pub fn parse_sent_timestamp(millis: Option<&str>) -> Option<DateTime<Utc>> {
    millis?
        .trim()
        .parse::<i64>()
        .ok()
        .and_then(DateTime::from_timestamp_millis)
}
