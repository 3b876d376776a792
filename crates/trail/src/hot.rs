//! Owns the table's hot window (docs/auditctl.md "Past the table's hot window"): with
//! `RetentionDays` set (the table's tag `audit:retention-days`), DynamoDB's TTL deletes an item
//! once its `expiresAt` (its `auditTime` plus those days) has passed, and the archive is the
//! long-term copy. A range is split where the window starts: the part before it is read from the
//! archive, the rest from the table. The archive's lines become items as the table gives them,
//! kept by the query's filters, ordered, one per key. Must not know the archive's layout or the
//! command line.

use std::collections::HashMap;

use audit_model::message::canonical_time;
use audit_model::range::TimeRange;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Duration, DurationRound, Utc};
use serde_json::Value;

use crate::item::TrailItem;
use crate::merge::Order;

/// How far after `now - days` the window starts.
pub const MARGIN: Duration = Duration::seconds(60);
/// How far before the window a range computed back from now may start and still be the table's
/// alone (`HotWindow::clip_default`).
pub const DEFAULT_SLACK: Duration = Duration::minutes(10);

/// The days the table keeps an item, and the first `auditTime` it is sure to still hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotWindow {
    pub days: u32,
    /// Canonical time: an item at or after it has not expired (`expiresAt`, whole seconds, is
    /// then after `now`); an item before it may be gone.
    pub start: String,
}

/// A range split at the hot window's start: what the archive answers and what the table does
/// (either may be `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub archive: Option<TimeRange>,
    pub table: Option<TimeRange>,
}

impl HotWindow {
    /// The window of `days` days at `now`: it starts `MARGIN` after `now - days` truncated to its
    /// second, so that every item at or after its start has an `expiresAt` (its second plus the
    /// days) after `now` by a minute at least: it has not expired, even by a clock that runs a
    /// little ahead of this one, and a read of the table that takes a while still finds it.
    pub fn at(days: u32, now: DateTime<Utc>) -> Self {
        let edge = now - Duration::days(i64::from(days));
        let second = edge.duration_trunc(Duration::seconds(1)).unwrap_or(edge);
        Self {
            days,
            start: canonical_time(second + MARGIN),
        }
    }

    /// A range computed back from now (a viewer's preset, a lookup's default 30 days) that
    /// reaches before the window by no more than `DEFAULT_SLACK` starts at the window: "the last
    /// 30 days" of a 30-day table is the table's, not a minute of it read from a year of archive.
    /// Any other range is as given.
    pub fn clip_default(&self, range: TimeRange) -> TimeRange {
        let start = DateTime::parse_from_rfc3339(&self.start).map(|t| t.to_utc());
        let from = DateTime::parse_from_rfc3339(&range.from).map(|t| t.to_utc());
        match (start, from) {
            (Ok(start), Ok(from))
                if from < start && start - from <= DEFAULT_SLACK && self.start <= range.to =>
            {
                TimeRange {
                    from: self.start.clone(),
                    to: range.to,
                }
            }
            _ => range,
        }
    }

    /// `range` split at the window's start.
    pub fn split(&self, range: &TimeRange) -> Split {
        let before = self.last_before();
        let part = |from: &str, to: &str| {
            let part = TimeRange {
                from: from.to_owned(),
                to: to.to_owned(),
            };
            (!part.is_empty() && !range.is_empty()).then_some(part)
        };
        Split {
            archive: part(&range.from, before.as_str().min(range.to.as_str())),
            table: part(self.start.as_str().max(range.from.as_str()), &range.to),
        }
    }

    /// The last millisecond before the window.
    fn last_before(&self) -> String {
        DateTime::parse_from_rfc3339(&self.start)
            .map(|t| canonical_time(t.to_utc() - Duration::milliseconds(1)))
            .unwrap_or_default()
    }
}

/// Archived lines as the table's items (`TrailItem::from_line`), those whose `auditTime` is in
/// `range` and whose every `(attribute, value)` of `filters` is that string, in `order`, one per
/// (`auditTime`, `messageId`): the table's key, so a line archived twice (an archiver's retried
/// write) is one item, as in the table. Lines that are not items are left out.
pub fn archived_items(
    lines: Vec<String>,
    range: &TimeRange,
    filters: &[(&str, String)],
    order: Order,
) -> Vec<TrailItem> {
    let mut items: Vec<TrailItem> = lines
        .iter()
        .filter_map(|line| TrailItem::from_line(line))
        .filter(|item| kept(item, range, filters))
        .collect();
    items.sort_by(|a, b| (&a.audit_time, &a.message_id).cmp(&(&b.audit_time, &b.message_id)));
    items.dedup_by(|a, b| a.audit_time == b.audit_time && a.message_id == b.message_id);
    if order == Order::Descending {
        items.reverse();
    }
    items
}

/// Whether an archived line is an item of `range` that `filters` keep (what `archived_items`
/// keeps): for a reader that drops the others as it reads.
pub fn line_kept(line: &str, range: &TimeRange, filters: &[(&str, String)]) -> bool {
    TrailItem::from_line(line).is_some_and(|item| kept(&item, range, filters))
}

fn kept(item: &TrailItem, range: &TimeRange, filters: &[(&str, String)]) -> bool {
    range.from <= item.audit_time
        && item.audit_time <= range.to
        && filters.iter().all(|(name, value)| {
            matches!(item.attributes.get(*name), Some(AttributeValue::S(s)) if s == value)
        })
}

/// A plain JSON value as the attribute the table stores it as (the inverse of the model's line
/// for everything the receiver writes).
pub(crate) fn attribute(value: &Value) -> AttributeValue {
    match value {
        Value::String(text) => AttributeValue::S(text.clone()),
        Value::Number(number) => AttributeValue::N(number.to_string()),
        Value::Bool(flag) => AttributeValue::Bool(*flag),
        Value::Null => AttributeValue::Null(true),
        Value::Array(values) => AttributeValue::L(values.iter().map(attribute).collect()),
        Value::Object(map) => AttributeValue::M(
            map.iter()
                .map(|(name, value)| (name.clone(), attribute(value)))
                .collect::<HashMap<_, _>>(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-29T10:00:00.400Z")
            .unwrap()
            .to_utc()
    }

    fn range(from: &str, to: &str) -> TimeRange {
        TimeRange::parse(from, to).unwrap()
    }

    #[test]
    fn the_window_starts_where_no_item_can_have_expired_and_splits_a_range_there() {
        let window = HotWindow::at(30, now());
        // expiresAt = the item's second + 30 days: at 10:01:00 it is a minute after now
        // (10:00:00.4).
        assert_eq!(window.start, "2026-10-30T10:01:00.000Z");
        let split = window.split(&range("2026-10-01T00:00:00Z", "2026-11-29T10:00:00Z"));
        assert_eq!(
            split.archive,
            Some(range("2026-10-01T00:00:00Z", "2026-10-30T10:00:59.999Z"))
        );
        assert_eq!(
            split.table,
            Some(range("2026-10-30T10:01:00Z", "2026-11-29T10:00:00Z"))
        );
        // Inside the window: the table alone; before it: the archive alone.
        let inside = window.split(&range("2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"));
        assert_eq!((inside.archive, inside.table.is_some()), (None, true));
        let before = window.split(&range("2026-09-01T00:00:00Z", "2026-09-02T00:00:00Z"));
        assert_eq!((before.archive.is_some(), before.table), (true, None));
        // The window's first millisecond is the table's, the one before the archive's.
        let edge = window.split(&range("2026-10-30T10:00:59.999Z", "2026-10-30T10:01:00Z"));
        assert_eq!(
            (edge.archive.unwrap().to, edge.table.unwrap().from),
            (
                "2026-10-30T10:00:59.999Z".to_owned(),
                "2026-10-30T10:01:00.000Z".to_owned()
            )
        );
    }

    #[test]
    fn a_range_back_from_now_that_just_misses_the_window_is_the_tables() {
        let window = HotWindow::at(30, now());
        // "The last 30 days" at now: a minute before the window, the table's alone.
        let last_30_days = range("2026-10-30T10:00:00.400Z", "2026-11-29T10:00:00.400Z");
        assert_eq!(
            window.clip_default(last_30_days).from,
            "2026-10-30T10:01:00.000Z"
        );
        // Further back, or wholly before the window: as given, the archive answers.
        let last_31_days = range("2026-10-29T10:00:00Z", "2026-11-29T10:00:00Z");
        assert_eq!(window.clip_default(last_31_days.clone()), last_31_days);
        let before = range("2026-10-30T09:55:00Z", "2026-10-30T09:59:00Z");
        assert_eq!(window.clip_default(before.clone()), before);
    }

    #[test]
    fn archived_lines_become_the_tables_items_filtered_ordered_and_once_each() {
        let line = |id: &str, at: &str, actor: &str| {
            format!(
                r#"{{"actor":"{actor}","auditTime":"{at}","extra":{{"amount":12.50,"tags":["a",true,null]}},"messageId":"{id}","receiveCount":1}}"#
            )
        };
        let lines = vec![
            line("b", "2026-10-01T00:00:02.000Z", "alice"),
            line("a", "2026-10-01T00:00:02.000Z", "alice"),
            line("c", "2026-10-01T00:00:01.000Z", "bob"),
            // Archived twice (a retried write): one item.
            line("a", "2026-10-01T00:00:02.000Z", "alice"),
            // Outside the range, and not an item.
            line("d", "2026-10-02T00:00:00.000Z", "alice"),
            "not json".to_owned(),
            r#"{"messageId":"no time"}"#.to_owned(),
        ];
        let range = range("2026-10-01T00:00:00Z", "2026-10-01T23:59:59Z");
        let keys = |items: &[TrailItem]| -> Vec<String> {
            items.iter().map(|i| i.message_id.clone()).collect()
        };
        let all = archived_items(lines.clone(), &range, &[], Order::Ascending);
        assert_eq!(keys(&all), ["c", "a", "b"]);
        // The item prints as the archived line, byte for byte.
        assert_eq!(all[1].line(), lines[1]);
        let alice = archived_items(
            lines.clone(),
            &range,
            &[("actor", "alice".to_owned())],
            Order::Descending,
        );
        assert_eq!(keys(&alice), ["b", "a"]);
    }
}
