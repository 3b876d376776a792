//! Owns what a search asks for, as its URL says it: range, fields, cursor, checked into the
//! library's `TimeRange` and `Plan`. Pure: must not know HTTP, the pages or the SDK.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde_json::{Map, Value};

use audit_model::range::{RangeError, TimeRange};
use audit_trail::access::argument_name;
use audit_trail::filter::{self, By, Fields, Plan, PlanError};

/// The parameters a search's URL may carry, in the order its links write them.
pub const PARAMETERS: [&str; 11] = [
    "range",
    "from",
    "to",
    "actor",
    "action",
    "resource",
    "by",
    "outcome",
    "source_ip",
    "sender",
    ACCESS,
];
/// The parameter that shows access events (`1`); without it they are left out (docs/ui.md).
pub const ACCESS: &str = "access";
/// The parameter of a further page: where the page before it ended.
pub const CURSOR: &str = "cursor";

/// A relative range: the last hour, day, 7 days or 30 days up to now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Hour,
    Day,
    Week,
    Month,
}

impl Preset {
    pub const ALL: [Preset; 4] = [Self::Hour, Self::Day, Self::Week, Self::Month];

    /// Its value in the URL.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Hour => "1h",
            Self::Day => "24h",
            Self::Week => "7d",
            Self::Month => "30d",
        }
    }

    /// Its words on the page.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Hour => "Last hour",
            Self::Day => "Last 24 hours",
            Self::Week => "Last 7 days",
            Self::Month => "Last 30 days",
        }
    }

    fn span(self) -> Duration {
        match self {
            Self::Hour => Duration::hours(1),
            Self::Day => Duration::hours(24),
            Self::Week => Duration::days(7),
            Self::Month => Duration::days(30),
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == text)
    }
}

/// Where a page of newest-first rows ended: the next page holds the rows strictly after it in
/// that order (an earlier `auditTime`, or the same one and a smaller `messageId`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub audit_time: String,
    pub message_id: String,
}

impl Cursor {
    /// Its value in the URL: `auditTime|messageId` (a time holds no `|`).
    pub fn to_param(&self) -> String {
        format!("{}|{}", self.audit_time, self.message_id)
    }

    fn parse(text: &str) -> Result<Self, SearchError> {
        let bad = || SearchError::Cursor(text.to_owned());
        let (time, id) = text.split_once('|').ok_or_else(bad)?;
        let parsed = DateTime::parse_from_rfc3339(time).map_err(|_| bad())?;
        if id.is_empty() || audit_model::message::canonical_time(parsed.to_utc()) != time {
            return Err(bad());
        }
        Ok(Self {
            audit_time: time.to_owned(),
            message_id: id.to_owned(),
        })
    }

    /// Whether a row (newest first) comes after this cursor, i.e. belongs to the next page.
    pub fn is_before(&self, audit_time: &str, message_id: &str) -> bool {
        (audit_time, message_id) < (self.audit_time.as_str(), self.message_id.as_str())
    }
}

/// A URL that is not a search, in words that name the fix. The page says it with HTTP 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    #[error(
        "unknown filter '{0}': a search takes range, from, to, actor, action, resource, by, outcome, source_ip, sender and access"
    )]
    Unknown(String),
    #[error("'{0}' is given twice: give each filter once")]
    Twice(String),
    #[error("range '{0}': one of 1h, 24h, 7d, 30d, or give from and to")]
    Preset(String),
    #[error("to is given without from: give both, or a range such as 24h")]
    ToWithoutFrom,
    #[error("{0}")]
    Range(#[from] RangeError),
    #[error("outcome '{0}': one of success, failure, unknown")]
    Outcome(String),
    #[error("source_ip '{text}': {why}")]
    SourceIp { text: String, why: String },
    #[error("by '{0}': one of time, actor, action, resource")]
    By(String),
    #[error("access '{0}': 1 shows access events; leave it out to hide them")]
    Access(String),
    #[error("{0}")]
    Plan(#[from] PlanError),
    #[error("cursor '{0}' is not where a page ended (auditTime|messageId): search again")]
    Cursor(String),
}

/// A search as its URL gives it: the parameters as given (empty ones left out), checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    /// (name, value) in `PARAMETERS` order, as given: what its links carry on.
    pub given: Vec<(&'static str, String)>,
    pub preset: Option<Preset>,
    /// The range, from the preset at the time of the search, or from `from` and `to`.
    pub range: TimeRange,
    pub plan: Plan,
    pub cursor: Option<Cursor>,
}

impl Search {
    /// The search of a URL's query string at `now`. No parameter is the last hour; `cursor`
    /// only where `paged` (a further page).
    pub fn parse(query: &str, now: DateTime<Utc>, paged: bool) -> Result<Self, SearchError> {
        let mut given: Vec<(&'static str, String)> = Vec::new();
        let mut cursor = None;
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            if paged && name == CURSOR {
                if cursor.is_some() {
                    return Err(SearchError::Twice(CURSOR.to_owned()));
                }
                cursor = Some(Cursor::parse(&value)?);
                continue;
            }
            let Some(known) = PARAMETERS.iter().find(|p| **p == name) else {
                return Err(SearchError::Unknown(name.into_owned()));
            };
            if given.iter().any(|(n, _)| n == known) {
                return Err(SearchError::Twice(name.into_owned()));
            }
            // A form sends its empty fields: an empty one is not asked for.
            let value = value.trim();
            if !value.is_empty() {
                given.push((known, value.to_owned()));
            }
        }
        given.sort_by_key(|(name, _)| PARAMETERS.iter().position(|p| p == name));
        let value = |name: &str| {
            given
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
        };
        let (preset, range) = match (value("from"), value("to")) {
            (Some(from), to) => {
                let to = to.unwrap_or_else(|| stamp(now));
                (None, TimeRange::parse(&as_utc(&from), &as_utc(&to))?)
            }
            (None, Some(_)) => return Err(SearchError::ToWithoutFrom),
            (None, None) => {
                let preset = match value("range") {
                    Some(name) => Preset::parse(&name).ok_or(SearchError::Preset(name))?,
                    None => Preset::Hour,
                };
                let range = TimeRange::parse(&stamp(now - preset.span()), &stamp(now))?;
                (Some(preset), range)
            }
        };
        let outcome = value("outcome")
            .map(|o| filter::parse_outcome(&o).map_err(|_| SearchError::Outcome(o)))
            .transpose()?;
        let source_ip = value("source_ip")
            .map(|ip| {
                filter::parse_source_ip(&ip).map_err(|why| SearchError::SourceIp { text: ip, why })
            })
            .transpose()?;
        let fields = Fields {
            actor: value("actor"),
            action: value("action"),
            resource: value("resource"),
            outcome,
            source_ip,
            sender: value("sender"),
        };
        let by = match value("by") {
            // As `auditctl query --by` names them (docs/auditctl.md), in any case.
            Some(by) => Some(match by.to_ascii_lowercase().as_str() {
                "time" => By::Time,
                "actor" => By::Actor,
                "action" => By::Action,
                "resource" => By::Resource,
                _ => return Err(SearchError::By(by)),
            }),
            // Several of actor, action and resource: the page reads the index of the first of
            // actor, resource, action given (what `--by` would name) and filters by the others.
            None => {
                let named: Vec<By> = [
                    (By::Actor, &fields.actor),
                    (By::Resource, &fields.resource),
                    (By::Action, &fields.action),
                ]
                .into_iter()
                .filter(|(_, v)| v.is_some())
                .map(|(by, _)| by)
                .collect();
                named.first().copied().filter(|_| named.len() > 1)
            }
        };
        if let Some(access) = value(ACCESS).filter(|a| a != "1") {
            return Err(SearchError::Access(access));
        }
        let plan = Plan::new(by, fields)?;
        Ok(Self {
            given,
            preset,
            range,
            plan,
            cursor,
        })
    }

    /// Whether access events (auditctl's own reads, `auditctl.*` actions) are shown: asked for
    /// with `access=1`, or searched for by an `auditctl.*` action.
    pub fn shows_access(&self) -> bool {
        self.value(ACCESS).is_some()
            || self
                .value("action")
                .is_some_and(|a| a.starts_with(audit_model::access::ACCESS_ACTION_PREFIX))
    }

    /// A given parameter's value.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.given
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The query string of this search (without its cursor), with `set` in place of what it
    /// gives for those names (an empty value removes one).
    pub fn query_with(&self, set: &[(&str, &str)]) -> String {
        let mut out = form_urlencoded::Serializer::new(String::new());
        for name in PARAMETERS {
            let value = match set.iter().find(|(n, _)| *n == name) {
                Some((_, v)) => Some(*v),
                None => self.value(name),
            };
            if let Some(value) = value.filter(|v| !v.is_empty()) {
                out.append_pair(name, value);
            }
        }
        out.finish()
    }

    /// The query string of this search (without its cursor).
    pub fn query(&self) -> String {
        self.query_with(&[])
    }

    /// The same search over the range it resolved to (a preset made two times): what an export
    /// reads, so that the same URL exports the same rows later.
    pub fn fixed_query(&self) -> String {
        self.query_with(&[
            ("range", ""),
            ("from", &self.range.from),
            ("to", &self.range.to),
        ])
    }

    /// The query string of the page after `cursor`.
    pub fn next_query(&self, cursor: &Cursor) -> String {
        let mut out = form_urlencoded::Serializer::new(self.query());
        out.append_pair(CURSOR, &cursor.to_param());
        out.finish()
    }

    /// A new search by one field's value (a click on an actor, action or resource): the same
    /// range, no other filter.
    pub fn by_field(&self, field: &str, value: &str) -> String {
        let mut out = form_urlencoded::Serializer::new(String::new());
        for name in ["range", "from", "to"] {
            if let Some(v) = self.value(name) {
                out.append_pair(name, v);
            }
        }
        out.append_pair(field, value);
        if let Some(v) = self.value(ACCESS) {
            out.append_pair(ACCESS, v);
        }
        out.finish()
    }

    /// The range this page reads: up to its cursor's time when it has one.
    pub fn page_range(&self) -> TimeRange {
        match &self.cursor {
            Some(cursor) if cursor.audit_time < self.range.to => TimeRange {
                from: self.range.from.clone(),
                to: cursor.audit_time.clone(),
            },
            _ => self.range.clone(),
        }
    }

    /// The access event's arguments: what was asked for, and the range it resolved to.
    pub fn arguments(&self) -> Map<String, Value> {
        let mut arguments: Map<String, Value> = self
            .given
            .iter()
            .map(|(n, v)| (argument_name(n), Value::String(v.clone())))
            .collect();
        arguments.insert("from".into(), Value::String(self.range.from.clone()));
        arguments.insert("to".into(), Value::String(self.range.to.clone()));
        if let Some(cursor) = &self.cursor {
            arguments.insert(CURSOR.into(), Value::String(cursor.to_param()));
        }
        arguments
    }

    /// The `auditctl query` command line that prints what an export of this search gives.
    pub fn command(&self, format: &str) -> String {
        let mut words = vec![
            "auditctl".to_owned(),
            "query".to_owned(),
            "--from".to_owned(),
            self.range.from.clone(),
            "--to".to_owned(),
            self.range.to.clone(),
        ];
        for (name, value) in &self.given {
            if matches!(*name, "range" | "from" | "to" | ACCESS) {
                continue;
            }
            words.push(format!("--{}", name.replace('_', "-")));
            words.push(shell_word(value));
        }
        if let (Some(by), None) = (self.implied_by(), self.value("by")) {
            words.push("--by".to_owned());
            words.push(by.to_owned());
        }
        if !self.shows_access() {
            words.push("--no-access".to_owned());
        }
        words.extend(["--desc", "--format", format].map(str::to_owned));
        words.join(" ")
    }

    /// The index the page chose when several of actor, action, resource are given without `by`.
    fn implied_by(&self) -> Option<&'static str> {
        let named = ["actor", "action", "resource"]
            .iter()
            .filter(|n| self.value(n).is_some())
            .count();
        match (&self.plan.source, named > 1) {
            (filter::Source::Lookup { field, .. }, true) => Some(field.attribute()),
            _ => None,
        }
    }
}

/// A time as the page's inputs give it (`YYYY-MM-DDTHH:MM[:SS]`, no offset: the page says UTC)
/// made RFC 3339; any other text as it is, for `TimeRange` to check.
fn as_utc(text: &str) -> String {
    let bytes = text.as_bytes();
    let local = bytes.len() >= 16
        && bytes.get(10) == Some(&b'T')
        && !text.ends_with(['Z', 'z'])
        && !text[11..].contains(['+', '-']);
    match (local, text.len()) {
        (true, 16) => format!("{text}:00Z"),
        (true, _) => format!("{text}Z"),
        _ => text.to_owned(),
    }
}

/// `now` as a canonical RFC 3339 time.
fn stamp(now: DateTime<Utc>) -> String {
    now.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A value as one POSIX shell word: as it is when plain, else in single quotes.
fn shell_word(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:@+=,%".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use audit_model::keys::LookupField;
    use audit_trail::filter::Source;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-24T12:00:00Z")
            .unwrap()
            .to_utc()
    }

    fn search(query: &str) -> Result<Search, SearchError> {
        Search::parse(query, now(), true)
    }

    #[test]
    fn no_parameter_is_the_last_hour_up_to_now() {
        let s = search("").unwrap();
        assert_eq!(s.preset, Some(Preset::Hour));
        assert_eq!(s.range.from, "2026-11-24T11:00:00.000Z");
        assert_eq!(s.range.to, "2026-11-24T12:00:00.000Z");
        assert_eq!(s.plan.source, Source::Time);
        let s = search("range=7d").unwrap();
        assert_eq!(s.range.from, "2026-11-17T12:00:00.000Z");
    }

    #[test]
    fn times_from_the_date_inputs_are_utc_and_from_alone_runs_to_now() {
        let s = search("from=2026-11-22T10:00&to=2026-11-22T11:30:15").unwrap();
        assert_eq!(s.preset, None);
        assert_eq!(s.range.from, "2026-11-22T10:00:00.000Z");
        assert_eq!(s.range.to, "2026-11-22T11:30:15.000Z");
        let s = search("from=2026-11-22T10:00:00%2B01:00").unwrap();
        assert_eq!(s.range.from, "2026-11-22T09:00:00.000Z");
        assert_eq!(s.range.to, "2026-11-24T12:00:00.000Z");
    }

    #[test]
    fn bad_input_is_named_with_the_fix() {
        let cases = [
            (
                "colour=red",
                "unknown filter 'colour': a search takes range, from, to, actor, action, resource, by, outcome, source_ip, sender and access",
            ),
            (
                "actor=a&actor=b",
                "'actor' is given twice: give each filter once",
            ),
            (
                "range=2w",
                "range '2w': one of 1h, 24h, 7d, 30d, or give from and to",
            ),
            (
                "from=yesterday&to=2026-11-22T10:00:00Z",
                "--from 'yesterday': add an offset, e.g. 2026-11-22T10:00:00Z",
            ),
            (
                "to=2026-11-22T10:00:00Z",
                "to is given without from: give both, or a range such as 24h",
            ),
            (
                "outcome=ok",
                "outcome 'ok': one of success, failure, unknown",
            ),
            (
                "by=colour&actor=a",
                "by 'colour': one of time, actor, action, resource",
            ),
            ("by=action&actor=a", "--by action needs --action VALUE"),
            (
                "cursor=nonsense",
                "cursor 'nonsense' is not where a page ended (auditTime|messageId): search again",
            ),
        ];
        for (query, message) in cases {
            assert_eq!(search(query).unwrap_err().to_string(), message, "{query}");
        }
        let error = search("from=2026-11-23T00:00:00Z&to=2026-11-22T00:00:00Z").unwrap_err();
        assert!(matches!(
            error,
            SearchError::Range(RangeError::Reversed { .. })
        ));
        assert!(matches!(
            search("source_ip=300.1.1.1").unwrap_err(),
            SearchError::SourceIp { .. }
        ));
        // A cursor is a further page's, not a search's.
        assert!(matches!(
            Search::parse("cursor=2026-11-22T10:00:00.000Z|m", now(), false).unwrap_err(),
            SearchError::Unknown(name) if name == "cursor"
        ));
    }

    #[test]
    fn fields_are_the_queries_of_auditctl_query_and_empty_ones_are_not_asked_for() {
        let s = search("actor=alice&action=&outcome=failure&source_ip=2001:DB8::1").unwrap();
        assert_eq!(
            s.plan.source,
            Source::Lookup {
                field: LookupField::Actor,
                value: "alice".into()
            }
        );
        assert!(s.plan.filters.contains(&("outcome", "failure".into())));
        assert!(s.plan.filters.contains(&("sourceIp", "2001:db8::1".into())));
        assert_eq!(s.value("action"), None);
        // Several fields: the first of actor, resource, action is the index.
        let s = search("action=invoice.delete&resource=invoice/1").unwrap();
        assert_eq!(s.plan.index(), "byResource");
        assert!(
            s.command("csv").contains("--by resource"),
            "{}",
            s.command("csv")
        );
        let s = search("action=invoice.delete&resource=invoice/1&by=time").unwrap();
        assert_eq!(s.plan.source, Source::Time);
    }

    #[test]
    fn links_carry_the_search_and_a_cursor_continues_it() {
        let s = search("actor=alice+b&range=24h").unwrap();
        assert_eq!(s.query(), "range=24h&actor=alice+b");
        assert_eq!(s.by_field("resource", "r/1"), "range=24h&resource=r%2F1");
        assert_eq!(
            s.fixed_query(),
            "from=2026-11-23T12%3A00%3A00.000Z&to=2026-11-24T12%3A00%3A00.000Z&actor=alice+b"
        );
        let cursor = Cursor {
            audit_time: "2026-11-24T10:00:00.000Z".into(),
            message_id: "m|1".into(),
        };
        let next = search(&s.next_query(&cursor)).unwrap();
        assert_eq!(next.cursor, Some(cursor.clone()));
        assert_eq!(next.page_range().to, "2026-11-24T10:00:00.000Z");
        assert!(cursor.is_before("2026-11-24T10:00:00.000Z", "m|0"));
        assert!(!cursor.is_before("2026-11-24T10:00:00.000Z", "m|1"));
        assert!(cursor.is_before("2026-11-24T09:59:59.999Z", "z"));
        assert_eq!(
            s.command("csv"),
            "auditctl query --from 2026-11-23T12:00:00.000Z --to 2026-11-24T12:00:00.000Z --actor 'alice b' --no-access --desc --format csv"
        );
        // Access events shown: asked for, or searched for by an auditctl.* action.
        let shown = search("actor=alice+b&range=24h&access=1").unwrap();
        assert!(shown.shows_access());
        assert!(!shown.command("csv").contains("--no-access"));
        assert_eq!(
            shown.by_field("resource", "r"),
            "range=24h&resource=r&access=1"
        );
        assert!(search("action=auditctl.query").unwrap().shows_access());
        assert_eq!(search("access=yes"), Err(SearchError::Access("yes".into())));
        let arguments = search("source_ip=192.0.2.1").unwrap().arguments();
        assert_eq!(arguments["sourceIp"], "192.0.2.1");
        assert_eq!(arguments["from"], "2026-11-24T11:00:00.000Z");
    }
}
