//! Owns what a query reads and what it keeps: which index (`byAuditTime`, or a lookup index by
//! `--actor`, `--action` or `--resource`) and the exact-match filters on top, validated and in
//! the stored form: their DynamoDB FilterExpression, and the checks made on the full items a
//! lookup reads (docs/architecture.md "The crates", trail). Pure: must not know the SDK or the wire.

use std::net::IpAddr;

use audit_model::keys::{LookupField, TIME_INDEX, lookup_index};
use audit_model::message::{
    EventOutcome, MAX_ACTION_CHARS, MAX_ACTOR_CHARS, MAX_RESOURCE_CHARS, parse_ip,
};

/// The item attribute `--sender` matches: the sender SQS attests (docs/events.md
/// "Claimed and attested: `actor` and `senderId`").
pub const SENDER_ID: &str = "senderId";

/// The index a query reads, as `--by` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// byAuditTime: every event in the range; --actor, --action and --resource filter it.
    Time,
    /// byActor.
    Actor,
    /// byAction.
    Action,
    /// byResource.
    Resource,
}

impl By {
    fn field(self) -> Option<LookupField> {
        match self {
            Self::Time => None,
            Self::Actor => Some(LookupField::Actor),
            Self::Action => Some(LookupField::Action),
            Self::Resource => Some(LookupField::Resource),
        }
    }
}

/// The structured fields a query asks for, as given (`--outcome` and `--source-ip` already
/// parsed by their value parsers below).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fields {
    pub actor: Option<String>,
    pub action: Option<String>,
    pub resource: Option<String>,
    pub outcome: Option<EventOutcome>,
    pub source_ip: Option<IpAddr>,
    /// `senderId`: the sender SQS attests (not in the lookup indexes' projection).
    pub sender: Option<String>,
}

/// Where the rows come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The time index: every event in the range.
    Time,
    /// A lookup index: the events whose field has this value.
    Lookup { field: LookupField, value: String },
}

/// What a query reads and keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub source: Source,
    /// (attribute, value) pairs an item must equal, in the stored form, that DynamoDB applies to
    /// what the index reads (the FilterExpression): only attributes the index projects.
    pub filters: Vec<(&'static str, String)>,
    /// (attribute, value) pairs the full item a lookup reads from the table must equal, checked
    /// after reading it: always the value looked up (a lookup key is the value or, for a long one,
    /// its hash, and a short value may be spelled like another's hash: the key alone does not say
    /// whose event it is), and what the lookup index does not project (`senderId`). Empty for a
    /// time query, whose index projects every attribute.
    pub checks: Vec<(&'static str, String)>,
}

/// A query that cannot be planned, in words that name the fix. `auditctl` exits 2 on these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "{given} given: say which index to read with {choices} (the others filter what it reads), or --by time to read the time index and filter by all of them"
    )]
    WhichIndex { given: String, choices: String },
    #[error("--by {by} needs --{by} VALUE")]
    ByWithoutValue { by: &'static str },
    #[error("--{flag} is empty: no event has an empty {flag}")]
    Empty { flag: &'static str },
    #[error("--{flag} has {chars} characters: no stored {flag} has more than {max}")]
    TooLong {
        flag: &'static str,
        chars: usize,
        max: usize,
    },
}

/// The FilterExpression of a plan's filters, with its placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub expression: String,
    /// `#f_<attribute>` -> attribute.
    pub names: Vec<(String, String)>,
    /// `:f_<attribute>` -> value (a string).
    pub values: Vec<(String, String)>,
}

impl Plan {
    /// The index to read and the filters: with `--by`, that index (its field must be given);
    /// without, the one of `--actor`/`--action`/`--resource` given, or the time index when none
    /// is. Every other field given is a filter.
    pub fn new(by: Option<By>, fields: Fields) -> Result<Self, PlanError> {
        let named = [
            (LookupField::Actor, fields.actor),
            (LookupField::Action, fields.action),
            (LookupField::Resource, fields.resource),
        ];
        for (field, value) in &named {
            if let Some(value) = value {
                check_length(*field, value)?;
            }
        }
        let given: Vec<LookupField> = named
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(f, _)| *f)
            .collect();
        let index = match by {
            Some(by) => match by.field() {
                Some(field) if !given.contains(&field) => {
                    return Err(PlanError::ByWithoutValue {
                        by: field.attribute(),
                    });
                }
                field => field,
            },
            None => match given.as_slice() {
                [] => None,
                [one] => Some(*one),
                several => {
                    let flags: Vec<String> = several
                        .iter()
                        .map(|f| format!("--{}", f.attribute()))
                        .collect();
                    let choices: Vec<String> = several
                        .iter()
                        .map(|f| format!("--by {}", f.attribute()))
                        .collect();
                    return Err(PlanError::WhichIndex {
                        given: join(&flags, "and"),
                        choices: join(&choices, "or"),
                    });
                }
            },
        };
        let mut source = Source::Time;
        let mut filters = Vec::new();
        let mut checks = Vec::new();
        for (field, value) in named {
            let Some(value) = value else { continue };
            if Some(field) == index {
                // The key is the value or its hash, which another value may be spelled as: the
                // index keeps only the items of this value (it projects the field), and the full
                // items read are checked again.
                filters.push((field.attribute(), value.clone()));
                checks.push((field.attribute(), value.clone()));
                source = Source::Lookup { field, value };
            } else {
                filters.push((field.attribute(), value));
            }
        }
        if let Some(outcome) = fields.outcome {
            filters.push(("outcome", outcome.as_str().to_owned()));
        }
        if let Some(ip) = fields.source_ip {
            filters.push(("sourceIp", ip.to_string()));
        }
        if let Some(sender) = fields.sender {
            if sender.is_empty() {
                return Err(PlanError::Empty { flag: "sender" });
            }
            // The time index projects every attribute; a lookup index does not project it.
            match source {
                Source::Time => filters.push((SENDER_ID, sender)),
                Source::Lookup { .. } => checks.push((SENDER_ID, sender)),
            }
        }
        Ok(Self {
            source,
            filters,
            checks,
        })
    }

    /// Whether every item the index keeps is a row (unless the table no longer holds it): the
    /// checks on the full items drop nothing the filters kept, so that `--limit` may stop
    /// reading the index after that many keys.
    pub fn index_keeps_only_rows(&self) -> bool {
        self.checks.iter().all(|check| self.filters.contains(check))
    }

    /// The same query read from the time index (for a table without the lookup index): every
    /// event of the range is read, and DynamoDB keeps those that pass every filter and check (the
    /// time index projects every attribute, `senderId` too). A time query is returned unchanged.
    pub fn on_time_index(&self) -> Self {
        let mut filters = self.filters.clone();
        for check in &self.checks {
            if !filters.contains(check) {
                filters.push(check.clone());
            }
        }
        Self {
            source: Source::Time,
            filters,
            checks: Vec::new(),
        }
    }

    /// The index it reads.
    pub fn index(&self) -> &'static str {
        match &self.source {
            Source::Time => TIME_INDEX,
            Source::Lookup { field, .. } => lookup_index(*field).name,
        }
    }

    /// The FilterExpression (`#f_a = :f_a AND …`), none without filters. Every attribute it names
    /// is in every index's projection (the lookup indexes project the five structured fields).
    pub fn filter(&self) -> Option<Filter> {
        if self.filters.is_empty() {
            return None;
        }
        let terms: Vec<String> = self
            .filters
            .iter()
            .map(|(name, _)| format!("#f_{name} = :f_{name}"))
            .collect();
        Some(Filter {
            expression: terms.join(" AND "),
            names: self
                .filters
                .iter()
                .map(|(name, _)| (format!("#f_{name}"), (*name).to_owned()))
                .collect(),
            values: self
                .filters
                .iter()
                .map(|(name, value)| (format!(":f_{name}"), value.clone()))
                .collect(),
        })
    }
}

/// `--outcome`: one of the stored outcomes.
pub fn parse_outcome(text: &str) -> Result<EventOutcome, String> {
    EventOutcome::parse(text).ok_or_else(|| "one of success, failure, unknown".to_owned())
}

/// `--source-ip`: an IPv4 or IPv6 address in any form the function accepts; matched in the form
/// it stores (`2001:DB8::1` finds `2001:db8::1`).
pub fn parse_source_ip(text: &str) -> Result<IpAddr, String> {
    parse_ip(text.trim()).ok_or_else(|| {
        "not an IPv4 or IPv6 address (e.g. 192.0.2.10 or 2001:db8::1; no port, no zone)".to_owned()
    })
}

fn check_length(field: LookupField, value: &str) -> Result<(), PlanError> {
    let flag = field.attribute();
    let max = match field {
        LookupField::Actor => MAX_ACTOR_CHARS,
        LookupField::Action => MAX_ACTION_CHARS,
        LookupField::Resource => MAX_RESOURCE_CHARS,
    };
    let chars = value.chars().count();
    if chars == 0 {
        return Err(PlanError::Empty { flag });
    }
    if chars > max {
        return Err(PlanError::TooLong { flag, chars, max });
    }
    Ok(())
}

/// "a and b", "a, b and c".
fn join(items: &[String], last: &str) -> String {
    match items.split_last() {
        Some((tail, [])) => tail.clone(),
        Some((tail, rest)) => format!("{} {last} {tail}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_on_the_time_index_filters_by_its_value_and_its_checks() {
        let mut given = fields(Some("alice"), Some("invoice.delete"), None);
        given.sender = Some("AROA:billing".to_owned());
        let lookup = Plan::new(Some(By::Actor), given.clone()).unwrap();
        let time = lookup.on_time_index();
        assert_eq!(time.source, Source::Time);
        assert_eq!(time.index(), TIME_INDEX);
        assert!(time.checks.is_empty());
        assert_eq!(
            time.filters,
            vec![
                ("actor", "alice".to_owned()),
                ("action", "invoice.delete".to_owned()),
                (SENDER_ID, "AROA:billing".to_owned()),
            ]
        );
        assert_eq!(time, Plan::new(Some(By::Time), given).unwrap());
    }

    fn fields(actor: Option<&str>, action: Option<&str>, resource: Option<&str>) -> Fields {
        Fields {
            actor: actor.map(str::to_owned),
            action: action.map(str::to_owned),
            resource: resource.map(str::to_owned),
            ..Fields::default()
        }
    }

    #[test]
    fn the_one_field_given_picks_its_index_and_none_reads_the_time_index() {
        let plan = Plan::new(None, fields(Some("alice"), None, None)).unwrap();
        assert_eq!(
            plan.source,
            Source::Lookup {
                field: LookupField::Actor,
                value: "alice".into()
            }
        );
        assert_eq!(plan.index(), "byActor");
        // The value is kept by the index's filter and checked again on the full items.
        let alice = [("actor", "alice".to_owned())];
        assert_eq!(
            (&plan.filters[..], &plan.checks[..]),
            (&alice[..], &alice[..])
        );
        assert_eq!(plan.filter().unwrap().expression, "#f_actor = :f_actor");
        assert!(plan.index_keeps_only_rows());
        let plan = Plan::new(None, fields(None, None, Some("invoice/4711"))).unwrap();
        assert_eq!(plan.index(), "byResource");
        let plan = Plan::new(None, Fields::default()).unwrap();
        assert_eq!((&plan.source, plan.index()), (&Source::Time, "byAuditTime"));
        assert!(plan.filters.is_empty() && plan.checks.is_empty() && plan.filter().is_none());
    }

    #[test]
    fn a_value_spelled_like_another_values_hash_is_filtered_and_checked_by_itself() {
        // `sha256:<hex>` is short, so it is its own key, the key of the value whose hash it is.
        let hashed = audit_model::keys::lookup_key_of_shard(&"x".repeat(2000), 0);
        let spelled = hashed.trim_end_matches("#0").to_owned();
        assert_eq!(audit_model::keys::lookup_key_of_shard(&spelled, 0), hashed);
        for value in [spelled, "x".repeat(1024), "é".repeat(1024)] {
            let plan = Plan::new(None, fields(Some(&value), None, None)).unwrap();
            let exact = [("actor", value)];
            assert_eq!(
                (&plan.filters[..], &plan.checks[..]),
                (&exact[..], &exact[..])
            );
        }
    }

    #[test]
    fn sender_filters_a_time_query_and_is_checked_on_a_lookups_full_items() {
        let sender = |fields: Fields| Fields {
            sender: Some("AROAEXAMPLE:producer".to_owned()),
            ..fields
        };
        let plan = Plan::new(None, sender(Fields::default())).unwrap();
        assert_eq!(plan.index(), "byAuditTime");
        assert_eq!(
            plan.filters,
            [("senderId", "AROAEXAMPLE:producer".to_owned())]
        );
        assert!(plan.checks.is_empty() && plan.index_keeps_only_rows());
        assert_eq!(
            plan.filter().unwrap().expression,
            "#f_senderId = :f_senderId"
        );

        // The lookup indexes do not project senderId: the full items are checked instead.
        let plan = Plan::new(None, sender(fields(None, Some("user.login"), None))).unwrap();
        assert_eq!(plan.index(), "byAction");
        assert_eq!(plan.filters, [("action", "user.login".to_owned())]);
        assert_eq!(
            plan.checks,
            [
                ("action", "user.login".to_owned()),
                ("senderId", "AROAEXAMPLE:producer".to_owned())
            ]
        );
        assert!(
            !plan.index_keeps_only_rows(),
            "--limit counts rows, not keys"
        );

        let empty = Fields {
            sender: Some(String::new()),
            ..Fields::default()
        };
        assert_eq!(
            Plan::new(None, empty).unwrap_err().to_string(),
            "--sender is empty: no event has an empty sender"
        );
    }

    #[test]
    fn two_fields_without_by_name_the_fix() {
        let error = Plan::new(None, fields(Some("alice"), Some("user.login"), None)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "--actor and --action given: say which index to read with --by actor or --by action (the others filter what it reads), or --by time to read the time index and filter by all of them"
        );
        let error = Plan::new(None, fields(Some("a"), Some("b"), Some("c"))).unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("--actor, --action and --resource given: say which index to read with --by actor, --by action or --by resource"),
            "{error}"
        );
    }

    #[test]
    fn by_picks_the_index_and_the_other_fields_filter() {
        let given = Fields {
            outcome: Some(EventOutcome::Failure),
            source_ip: Some(parse_source_ip("2001:DB8:0::1").unwrap()),
            ..fields(Some("alice"), Some("invoice.delete"), Some("invoice/4711"))
        };
        let plan = Plan::new(Some(By::Action), given.clone()).unwrap();
        assert_eq!(plan.index(), "byAction");
        assert_eq!(
            plan.filters,
            [
                ("actor", "alice".to_owned()),
                ("action", "invoice.delete".to_owned()),
                ("resource", "invoice/4711".to_owned()),
                ("outcome", "failure".to_owned()),
                ("sourceIp", "2001:db8::1".to_owned()),
            ]
        );
        assert_eq!(plan.checks, [("action", "invoice.delete".to_owned())]);
        let filter = plan.filter().unwrap();
        assert_eq!(
            filter.expression,
            "#f_actor = :f_actor AND #f_action = :f_action AND #f_resource = :f_resource AND #f_outcome = :f_outcome AND #f_sourceIp = :f_sourceIp"
        );
        assert_eq!(filter.names[4], ("#f_sourceIp".into(), "sourceIp".into()));
        assert_eq!(
            filter.values[4],
            (":f_sourceIp".into(), "2001:db8::1".into())
        );

        let plan = Plan::new(Some(By::Time), given).unwrap();
        assert_eq!((plan.index(), plan.filters.len()), ("byAuditTime", 5));
    }

    #[test]
    fn by_a_field_not_given_is_refused() {
        let error = Plan::new(Some(By::Resource), fields(Some("alice"), None, None)).unwrap_err();
        assert_eq!(error.to_string(), "--by resource needs --resource VALUE");
    }

    #[test]
    fn values_no_event_can_hold_are_refused() {
        let error = Plan::new(None, fields(Some(""), None, None)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "--actor is empty: no event has an empty actor"
        );
        let long = "x".repeat(257);
        let error = Plan::new(None, fields(None, Some(&long), None)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "--action has 257 characters: no stored action has more than 256"
        );
        assert!(Plan::new(None, fields(Some(&"é".repeat(1024)), None, None)).is_ok());
    }

    #[test]
    fn outcome_and_source_ip_are_validated_and_the_ip_is_canonical() {
        assert_eq!(parse_outcome("failure"), Ok(EventOutcome::Failure));
        assert_eq!(
            parse_outcome("FAILED").unwrap_err(),
            "one of success, failure, unknown"
        );
        let ip = |text| parse_source_ip(text).map(|ip| ip.to_string());
        assert_eq!(ip("2001:DB8:0:0:0:0:0:1").as_deref(), Ok("2001:db8::1"));
        assert_eq!(ip("::FFFF:192.0.2.1").as_deref(), Ok("::ffff:192.0.2.1"));
        assert_eq!(ip("192.0.2.10").as_deref(), Ok("192.0.2.10"));
        for bad in [
            "192.0.2.300",
            "192.0.2.1:443",
            "fe80::1%eth0",
            "localhost",
            "",
        ] {
            assert!(
                ip(bad).unwrap_err().starts_with("not an IPv4 or IPv6"),
                "{bad}"
            );
        }
    }
}
