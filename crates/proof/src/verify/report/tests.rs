//! The summary's words, a case each.

use super::*;

#[test]
fn a_problem_prints_kind_subject_and_detail_two_spaces_apart() {
    let problem = Problem::new(
        ProblemKind::ObjectChanged,
        "trail/dt=2026-11-22/hour=10/p1795341600-x-a0.jsonl.gz",
        "version 2 beside the sealed version 1",
    );
    assert_eq!(
        problem.to_string(),
        "object changed  trail/dt=2026-11-22/hour=10/p1795341600-x-a0.jsonl.gz  version 2 beside the sealed version 1"
    );
}

#[test]
fn the_console_prints_problems_as_lines_and_the_summary_last() {
    let mut console = Console::new(Vec::new(), false);
    console
        .problem(&Problem::new(ProblemKind::ItemMissing, "m-1", "gone"))
        .unwrap();
    let mut summary = Summary::default();
    summary.count(ProblemKind::ItemMissing);
    console.progress(
        &summary,
        Period {
            start: 0,
            length: Default::default(),
        },
        1,
    );
    console.finish(&summary).unwrap();
    let text = String::from_utf8(console.out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "item missing  m-1  gone");
    assert!(lines[1].starts_with("chain     nothing to check"));
    assert!(lines[2].starts_with("periods   0 checked"));
    assert_eq!(lines.last().unwrap(), &"problems  1 (1 item missing)");
    assert_eq!(console.printed, 1);
}

#[test]
fn the_summary_counts_problems_by_kind() {
    let mut summary = Summary {
        periods: 3,
        sealed: 2,
        ..Summary::default()
    };
    assert!(summary.holds());
    assert!(summary.lines().last().unwrap().contains("none"));
    summary.count(ProblemKind::ItemChanged);
    summary.count(ProblemKind::DigestMissing);
    summary.count(ProblemKind::ItemChanged);
    assert!(!summary.holds());
    assert_eq!(
        summary.lines().last().unwrap(),
        "problems  3 (1 digest missing, 2 item changed)"
    );
    assert_eq!(summary.lines().len(), 5);
    summary.table = Some(TableSummary::default());
    assert_eq!(summary.lines().len(), 7);
}

/// 2026-11-22T10:00:00Z.
const TEN: i64 = 1_795_341_600;

fn line<'a>(lines: &'a [String], label: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label} line in {lines:#?}"))
}

#[test]
fn a_range_that_starts_before_the_trail_counts_periods_from_its_first_and_says_where_it_begins() {
    let genesis = Period {
        start: TEN,
        length: audit_model::archive::PeriodLength::new(60).unwrap(),
    };
    let summary = Summary {
        periods: 154_966,
        before_trail: 154_960,
        sealed: 6,
        empty: 3,
        genesis: Some(genesis),
        ..Summary::default()
    };
    let lines = summary.lines();
    assert_eq!(
        line(&lines, "periods"),
        "periods   6 checked: 6 sealed (3 empty), 0 not sealed yet, 0 without a usable digest"
    );
    assert_eq!(
        line(&lines, "trail"),
        format!(
            "trail     the range starts before the trail: its first period is 2026-11-22T10:00:00Z (digest {}); the 154960 period(s) before it are not counted",
            digest_key(genesis)
        )
    );
    assert_eq!(
        lines.last().unwrap(),
        "problems  none: the trail is as sealed"
    );
    // Objects in the periods before the trail: each such period a problem, and said why.
    let summary = Summary {
        objects_before_trail: 2,
        unsealed_objects: 2,
        problems: BTreeMap::from([(ProblemKind::TrailNotSealed, 1)]),
        ..summary
    };
    let lines = summary.lines();
    assert!(
        line(&lines, "trail").ends_with(
            "; 2 object(s) in them, which no digest can prove (trail not sealed: reported above)"
        ),
        "{lines:#?}"
    );
    assert!(
        line(&lines, "objects").contains(
            "2 not covered by a digest: 2 before the trail (trail not sealed: reported above);"
        ),
        "{lines:#?}"
    );
    assert_eq!(lines.last().unwrap(), "problems  1 (1 trail not sealed)");
    // A range wholly before it, and a bucket without a chain.
    let summary = Summary {
        periods: 5,
        before_trail: 5,
        genesis: Some(genesis),
        ..Summary::default()
    };
    assert!(
        line(&summary.lines(), "periods").starts_with("periods   0 checked: 0 sealed"),
        "{:#?}",
        summary.lines()
    );
    assert!(
        line(&summary.lines(), "trail").starts_with(
            "trail     the range ends before the trail begins (its first period 2026-11-22T10:00:00Z"
        ),
        "{:#?}",
        summary.lines()
    );
    let summary = Summary {
        genesis: None,
        ..summary
    };
    assert_eq!(
        line(&summary.lines(), "trail"),
        "trail     none: no digest chain (see chain), so none of the range's 5 period(s) is checked"
    );
}

#[test]
fn a_range_within_the_trail_has_no_trail_line() {
    let summary = Summary {
        periods: 4,
        sealed: 4,
        ..Summary::default()
    };
    assert!(
        !summary.lines().iter().any(|l| l.starts_with("trail")),
        "{:#?}",
        summary.lines()
    );
}

#[test]
fn objects_not_covered_by_a_digest_say_whether_their_periods_are_not_sealed_yet_or_missing() {
    let summary = Summary {
        periods: 10,
        sealed: 6,
        empty: 2,
        not_sealed_yet: 4,
        trail_objects: 12,
        unsealed_objects: 4,
        objects_not_sealed_yet: 4,
        unsealed_span: Some(Unsealed {
            from: TEN,
            due: TEN + 4 * 60 + 30 + 660,
            newest: true,
        }),
        ..Summary::default()
    };
    let lines = summary.lines();
    assert_eq!(
        line(&lines, "periods"),
        "periods   10 checked: 6 sealed (2 empty), 4 not sealed yet (the newest 4, from 2026-11-22T10:00:00Z: within the grace, no digest is due before 2026-11-22T10:15:30Z), 0 without a usable digest"
    );
    assert_eq!(
        line(&lines, "objects"),
        "objects   12 checked (12 trail, 0 tamper); 4 not covered by a digest: 4 in periods not sealed yet (not a problem); 0 not attested; late objects: 0"
    );
    assert_eq!(
        lines.last().unwrap(),
        "problems  none: the trail is as sealed"
    );
    // One of them past its grace: a real gap, a problem.
    let mut gap = Summary {
        sealed: 5,
        not_sealed_yet: 3,
        missing: 1,
        unsealed_objects: 5,
        objects_not_sealed_yet: 3,
        unsealed_span: Some(Unsealed {
            newest: false,
            ..summary.unsealed_span.unwrap()
        }),
        ..summary
    };
    gap.count(ProblemKind::DigestMissing);
    let lines = gap.lines();
    assert_eq!(
        line(&lines, "periods"),
        "periods   10 checked: 5 sealed (2 empty), 3 not sealed yet (from 2026-11-22T10:00:00Z: within the grace, no digest is due before 2026-11-22T10:15:30Z), 1 without a usable digest (digest missing or signature invalid: reported above)"
    );
    assert!(
        line(&lines, "objects").contains(
            "5 not covered by a digest: 3 in periods not sealed yet (not a problem), 2 in periods without a usable digest (reported above);"
        ),
        "{lines:#?}"
    );
    assert_eq!(lines.last().unwrap(), "problems  1 (1 digest missing)");
}

#[test]
fn items_looked_up_but_not_compared_say_why() {
    let mut summary = Summary {
        table: Some(TableSummary {
            archived_compared: 48,
            missing: 1,
            items: 47,
            items_archived: 45,
            not_archived_yet: 1,
            not_archived: 1,
            extra_periods: 2,
            archived_late: 1,
            ..TableSummary::default()
        }),
        ..Summary::default()
    };
    summary.count(ProblemKind::ItemMissing);
    summary.count(ProblemKind::ItemNotArchived);
    let lines = summary.lines();
    let items: Vec<&String> = lines.iter().filter(|l| l.starts_with("items")).collect();
    assert_eq!(
        items,
        [
            "items     48 archived events looked up in the table, 47 found as archived: 1 not in the table (item missing: reported above)",
            "items     47 items of the table in the range looked up in the archive, 45 archived (1 late: found beyond --archive-lag): 1 not archived yet (written within --archive-lag of now), 1 not archived (item not archived: reported above); 2 period(s) read beyond the range",
        ]
    );
    assert_eq!(
        lines.last().unwrap(),
        "problems  2 (1 item missing, 1 item not archived)"
    );
    // Changed and expired: each named.
    let table = TableSummary {
        archived_compared: 10,
        changed: 1,
        expired: 2,
        items: 7,
        items_archived: 7,
        ..TableSummary::default()
    };
    assert_eq!(
        table.lines()[0],
        "items     10 archived events looked up in the table, 7 found as archived: 1 changed (item changed: reported above), 2 expired by TTL (their expiresAt passed: not a problem)"
    );
    assert_eq!(
        table.lines()[1],
        "items     7 items of the table in the range looked up in the archive, 7 archived; 0 period(s) read beyond the range"
    );
}
