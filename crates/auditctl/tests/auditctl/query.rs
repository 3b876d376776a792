//! Owns the checks on `auditctl query` and `auditctl get` over time (merge order, ranges, limits,
//! formats) and the errors they name. Must not know lookups by field or the dead-letter queue.

use crate::harness::*;
use crate::support::*;

#[tokio::test]
async fn query_merges_three_days_of_shards_in_time_then_id_order_across_small_pages() {
    let moto = Moto::start();
    let expected = write_trail(&moto).await;
    assert!(expected.len() > 50);

    let output = ok(auditctl(
        &moto.endpoint,
        &[
            "query",
            "--from",
            "2026-11-22T00:00:00Z",
            "--to",
            "2026-11-24T23:59:59.999Z",
            "--format",
            "jsonl",
            "--page-size",
            "2",
        ],
        &[],
    ));
    let rows = jsonl(&output);
    assert_eq!(keys(&rows), expected);
    // Plain JSON: extra is an object, numbers keep their digits.
    assert_eq!(rows[0]["extra"]["amount"].to_string(), BIG);
    assert!(rows[0]["auditBucket"].as_str().unwrap().contains('#'));
}

#[tokio::test]
async fn desc_reverses_time_and_id_and_limit_stops_early() {
    let moto = Moto::start();
    let expected = write_trail(&moto).await;
    let range = [
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-25T00:00:00Z",
    ];

    let args = [
        &["query", "--format", "jsonl", "--desc", "--page-size", "3"][..],
        &range,
    ]
    .concat();
    let rows = jsonl(&ok(auditctl(&moto.endpoint, &args, &[])));
    let mut reversed = expected.clone();
    reversed.reverse();
    assert_eq!(keys(&rows), reversed);

    let args = [
        &["query", "--format", "jsonl", "--limit", "7", "--stats"][..],
        &range,
    ]
    .concat();
    let output = auditctl(&moto.endpoint, &args, &[]);
    let stats = stderr(&output);
    let rows = jsonl(&ok(output));
    assert_eq!(keys(&rows), expected[..7]);
    // 1 DescribeTable + the first day's 32 shards, one page each: no later day is read.
    assert!(stats.contains("7 rows, 33 requests"), "{stats}");
}

#[tokio::test]
async fn range_edges_are_inclusive_to_the_millisecond() {
    let moto = Moto::start();
    let expected = write_trail(&moto).await;
    let query = |from: &str, to: &str| {
        keys(&jsonl(&ok(auditctl(
            &moto.endpoint,
            &["query", "--from", from, "--to", to, "--format", "jsonl"],
            &[],
        ))))
    };
    let run: Vec<(String, String)> = expected
        .iter()
        .filter(|(t, _)| t == "2026-11-23T12:00:00.000Z")
        .cloned()
        .collect();
    assert_eq!(run.len(), 5);
    // Exactly the instant, given in another offset: both edges included.
    assert_eq!(
        query("2026-11-23T13:00:00+01:00", "2026-11-23T12:00:00.000Z"),
        run
    );
    // --to with sub-millisecond digits truncates: .0009 still includes .000.
    assert_eq!(
        query("2026-11-23T12:00:00Z", "2026-11-23T12:00:00.0009Z"),
        run
    );
    // --from with sub-millisecond digits rounds up: .0001 excludes .000.
    assert!(query("2026-11-23T12:00:00.0001Z", "2026-11-23T12:00:00.9Z").is_empty());
    // One millisecond before and after: nothing of the run.
    assert!(query("2026-11-23T11:59:59.000Z", "2026-11-23T11:59:59.999Z").is_empty());
    let after = query("2026-11-23T12:00:00.001Z", "2026-11-23T23:59:59.999Z");
    assert!(
        after
            .iter()
            .all(|(t, _)| t.as_str() > "2026-11-23T12:00:00.000Z")
    );
    assert_eq!(
        after,
        expected
            .iter()
            .filter(|(t, _)| t.as_str() > "2026-11-23T12:00:00.000Z" && t.as_str() < "2026-11-24")
            .cloned()
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn csv_and_table_formats_print_the_same_rows() {
    let moto = Moto::start();
    let expected = write_trail(&moto).await;
    let range = [
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-22T23:59:59Z",
    ];
    let day: Vec<&(String, String)> = expected
        .iter()
        .filter(|(t, _)| t.starts_with("2026-11-22"))
        .collect();

    let args = [&["query", "--format", "csv"][..], &range].concat();
    let csv = ok(auditctl(&moto.endpoint, &args, &[]));
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines[0],
        "auditTime,messageId,actor,senderId,originalSenderId,action,resource,outcome,sourceIp,auditText,sqsMessageId,sentAt,receivedAt,receiveCount,eventSource,extra"
    );
    assert_eq!(lines.len(), 1 + day.len());
    let first = lines[1];
    let fields: Vec<&str> = first.split(',').collect();
    let (time, id) = day[0];
    assert_eq!(
        (fields[0], fields[1], fields[2]),
        (time.as_str(), id.as_str(), ""),
        "{first}"
    );
    // No structured field (senderId is the delivery's: whatever the test's records carry).
    assert_eq!(&fields[5..9], ["", "", "", ""], "{first}");
    assert_eq!(
        (fields[9], fields[10]),
        (
            format!("text of {id}").as_str(),
            format!("sqs-{id}").as_str()
        ),
        "{first}"
    );
    assert!(
        first.ends_with(&format!(r#","{{""amount"":{BIG}}}""#)),
        "extra is quoted JSON: {first}"
    );

    let args = [&["query"][..], &range].concat();
    let table = ok(auditctl(&moto.endpoint, &args, &[]));
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].contains("auditTime") && lines[0].contains("auditText"),
        "{table}"
    );
    assert_eq!(lines.len(), 2 + day.len(), "{table}");
    assert!(lines[2].contains(&day[0].1));
    let width = lines[0].chars().count();
    assert!(
        lines.iter().all(|l| l.chars().count() == width),
        "aligned:\n{table}"
    );
}

#[tokio::test]
async fn get_prints_the_items_of_one_message_id() {
    let moto = Moto::start();
    write_trail(&moto).await;
    let rows = jsonl(&ok(auditctl(
        &moto.endpoint,
        &["get", "tie-b-23", "--format", "jsonl"],
        &[],
    )));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["auditText"], "text of tie-b-23");
    assert_eq!(rows[0]["auditTime"], "2026-11-23T12:00:00.000Z");
    let none = auditctl(&moto.endpoint, &["get", "nobody", "--format", "jsonl"], &[]);
    assert_eq!(none.status.code(), Some(1), "{}", stderr(&none));
    assert_eq!(stdout(&none), "");
}

#[tokio::test]
async fn a_missing_table_or_index_fails_with_the_fix() {
    let moto = Moto::start();
    let range = [
        "query",
        "--from",
        "2026-11-22T00:00:00Z",
        "--to",
        "2026-11-23T00:00:00Z",
    ];

    let output = auditctl(&moto.endpoint, &range, &[("TABLE_NAME", "Nope")]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("table Nope not found at")
            && message.contains(&moto.endpoint)
            && message.contains("set TABLE_NAME or --table"),
        "{message}"
    );
    let output = auditctl(&moto.endpoint, &["get", "x", "--table", "Nope"], &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));

    create_table_with(&moto.client(), "Old", false).await;
    let output = auditctl(&moto.endpoint, &range, &[("TABLE_NAME", "Old")]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("has no index byAuditTime")
            && message.contains("deploy the current template.yaml"),
        "{message}"
    );
}

#[tokio::test]
async fn bad_times_and_missing_queue_urls_say_what_to_do() {
    let moto = Moto::start();
    let output = auditctl(
        &moto.endpoint,
        &[
            "query",
            "--from",
            "2026-11-22 10:00",
            "--to",
            "2026-11-22T11:00:00Z",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output)
            .contains("--from '2026-11-22 10:00': add an offset, e.g. 2026-11-22T10:00:00Z"),
        "{}",
        stderr(&output)
    );
    let output = auditctl(
        &moto.endpoint,
        &[
            "query",
            "--from",
            "2026-11-22T12:00:00Z",
            "--to",
            "2026-11-22T11:00:00Z",
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(2), "from after to");
    let output = auditctl(
        &moto.endpoint,
        &["query", "--to", "2026-11-22T12:00:00Z"],
        &[],
    );
    assert_eq!(output.status.code(), Some(2), "a time query without --from");

    let output = auditctl(&moto.endpoint, &["dlq", "list"], &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains(
            "set DEAD_LETTER_QUEUE_URL or --dlq-url (stack output AuditDeadLetterQueueUrl)"
        ),
        "{}",
        stderr(&output)
    );
    let output = auditctl(
        &moto.endpoint,
        &["dlq", "redrive"],
        &[("DEAD_LETTER_QUEUE_URL", "http://x")],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("set AUDIT_QUEUE_URL or --queue-url"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn get_of_a_missing_id_says_not_found_and_exits_1_with_nothing_on_stdout() {
    let moto = Moto::start();
    write_trail(&moto).await;
    let output = auditctl(
        &moto.endpoint,
        &["get", "does-not-exist"],
        &[("TABLE_NAME", TABLE)],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).ends_with(&format!(
            "error: messageId does-not-exist not found in table {TABLE}: check the id (`auditctl query --from TIME --to TIME` lists the messageIds of a time), and TABLE_NAME or --table; an item older than the table's TTL is only in the archive\n"
        )),
        "{}",
        stderr(&output)
    );
    let found = ok(auditctl(
        &moto.endpoint,
        &["get", "m-22-00", "--format", "jsonl"],
        &[("TABLE_NAME", TABLE)],
    ));
    assert_eq!(jsonl(&found).len(), 1);
}

#[tokio::test]
async fn a_date_alone_is_its_whole_day_in_utc_and_a_time_query_needs_its_start() {
    let moto = Moto::start();
    let expected = write_trail(&moto).await;
    let rows = jsonl(&ok(auditctl(
        &moto.endpoint,
        &[
            "query",
            "--from",
            "2026-11-23",
            "--to",
            "2026-11-23",
            "--format",
            "jsonl",
        ],
        &[("TABLE_NAME", TABLE)],
    )));
    let day: Vec<_> = expected
        .iter()
        .filter(|(time, _)| time.starts_with("2026-11-23"))
        .cloned()
        .collect();
    assert!(!day.is_empty());
    assert_eq!(keys(&rows), day);

    let output = auditctl(&moto.endpoint, &["query"], &[("TABLE_NAME", TABLE)]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("error: a time query needs --from (a time, or a date such as "),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn the_table_fits_columns_and_wide_shows_every_column() {
    let moto = Moto::start();
    write_trail(&moto).await;
    let day = [
        "query",
        "--from",
        "2026-11-23",
        "--to",
        "2026-11-23",
        "--limit",
        "3",
    ];
    let env = [("TABLE_NAME", TABLE), ("COLUMNS", "120")];
    let fitted = auditctl(&moto.endpoint, &day, &env);
    let text = ok(fitted.clone());
    assert!(
        text.lines().all(|line| line.chars().count() <= 120),
        "{text}"
    );
    let header = text.lines().next().unwrap();
    for shown in ["auditTime", "messageId", "auditText"] {
        assert!(header.contains(shown), "{header}");
    }
    assert!(!header.contains("senderId"), "{header}");
    assert!(
        stderr(&fitted).contains("columns left out to fit 120 characters: originalSenderId, senderId, sourceIp, extra, resource, outcome, action, actor; --wide shows them"),
        "{}",
        stderr(&fitted)
    );
    assert_eq!(text.lines().count(), 2 + 3);

    let wide = ok(auditctl(
        &moto.endpoint,
        &[&day[..], &["--wide"]].concat(),
        &env,
    ));
    let header = wide.lines().next().unwrap();
    for column in [
        "auditTime",
        "messageId",
        "actor",
        "senderId",
        "originalSenderId",
        "action",
        "resource",
        "outcome",
        "sourceIp",
        "auditText",
        "extra",
    ] {
        assert!(header.contains(&format!(" {column} ")), "{header}");
    }
    assert!(header.chars().count() > 200, "{header}");
}
