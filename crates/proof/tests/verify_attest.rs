//! verify's check of the receiver's attestations (docs/archive.md "Items attested at birth"): a
//! trail the function attested item by item, written and sealed by the archiver's own sealer
//! (tests/support), then items put in the table behind the function, archived as any INSERT is:
//! each reported once as `item not attested`, with its `messageId` and why.

use audit_model::archive::ObjectKind;
use audit_model::digest::ProblemKind;
use audit_proof::verify::ports::TableItem;
use audit_proof::verify::report::Problem;
use chrono::Duration;
use serde_json::{Map, Value};

mod support;

use support::*;

/// A trail of five minutes the function attested, sealed.
async fn attested_trail() -> World {
    let mut world = World::attesting();
    let base = at(START);
    for minute in [0i64, 1, 3] {
        let when = base + Duration::minutes(minute) + Duration::seconds(20);
        let ids: Vec<String> = (0..3).map(|i| format!("m-{minute:02}-{i}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        world.events(&ids, when, when + Duration::seconds(2));
    }
    world
}

const TO: &str = "2026-11-22T10:04:59.999Z";

/// A real item's fields copied under a new `messageId`, `edit`ed, put straight into the table
/// and (when `archived`) archived as the archiver archives any INSERT; its line.
fn forge(
    world: &mut World,
    from: &str,
    id: &str,
    archived: bool,
    edit: impl FnOnce(&mut Map<String, Value>),
) -> String {
    let real = world
        .table
        .get_item(from, &canonical(from_minute(from)))
        .unwrap();
    let mut fields: Map<String, Value> = serde_json::from_str(&real.line).unwrap();
    fields.insert("messageId".into(), Value::String(id.into()));
    edit(&mut fields);
    let line = Value::Object(fields).to_string();
    world.table.put(TableItem {
        message_id: id.to_owned(),
        line: line.clone(),
        ..real.clone()
    });
    if archived {
        world.sequence += 10;
        let when = from_minute(from) + Duration::seconds(3);
        write_object(
            &world.archive,
            ObjectKind::Trail,
            when,
            length(),
            world.sequence,
            std::slice::from_ref(&line),
        );
    }
    line
}

/// When the item `m-MM-i` was written.
fn from_minute(id: &str) -> chrono::DateTime<chrono::Utc> {
    let minute: i64 = id[2..4].parse().unwrap();
    at(START) + Duration::minutes(minute) + Duration::seconds(20)
}

fn canonical(at: chrono::DateTime<chrono::Utc>) -> String {
    audit_model::message::canonical_time(at)
}

async fn verify(
    world: &World,
    with_key: bool,
) -> (Vec<Problem>, audit_proof::verify::report::Summary) {
    let mut settings = world.settings(START, TO, at(TO) + Duration::hours(3));
    if with_key {
        settings.attestations = Some(world.receiver.as_ref().unwrap().attestations());
    }
    world.verify(&settings, true).await
}

#[tokio::test]
async fn a_trail_the_function_attested_holds_and_the_summary_counts_what_was_checked() {
    let mut world = attested_trail().await;
    world.seal_through(at(TO)).await;
    let (problems, summary) = verify(&world, true).await;
    assert_eq!(problems, []);
    // 9 archived lines and the table's 9 items.
    assert_eq!(summary.attestations, Some((ATTESTATION_ARN.to_owned(), 18)));
    assert!(
        summary
            .lines()
            .iter()
            .any(|l| l.starts_with("attested  18 item line(s) checked")),
        "{:?}",
        summary.lines()
    );
}

#[tokio::test]
async fn an_item_put_behind_the_function_is_not_attested_once_whether_archived_or_not() {
    let mut world = attested_trail().await;
    // Fields copied, no attestation: archived as an INSERT.
    forge(&mut world, "m-01-0", "forged", true, |f| {
        f.remove("attestation");
    });
    // Another item's attestation copied along: it does not cover this line.
    forge(&mut world, "m-01-1", "copied", true, |_| {});
    // In the table only (the archiver has not archived it).
    forge(&mut world, "m-03-2", "unarchived", false, |f| {
        f.remove("attestation");
    });
    world.seal_through(at(TO)).await;
    let (problems, summary) = verify(&world, true).await;
    let not_attested: Vec<&Problem> = problems
        .iter()
        .filter(|p| p.kind == ProblemKind::ItemNotAttested)
        .collect();
    let subjects: Vec<&str> = not_attested.iter().map(|p| p.subject.as_str()).collect();
    assert_eq!(
        subjects,
        ["forged", "copied", "unarchived"],
        "{problems:#?}"
    );
    assert!(not_attested[0].detail.contains("it has no attestation"));
    assert!(not_attested[0].detail.contains("archived in trail/"));
    assert!(
        not_attested[1]
            .detail
            .contains("batch signature does not hold")
    );
    assert!(not_attested[2].detail.contains("(in the table)"));
    // Only the unarchived one is also something else: not archived.
    let others: Vec<_> = problems
        .iter()
        .filter(|p| p.kind != ProblemKind::ItemNotAttested)
        .map(|p| (p.kind, p.subject.as_str()))
        .collect();
    assert_eq!(others, [(ProblemKind::ItemNotArchived, "unarchived")]);
    assert_eq!(summary.problems[&ProblemKind::ItemNotAttested], 3);

    // Without the attestation key nothing tells them apart: the forged archived items pass.
    let (problems, summary) = verify(&world, false).await;
    assert!(
        problems
            .iter()
            .all(|p| p.kind != ProblemKind::ItemNotAttested)
    );
    assert_eq!(summary.attestations, None);
}

#[tokio::test]
async fn items_of_a_run_key_another_kms_key_certified_are_not_attested() {
    let mut world = attested_trail().await;
    // The function's own run, but certified by a key that is not the receiver's.
    let genuine = world.receiver.replace(Receiver::new()).unwrap();
    let when = at(START) + Duration::minutes(2) + Duration::seconds(20);
    world.events(
        &["impostor-0", "impostor-1"],
        when,
        when + Duration::seconds(2),
    );
    world.receiver = Some(genuine);
    world.seal_through(at(TO)).await;
    let (problems, _) = verify(&world, true).await;
    let found: Vec<(ProblemKind, &str)> = problems
        .iter()
        .map(|p| (p.kind, p.subject.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (ProblemKind::ItemNotAttested, "impostor-0"),
            (ProblemKind::ItemNotAttested, "impostor-1"),
        ]
    );
    assert!(problems[0].detail.contains("certificate is not signed"));
}
