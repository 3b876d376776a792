//! Owns lookups by field (who did what, to what): structured events written through the function,
//! and the queries by actor, action, resource and the filters. Must not know the request costs.

use std::collections::HashSet;
use std::str::FromStr;

use audit_receiver::message::canonical_time;
use serde_json::Value;

use crate::harness::*;
use crate::support::*;

/// One structured event as a producer sends it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Event {
    pub(crate) id: String,
    /// As sent (any offset).
    pub(crate) time: String,
    pub(crate) actor: Option<String>,
    pub(crate) action: Option<String>,
    pub(crate) resource: Option<String>,
    pub(crate) outcome: Option<&'static str>,
    /// As sent (any text form).
    pub(crate) source_ip: Option<&'static str>,
}

impl Event {
    fn body(&self) -> Value {
        let mut body = serde_json::json!({
            "messageId": self.id,
            "auditTime": self.time,
            "amount": serde_json::Number::from_str(BIG).unwrap(),
        });
        let fields = [
            ("actor", self.actor.clone()),
            ("action", self.action.clone()),
            ("resource", self.resource.clone()),
            ("outcome", self.outcome.map(str::to_owned)),
            ("sourceIp", self.source_ip.map(str::to_owned)),
        ];
        for (name, value) in fields {
            if let Some(value) = value {
                body[name] = Value::String(value);
            }
        }
        if self.action.is_none() {
            body["auditText"] = Value::String(format!("text of {}", self.id));
        }
        body
    }

    /// (canonical auditTime, messageId): the merge key.
    fn key(&self) -> (String, String) {
        let utc = chrono::DateTime::parse_from_rfc3339(&self.time)
            .unwrap()
            .to_utc();
        (canonical_time(utc), self.id.clone())
    }

    /// The IP as stored: canonical.
    fn stored_ip(&self) -> Option<String> {
        self.source_ip
            .map(|ip| ip.parse::<std::net::IpAddr>().unwrap().to_string())
    }

    /// The shard of its lookup keys.
    fn lookup_shard(&self) -> u32 {
        audit_model::message::fnv1a_32(self.id.as_bytes()) % audit_model::keys::LOOKUP_SHARDS
    }
}

/// Writes the events through the function's own handler, in a shuffled order.
pub(crate) async fn write_events(moto: &Moto, events: &[Event]) {
    create_table(&moto.client(), TABLE).await;
    write_into(moto, events).await;
}

/// Writes the events through the function's own handler into the table that is there.
pub(crate) async fn write_into(moto: &Moto, events: &[Event]) {
    let handler = handler(&moto.endpoint, TABLE, settings());
    let mut shuffled = events.to_vec();
    fastrand::seed(18);
    fastrand::shuffle(&mut shuffled);
    for chunk in shuffled.chunks(10) {
        let records = chunk
            .iter()
            .map(|e| record(&format!("sqs-{}", e.id), &e.body().to_string()))
            .collect();
        let response = handler.handle(event(records)).await.unwrap();
        assert!(failed(&response).is_empty(), "{response:?}");
    }
}

/// The keys of the events that `keep` keeps, in (auditTime, messageId) order.
pub(crate) fn expected(events: &[Event], keep: impl Fn(&Event) -> bool) -> Vec<(String, String)> {
    let mut keys: Vec<(String, String)> =
        events.iter().filter(|e| keep(e)).map(Event::key).collect();
    keys.sort();
    keys
}

/// Three UTC days of structured events: three actors, four actions, two resources, outcomes and
/// addresses mixed (the same IPv6 address sent in two text forms), times sent with offsets, a
/// run of equal times per day across shards, and events without an actor (free text only, or an
/// action only).
pub(crate) fn structured_events() -> Vec<Event> {
    let mut events = Vec::new();
    for day in 22..=24 {
        for i in 0..12usize {
            let hour = i * 2;
            let time = if i % 2 == 0 {
                format!("2026-11-{day}T{hour:02}:15:00.500Z")
            } else {
                format!("2026-11-{day}T{:02}:15:00.500+01:00", hour + 1)
            };
            events.push(Event {
                id: format!("e-{day}-{i:02}"),
                time,
                actor: Some(["alice", "bob", "mallory"][i % 3].to_owned()),
                action: Some(
                    [
                        "invoice.delete",
                        "user.login",
                        "invoice.view",
                        "user.logout",
                    ][i % 4]
                        .to_owned(),
                ),
                resource: [Some("invoice/1"), Some("invoice/2"), None][(i / 3) % 3]
                    .map(str::to_owned),
                outcome: [Some("success"), Some("failure"), None][(i / 2) % 3],
                source_ip: [
                    Some("192.0.2.10"),
                    Some("2001:DB8:0:0::1"),
                    None,
                    Some("2001:db8::1"),
                ][(i / 3 + i / 6) % 4],
            });
        }
        // Equal times: alice deleting invoice/1 four times at one instant, ids out of order.
        for id in ["tie-d", "tie-a", "tie-c", "tie-b"] {
            events.push(Event {
                id: format!("{id}-{day}"),
                time: format!("2026-11-{day}T12:00:00.000Z"),
                actor: Some("alice".into()),
                action: Some("invoice.delete".into()),
                resource: Some("invoice/1".into()),
                outcome: Some("failure"),
                source_ip: Some("2001:db8::1"),
            });
        }
        // No actor: free text only, and an action only.
        for i in 0..2 {
            events.push(Event {
                id: format!("plain-{day}-{i}"),
                time: format!("2026-11-{day}T12:00:00.000Z"),
                ..Event::default()
            });
            events.push(Event {
                id: format!("anon-{day}-{i}"),
                time: format!("2026-11-{day}T12:00:00.000Z"),
                action: Some("invoice.delete".into()),
                resource: Some("invoice/1".into()),
                ..Event::default()
            });
        }
    }
    events
}

/// `auditctl query` over the three days with `args`, as jsonl rows.
pub(crate) fn lookup(moto: &Moto, args: &[&str]) -> Vec<Value> {
    let range = [
        "query",
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-24T23:59:59.999Z",
        "--format",
        "jsonl",
    ];
    jsonl(&ok(auditctl(
        &moto.endpoint,
        &[&range[..], args].concat(),
        &[],
    )))
}

pub(crate) fn is(field: &Option<String>, value: &str) -> bool {
    field.as_deref() == Some(value)
}

#[tokio::test]
async fn lookups_by_actor_action_and_resource_merge_the_shards_of_three_days_in_time_then_id_order()
{
    let moto = Moto::start();
    let events = structured_events();
    write_events(&moto, &events).await;
    let alice: Vec<&Event> = events.iter().filter(|e| is(&e.actor, "alice")).collect();
    let shards: HashSet<u32> = alice.iter().map(|e| e.lookup_shard()).collect();
    assert_eq!(shards.len(), 4, "alice's events are in all 4 shards");
    let ties: HashSet<u32> = alice
        .iter()
        .filter(|e| e.id.starts_with("tie-") && e.id.ends_with("-23"))
        .map(|e| e.lookup_shard())
        .collect();
    assert!(ties.len() >= 2, "equal times across shards: {ties:?}");

    let by_alice = expected(&events, |e| is(&e.actor, "alice"));
    for page_size in ["500", "2"] {
        let rows = lookup(&moto, &["--actor", "alice", "--page-size", page_size]);
        assert_eq!(keys(&rows), by_alice, "--page-size {page_size}");
    }
    let mut reversed = by_alice.clone();
    reversed.reverse();
    let rows = lookup(&moto, &["--actor", "alice", "--desc", "--page-size", "3"]);
    assert_eq!(keys(&rows), reversed, "--desc reverses time and id");
    // The full items: every attribute the function wrote, not only what the index projects.
    let row = &rows[0];
    assert_eq!(row["extra"]["amount"].to_string(), BIG);
    assert!(row["auditBucket"].as_str().unwrap().contains('#'));
    assert!(row["actorKey"].as_str().unwrap().starts_with("alice#"));

    let rows = lookup(&moto, &["--action", "invoice.delete"]);
    assert_eq!(
        keys(&rows),
        expected(&events, |e| is(&e.action, "invoice.delete")),
        "an action, with or without an actor"
    );
    let rows = lookup(&moto, &["--resource", "invoice/1", "--page-size", "2"]);
    assert_eq!(
        keys(&rows),
        expected(&events, |e| is(&e.resource, "invoice/1"))
    );
    assert!(lookup(&moto, &["--actor", "nobody"]).is_empty());

    // A narrower range: one day and a few hours, edges inclusive.
    let rows = jsonl(&ok(auditctl(
        &moto.endpoint,
        &[
            "query",
            "--actor",
            "alice",
            "--from",
            "2026-11-23T13:00:00+01:00",
            "--to",
            "2026-11-23T12:00:00.000Z",
            "--format",
            "jsonl",
        ],
        &[],
    )));
    assert_eq!(
        keys(&rows),
        expected(&events, |e| is(&e.actor, "alice")
            && e.key().0 == "2026-11-23T12:00:00.000Z"),
        "the run of equal times, ordered by id"
    );
    assert_eq!(rows.len(), 4);
}

#[tokio::test]
async fn lookups_filter_by_outcome_source_ip_in_any_form_and_the_other_fields() {
    let moto = Moto::start();
    let events = structured_events();
    write_events(&moto, &events).await;
    let v6 = Some("2001:db8::1".to_owned());
    // Each lookup finds exactly what the filter keeps, and something.
    let check = |args: &[&str], keep: &dyn Fn(&Event) -> bool| {
        let want = expected(&events, keep);
        assert!(!want.is_empty(), "{args:?} finds something");
        let rows = lookup(&moto, args);
        assert_eq!(keys(&rows), want, "{args:?}");
        rows
    };

    check(&["--actor", "alice", "--outcome", "failure"], &|e| {
        is(&e.actor, "alice") && e.outcome == Some("failure")
    });
    check(&["--action", "user.login", "--outcome", "success"], &|e| {
        is(&e.action, "user.login") && e.outcome == Some("success")
    });
    // The IPv6 address in a third text form finds both forms it was sent in.
    assert!(
        events
            .iter()
            .any(|e| is(&e.actor, "alice") && e.source_ip == Some("2001:DB8:0:0::1")),
        "sent in upper case too"
    );
    let rows = check(
        &["--actor", "alice", "--source-ip", "2001:0DB8:0000::0001"],
        &|e| is(&e.actor, "alice") && e.stored_ip() == v6,
    );
    assert!(rows.iter().all(|r| r["sourceIp"] == "2001:db8::1"));
    check(&["--actor", "alice", "--source-ip", "192.0.2.10"], &|e| {
        is(&e.actor, "alice") && e.stored_ip().as_deref() == Some("192.0.2.10")
    });
    check(
        &["--resource", "invoice/2", "--source-ip", "2001:db8::1"],
        &|e| is(&e.resource, "invoice/2") && e.stored_ip() == v6,
    );

    // The other fields: --by names the index, the rest filter.
    let both = |e: &Event| is(&e.actor, "alice") && is(&e.action, "invoice.delete");
    for by in ["actor", "action"] {
        check(
            &["--actor", "alice", "--action", "invoice.delete", "--by", by],
            &both,
        );
    }
    check(
        &[
            "--actor",
            "bob",
            "--action",
            "user.login",
            "--resource",
            "invoice/1",
            "--outcome",
            "success",
            "--by",
            "resource",
        ],
        &|e| {
            is(&e.actor, "bob")
                && is(&e.action, "user.login")
                && is(&e.resource, "invoice/1")
                && e.outcome == Some("success")
        },
    );
    let rows = lookup(
        &moto,
        &[
            "--resource",
            "invoice/1",
            "--actor",
            "mallory",
            "--by",
            "resource",
            "--desc",
        ],
    );
    let mut want = expected(&events, |e| {
        is(&e.resource, "invoice/1") && is(&e.actor, "mallory")
    });
    want.reverse();
    assert!(!want.is_empty());
    assert_eq!(keys(&rows), want, "--desc with a filter");

    // The same filters on a time query (--by time, or no field that picks an index).
    check(
        &[
            "--actor",
            "alice",
            "--action",
            "invoice.delete",
            "--by",
            "time",
        ],
        &both,
    );
    check(
        &[
            "--outcome",
            "failure",
            "--source-ip",
            "2001:DB8::1",
            "--page-size",
            "2",
        ],
        &|e| e.outcome == Some("failure") && e.stored_ip() == v6,
    );
}

#[tokio::test]
async fn an_actor_too_long_for_a_dynamodb_key_is_found_by_its_lookup_exactly() {
    // 1,024 characters of 3 bytes each: a valid actor, and 3,072 bytes, over DynamoDB's 2,048-byte
    // key limit. It is keyed by its SHA-256; a second actor differing in its last character
    // shares nothing with it.
    let moto = Moto::start();
    let long = "€".repeat(1024);
    let other = format!("{}x", "€".repeat(1023));
    let event = |id: &str, actor: &str| Event {
        id: id.to_owned(),
        time: "2026-11-22T10:00:00Z".to_owned(),
        actor: Some(actor.to_owned()),
        action: Some("user.login".to_owned()),
        resource: None,
        outcome: None,
        source_ip: None,
    };
    let events = vec![event("long-1", &long), event("long-2", &other)];
    write_events(&moto, &events).await;
    let items = scan(&moto.client(), TABLE).await;
    for item in &items {
        let key = s(item, "actorKey");
        assert!(key.starts_with("sha256:") && key.len() <= 2048, "{key}");
    }
    let found = lookup(&moto, &["--actor", &long]);
    assert_eq!(keys(&found), expected(&events, |e| e.id == "long-1"));
    assert_eq!(found[0]["actor"].as_str(), Some(long.as_str()));
}

#[tokio::test]
async fn an_actor_spelled_like_another_actors_hash_finds_only_its_own_events_and_so_does_the_other()
{
    // A long actor is keyed by `sha256:<hex>`; a short actor spelled exactly so is keyed by
    // itself: the same index keys. Each lookup finds only the events of its own value.
    let moto = Moto::start();
    let long = "€".repeat(1024);
    let hashed = audit_model::keys::lookup_key_of_shard(&long, 0);
    let spelled = hashed.trim_end_matches("#0").to_owned();
    assert_eq!(audit_model::keys::lookup_key_of_shard(&spelled, 0), hashed);
    let event = |id: &str, actor: &str| Event {
        id: id.to_owned(),
        time: format!("2026-11-22T10:00:0{}Z", id.len() % 10),
        actor: Some(actor.to_owned()),
        action: Some("user.login".to_owned()),
        ..Event::default()
    };
    let events: Vec<Event> = (0..6)
        .map(|i| {
            if i % 2 == 0 {
                event(&format!("long-{i}"), &long)
            } else {
                event(&format!("spelled-{i}"), &spelled)
            }
        })
        .collect();
    write_events(&moto, &events).await;
    let shared: HashSet<String> = scan(&moto.client(), TABLE)
        .await
        .iter()
        .map(|item| s(item, "actorKey"))
        .collect();
    assert!(shared.len() < events.len(), "keys shared: {shared:?}");

    for actor in [&spelled, &long] {
        let rows = lookup(&moto, &["--actor", actor]);
        assert_eq!(keys(&rows), expected(&events, |e| is(&e.actor, actor)));
        assert!(
            rows.iter()
                .all(|r| r["actor"].as_str() == Some(actor.as_str()))
        );
        // With a filter and a limit too.
        let rows = lookup(
            &moto,
            &[
                "--actor",
                actor,
                "--action",
                "user.login",
                "--by",
                "actor",
                "--limit",
                "2",
            ],
        );
        assert_eq!(keys(&rows), expected(&events, |e| is(&e.actor, actor))[..2]);
    }
}

#[tokio::test]
async fn items_without_the_field_are_not_in_its_index_and_a_time_query_finds_them() {
    let moto = Moto::start();
    let events = structured_events();
    write_events(&moto, &events).await;

    let everything = lookup(&moto, &[]);
    assert_eq!(keys(&everything), expected(&events, |_| true));
    let plain: Vec<&Value> = everything
        .iter()
        .filter(|r| r["messageId"].as_str().unwrap().starts_with("plain-"))
        .collect();
    assert_eq!(plain.len(), 6);
    assert!(
        plain
            .iter()
            .all(|r| r.get("actorKey").is_none() && r.get("actor").is_none())
    );

    // byActor holds exactly the items with an actor: a Query per shard of each actor finds them
    // all and nothing else.
    let client = moto.client();
    let mut in_index = HashSet::new();
    for actor in ["alice", "bob", "mallory"] {
        for shard in 0..audit_model::keys::LOOKUP_SHARDS {
            let page = client
                .query()
                .table_name(TABLE)
                .index_name("byActor")
                .key_condition_expression("actorKey = :k")
                .expression_attribute_values(
                    ":k",
                    aws_sdk_dynamodb::types::AttributeValue::S(format!("{actor}#{shard}")),
                )
                .send()
                .await
                .unwrap();
            in_index.extend(page.items().iter().map(|i| s(i, "messageId")));
        }
    }
    let with_actor: HashSet<String> = events
        .iter()
        .filter(|e| e.actor.is_some())
        .map(|e| e.id.clone())
        .collect();
    assert_eq!(in_index, with_actor);
    // An action-only event is found by its action, never by an actor.
    let rows = lookup(
        &moto,
        &[
            "--action",
            "invoice.delete",
            "--resource",
            "invoice/1",
            "--by",
            "action",
        ],
    );
    assert!(rows.iter().any(|r| r["messageId"] == "anon-23-0"));
    assert!(rows.iter().filter(|r| r.get("actor").is_none()).count() == 6);
}
