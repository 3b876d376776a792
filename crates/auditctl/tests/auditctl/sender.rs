//! Owns who sent it: `senderId` (the sender SQS attests) and `originalSenderId` shown in every
//! format beside the claimed `actor`, and `--sender` on a time query and a lookup. Must not know
//! how the function learns the sender (the items get it directly here).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::Value;

use crate::harness::*;
use crate::lookups::{Event, expected, is, lookup, structured_events, write_events};
use crate::support::*;

/// A user's sender id, and a role session's (`<RoleId>:<session>`).
const USER: &str = "AIDAEXAMPLEUSERALICE1";
const ROLE: &str = "AROAEXAMPLEROLEBILLING:billing-7";
/// The first sender of the one redriven item.
const FIRST: &str = "AIDAEXAMPLEFIRSTSEND1";

/// The structured events, each item given a `senderId` (about half the role, by a hash of the
/// messageId, whatever actor it claims), and `e-23-00` an `originalSenderId` as a redrive leaves it. Returns each
/// messageId's sender.
async fn write_sent_events(moto: &Moto) -> (Vec<Event>, HashMap<String, &'static str>) {
    let events = structured_events();
    write_events(moto, &events).await;
    let client = moto.client();
    let mut senders = HashMap::new();
    for item in scan(&client, TABLE).await {
        let id = s(&item, "messageId");
        let sender = match audit_model::message::fnv1a_32(id.as_bytes()) % 2 {
            0 => USER,
            _ => ROLE,
        };
        let mut update = client
            .update_item()
            .table_name(TABLE)
            .key("messageId", AttributeValue::S(id.clone()))
            .key("auditTime", AttributeValue::S(s(&item, "auditTime")))
            .update_expression("SET senderId = :s")
            .expression_attribute_values(":s", AttributeValue::S(sender.to_owned()));
        if id == "e-23-00" {
            update = update
                .update_expression("SET senderId = :s, originalSenderId = :o")
                .expression_attribute_values(":o", AttributeValue::S(FIRST.to_owned()));
        }
        update.send().await.expect("moto updates the item");
        senders.insert(id, sender);
    }
    (events, senders)
}

/// The CSV's lines as maps of column to field (no field before `extra` holds a comma here).
fn csv_rows(csv: &str) -> Vec<HashMap<String, String>> {
    let mut lines = csv.split("\r\n").filter(|l| !l.is_empty());
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    lines
        .map(|line| {
            header
                .iter()
                .zip(line.split(','))
                .map(|(name, field)| ((*name).to_owned(), field.to_owned()))
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn sender_and_original_sender_are_shown_in_every_format_and_by_get() {
    let moto = Moto::start();
    let (_, senders) = write_sent_events(&moto).await;
    let day = [
        "--from",
        "2026-11-23T00:00:00Z",
        "--to",
        "2026-11-23T23:59:59.999Z",
    ];

    let rows = jsonl(&ok(auditctl(
        &moto.endpoint,
        &[&["query", "--format", "jsonl"][..], &day].concat(),
        &[],
    )));
    assert!(!rows.is_empty());
    for row in &rows {
        let id = row["messageId"].as_str().unwrap();
        assert_eq!(row["senderId"].as_str(), Some(senders[id]), "{row}");
        let first = (id == "e-23-00").then_some(FIRST);
        assert_eq!(row["originalSenderId"].as_str(), first, "{row}");
    }

    let csv = ok(auditctl(
        &moto.endpoint,
        &[&["query", "--format", "csv"][..], &day].concat(),
        &[],
    ));
    let header = csv.split("\r\n").next().unwrap();
    assert!(
        header.starts_with("auditTime,messageId,actor,senderId,originalSenderId,action,"),
        "{header}"
    );
    let table = csv_rows(&csv);
    assert_eq!(table.len(), rows.len());
    for row in &table {
        assert_eq!(row["senderId"], senders[&row["messageId"]], "{row:?}");
        let first = if row["messageId"] == "e-23-00" {
            FIRST
        } else {
            ""
        };
        assert_eq!(row["originalSenderId"], first, "{row:?}");
    }

    let printed = ok(auditctl(
        &moto.endpoint,
        &[&["query"][..], &day].concat(),
        &[],
    ));
    let lines: Vec<&str> = printed.lines().collect();
    assert!(
        lines[0].contains("| senderId ") && lines[0].contains("| originalSenderId "),
        "{}",
        lines[0]
    );
    let redriven = lines.iter().find(|l| l.contains("| e-23-00 ")).unwrap();
    assert!(
        redriven.contains(&format!("| {} ", senders["e-23-00"])),
        "{redriven}"
    );
    assert!(redriven.contains(&format!("| {FIRST} ")), "{redriven}");
    let width = lines[0].chars().count();
    assert!(
        lines.iter().all(|l| l.chars().count() == width),
        "{printed}"
    );

    let get = ok(auditctl(
        &moto.endpoint,
        &["get", "e-23-00", "--format", "csv"],
        &[],
    ));
    let got = csv_rows(&get);
    assert_eq!(
        (
            got[0]["senderId"].as_str(),
            got[0]["originalSenderId"].as_str()
        ),
        (senders["e-23-00"], FIRST)
    );
    let get = jsonl(&ok(auditctl(
        &moto.endpoint,
        &["get", "e-23-00", "--format", "jsonl"],
        &[],
    )));
    assert_eq!(get[0]["originalSenderId"], Value::from(FIRST));
    let get = ok(auditctl(&moto.endpoint, &["get", "e-23-00"], &[]));
    assert!(
        get.contains("| senderId ") && get.contains(&format!("| {FIRST} ")),
        "{get}"
    );
}

#[tokio::test]
async fn sender_keeps_the_events_of_that_sender_on_a_time_query_and_a_lookup() {
    let moto = Moto::start();
    let (events, senders) = write_sent_events(&moto).await;
    let sent_by = |e: &Event, sender: &str| senders[&e.id] == sender;

    for sender in [USER, ROLE] {
        let want = expected(&events, |e| sent_by(e, sender));
        assert!(!want.is_empty() && want.len() < events.len());
        let rows = lookup(&moto, &["--sender", sender]);
        assert_eq!(keys(&rows), want, "a time query, --sender {sender}");
        let rows = lookup(&moto, &["--sender", sender, "--page-size", "3", "--desc"]);
        let mut reversed = want.clone();
        reversed.reverse();
        assert_eq!(keys(&rows), reversed, "--desc, pages of 3");
    }

    // A lookup: the events alice claims that the role sent, and that the user sent.
    for sender in [USER, ROLE] {
        let want = expected(&events, |e| is(&e.actor, "alice") && sent_by(e, sender));
        let all_alice = expected(&events, |e| is(&e.actor, "alice"));
        assert!(!want.is_empty() && want.len() < all_alice.len());
        let rows = lookup(&moto, &["--actor", "alice", "--sender", sender]);
        assert_eq!(keys(&rows), want, "--actor alice --sender {sender}");
        assert!(rows.iter().all(|r| r["senderId"] == sender));
        // --limit counts rows kept, not the index's keys (alice's first events are not all
        // this sender's).
        assert_ne!(all_alice[..3], want[..3]);
        let rows = lookup(
            &moto,
            &["--actor", "alice", "--sender", sender, "--limit", "3"],
        );
        assert_eq!(keys(&rows), want[..3], "--limit 3");
        // With the other filters, and on the time index too.
        let want = expected(&events, |e| {
            is(&e.actor, "alice") && e.outcome == Some("failure") && sent_by(e, sender)
        });
        assert!(!want.is_empty());
        for by in ["actor", "time"] {
            let rows = lookup(
                &moto,
                &[
                    "--actor",
                    "alice",
                    "--outcome",
                    "failure",
                    "--sender",
                    sender,
                    "--by",
                    by,
                ],
            );
            assert_eq!(keys(&rows), want, "--by {by}");
        }
    }
    assert!(lookup(&moto, &["--actor", "alice", "--sender", "AIDANOBODY"]).is_empty());

    let output = auditctl(
        &moto.endpoint,
        &[
            "query",
            "--sender",
            "",
            "--from",
            "2026-11-22T00:00:00Z",
            "--to",
            "2026-11-23T00:00:00Z",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--sender is empty: no event has an empty sender"),
        "{}",
        stderr(&output)
    );
}
