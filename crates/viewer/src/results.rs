//! Owns the markup of a search's results: the summary, the export links, the rows with their
//! proof column, the access events left out, and the link to more. Must not know HTTP, the
//! router or how rows and their marks are read (lib.rs, proof_column.rs).

use maud::{Markup, html};

use super::page::{outcome, time};
use super::proof_column::Mark;
use super::search::{ACCESS, Cursor, Search};
use audit_trail::item::TrailItem;

/// One page of rows as the page shows them: each row with its proof mark, where the next page
/// begins, and how many access events reading them left out.
pub struct Shown<'a> {
    pub rows: &'a [TrailItem],
    pub marks: &'a [Mark],
    pub next: Option<&'a Cursor>,
    pub hidden: usize,
}

/// The results of a search: what it read, the export links, the access events left out, the
/// rows, and the link to more.
pub fn results(search: &Search, shown: &Shown) -> Markup {
    let fixed = search.fixed_query();
    let index = match search.plan.index() {
        "byAuditTime" => None,
        index => Some(index),
    };
    let periods = form_urlencoded::Serializer::new(String::new())
        .append_pair("from", &search.range.from)
        .append_pair("to", &search.range.to)
        .finish();
    html! {
        section class="results" aria-label="Results" {
            p class="summary" {
                "Events from " (time(&search.range.from)) " to " (time(&search.range.to))
                ", newest first"
                @if let Some(index) = index { " (index " (index) ")" }
                "."
            }
            (access_note(search, shown.hidden))
            p class="export" {
                "Export this search: "
                a href={ "export.csv?" (fixed) } download { "CSV" }
                " · "
                a href={ "export.jsonl?" (fixed) } download { "JSON lines" }
                "\n"
                span class="command" { "the same bytes as " code { (search.command("csv")) } }
            }
            p class="export" {
                a href={ "evidence.zip?" (fixed) } download { "Evidence bundle" }
                " (.zip: these events with their proofs, checked offline by "
                code { "auditctl check-proof" } "; as " code { "auditctl export --evidence" } ")"
            }
            p class="export" {
                a href={ "health?" (periods) } { "Health and verify of these periods" }
            }
            div id="chart" data-src={ "chart?" (fixed) } {
                p { a href={ "chart?" (fixed) } { "Events per hour (chart)" } }
            }
            @if shown.rows.is_empty() {
                p class="empty" { "No events in this range match." }
            }
            div class="table-wrap" {
                table class="rows" {
                    thead {
                        tr {
                            @for name in ["Time (UTC)", "Actor", "Action", "Resource", "Outcome", "Proof", "Source IP", "Sender", "Text"] {
                                th scope="col" { (name) }
                            }
                        }
                    }
                    tbody id="rows" { (row_lines(search, shown.rows, shown.marks)) }
                }
            }
            (more(search, shown.next))
        }
    }
}

/// Whether access events are shown, and the toggle that shows or hides them: how many this page
/// left out (auditctl's own reads: docs/ui.md "Access events").
fn access_note(search: &Search, hidden: usize) -> Markup {
    if search.shows_access() {
        if search.value(ACCESS).is_none() {
            return html! {};
        }
        let without = search.query_with(&[(ACCESS, "")]);
        return html! {
            p class="note access" id="access-note" {
                "Access events (auditctl's own reads) are shown. "
                a href={ "./?" (without) } { "Hide access events" }
            }
        };
    }
    let with = search.query_with(&[(ACCESS, "1")]);
    html! {
        p class="note access" id="access-note" {
            @if hidden == 0 {
                "Access events (auditctl's own reads) are hidden; none among these rows. "
            } @else {
                strong { (hidden) " access event(s) hidden" }
                " among these rows (auditctl's own reads). "
            }
            a href={ "./?" (with) } { "Show access events" }
        }
    }
}

/// The fragment a further page adds: its rows, then the link to the next (or the end).
pub fn fragment(search: &Search, shown: &Shown) -> Markup {
    html! {
        template id="page" {
            table { tbody { (row_lines(search, shown.rows, shown.marks)) } }
            (more(search, shown.next))
        }
    }
}

fn more(search: &Search, next: Option<&Cursor>) -> Markup {
    match next {
        Some(cursor) => {
            let query = search.next_query(cursor);
            html! {
                p class="more" {
                    a id="more" href={ "./?" (query) } data-rows={ "rows?" (query) } {
                        "Load more (older)"
                    }
                }
            }
        }
        None => html! { p class="more" id="end" { "End of the results." } },
    }
}

/// A row's `field` as a link to the search by it (nothing when the row has none).
fn search_link(search: &Search, row: &TrailItem, field: &str) -> Markup {
    let value = row.text(field);
    if value.is_empty() {
        return html! {};
    }
    html! {
        a href={ "./?" (search.by_field(field, &value)) } title={ "Search by this " (field) } {
            (value)
        }
    }
}

/// A row's proof mark: a word and a sign, never colour alone, and why in its title.
fn mark(mark: Option<&Mark>) -> Markup {
    let Some(mark) = mark else {
        return html! {};
    };
    let (class, sign) = match mark {
        Mark::Sealed => ("sealed", "✓"),
        Mark::Pending => ("pending", "…"),
        Mark::NotProven(_) => ("not-proven", "✗"),
        Mark::NotKnown(_) => ("not-known", "–"),
    };
    html! {
        span class={ "proof proof-" (class) } title=(mark.why()) {
            span aria-hidden="true" { (sign) } " " (mark.word())
        }
    }
}

fn row_lines(search: &Search, rows: &[TrailItem], marks: &[Mark]) -> Markup {
    html! {
        @for (i, row) in rows.iter().enumerate() {
            @let event = form_urlencoded::Serializer::new(String::new())
                .append_pair("id", &row.message_id)
                .finish();
            tr {
                td {
                    a href={ "event?" (event) } class="open" title={ "Open the event " (row.message_id) } {
                        (time(&row.audit_time))
                    }
                }
                td { (search_link(search, row, "actor")) }
                td { (search_link(search, row, "action")) }
                td { (search_link(search, row, "resource")) }
                td { (outcome(&row.text("outcome"))) }
                td { (mark(marks.get(i))) }
                td { (row.text("sourceIp")) }
                td class="mono" { (row.text("senderId")) }
                td class="text" { (row.text("auditText")) }
            }
            "\n"
        }
    }
}
