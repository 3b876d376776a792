//! Owns the pages' markup through maud (escaped by default): layout, forms, rows, event, health,
//! verify, the log. Must not know HTTP, the router, how rows are read or who may see them.

use maud::{DOCTYPE, Markup, html};
use serde_json::Value;

use super::search::{PARAMETERS, Preset, Search};
use audit_trail::access::Recorded;
use audit_trail::item::TrailItem;

/// A whole page: `title`, the navigation, and `main`.
pub fn layout(title: &str, main: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · auditctl ui" }
                link rel="stylesheet" href="assets/viewer.css";
                script src="assets/viewer.js" defer {}
            }
            body {
                a class="skip" href="#main" { "Skip to the content" }
                header {
                    nav aria-label="Viewer" {
                        a href="./" class="brand" { "auditctl ui" } "\n"
                        a href="./" { "Search" } "\n"
                        a href="dlq" { "Dead letters" } "\n"
                        a href="health" { "Health" }
                    }
                }
                main id="main" tabindex="-1" { (main) }
            }
        }
    }
}

/// A refusal or failure in words, with a way to try again when it may help.
pub fn problem(status: u16, message: &str, retry: Option<&str>) -> Markup {
    html! {
        div class="problem" role="alert" {
            p { strong { "Error " (status) ":" } " " (message) }
            @if let Some(url) = retry {
                p { a class="button" href=(url) { "Retry" } }
            }
        }
    }
}

/// The note when this access was not recorded (`--no-audit-event`; a viewer with no access queue
/// does not start).
pub fn recorded_note(recorded: &Recorded) -> Markup {
    let why = match recorded {
        Recorded::Sent { .. } => return html! {},
        Recorded::Skipped => "access not recorded: auditctl ui was started with --no-audit-event",
    };
    html! { p class="note" role="note" { (why) } }
}

/// What a search past the table's hot window says: which part was read from the archive.
pub fn archive_note(window: &audit_trail::hot::HotWindow) -> Markup {
    html! {
        p class="note" role="note" {
            "Events before " (window.start) " are read from the archive: the table keeps "
            (window.days) " day(s) (RetentionDays). Later events are read from the table."
        }
    }
}

/// The range presets as `<option>`s: `chosen` selected (`default` when none is), none when the
/// range is `custom` (from and to).
fn preset_options(chosen: &str, custom: bool, default: Preset) -> Markup {
    html! {
        @for preset in Preset::ALL {
            option
                value=(preset.name())
                selected[!custom && (chosen == preset.name() || (chosen.is_empty() && preset == default))]
                { (preset.label()) }
        }
    }
}

/// The value of `name` in `values` ("" when absent).
fn value_of<'a>(values: &'a [(String, String)], name: &str) -> &'a str {
    values
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_default()
}

/// The search form, filled with what `values` gives (name, value) — a search's, or on bad input
/// what was sent.
pub fn search_form(values: &[(String, String)]) -> Markup {
    let value = |name: &str| value_of(values, name);
    let custom = values
        .iter()
        .any(|(n, v)| (n == "from" || n == "to") && !v.is_empty());
    let outcome = value("outcome");
    let input = |name: &str, label: &str| {
        html! {
            label { (label) " " input type="text" name=(name) value=(value(name)) autocomplete="off"; }
        }
    };
    // datetime-local cannot show a value with an offset: an RFC 3339 text stays as it is.
    let time = |name: &str, label: &str| {
        let v = value(name);
        let kind = if v.is_empty() || (v.len() <= 19 && !v.contains(['Z', '+'])) {
            "datetime-local"
        } else {
            "text"
        };
        html! {
            label {
                (label) " "
                input type=(kind) step="1" name=(name) value=(v) placeholder="2026-11-22T10:00:00Z";
            }
        }
    };
    html! {
        form class="search" method="get" action="./" role="search" {
            fieldset {
                legend { "When (UTC)" }
                label {
                    "Range "
                    select name="range" { (preset_options(value("range"), custom, Preset::Hour)) }
                }
                (time("from", "From"))
                (time("to", "To"))
                p class="hint" {
                    "From and to (UTC) take the place of the range; from alone runs to now."
                }
            }
            fieldset {
                legend { "Who, what, to what" }
                (input("actor", "Actor"))
                (input("action", "Action"))
                (input("resource", "Resource"))
                label {
                    "Outcome "
                    select name="outcome" {
                        option value="" { "any" }
                        @for o in ["success", "failure", "unknown"] {
                            option value=(o) selected[outcome == o] { (o) }
                        }
                    }
                }
                (input("source_ip", "Source IP"))
                (input("sender", "Sender (senderId)"))
                label {
                    input type="checkbox" name="access" value="1" checked[!value("access").is_empty()];
                    " Show access events (auditctl's own reads; hidden by default)"
                }
            }
            p { button type="submit" { "Search" } " " a href="./" { "Clear" } }
        }
    }
}

/// The pairs a search's form shows.
pub fn form_values(search: &Search) -> Vec<(String, String)> {
    search
        .given
        .iter()
        .map(|(n, v)| ((*n).to_owned(), v.clone()))
        .collect()
}

/// What a URL sent, for the form after bad input (only the parameters a search takes).
pub fn sent_values(query: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(query.as_bytes())
        .filter(|(n, _)| PARAMETERS.contains(&n.as_ref()))
        .map(|(n, v)| (n.into_owned(), v.into_owned()))
        .collect()
}

/// A time as the page shows it: UTC, in a `<time>` whose title the script gives the local
/// offset.
pub fn time(text: &str) -> Markup {
    let shown = text.replacen('T', " ", 1).replacen('Z', " UTC", 1);
    html! { time datetime=(text) title=(text) { (shown) } }
}

/// An outcome as text (and a mark), never by colour alone.
pub fn outcome(text: &str) -> Markup {
    let mark = match text {
        "success" => "✓",
        "failure" => "✗",
        "" => return html! {},
        _ => "?",
    };
    let class = if matches!(text, "success" | "failure") {
        text
    } else {
        "unknown"
    };
    html! {
        span class={ "outcome outcome-" (class) } { span aria-hidden="true" { (mark) } " " (text) }
    }
}

/// What an event's page says of one item's proof: the verdict in words, the archived line's
/// fields when a proof holds for it (what the page shows then), the fields in which the
/// table's item differs from that line, and, when the viewer has the attestation key and the
/// item does not carry the receiver's attestation, why (docs/archive.md "Items attested at
/// birth").
#[derive(Debug, Clone, Default)]
pub struct Shown {
    pub verdict: String,
    pub archived: Option<serde_json::Map<String, Value>>,
    pub differs: Vec<String>,
    pub not_attested: Option<String>,
}

/// An event's page: every item of one `messageId` (one, unless the producer reused it), each
/// field in full: the archived line's where a proof holds for it (and the table's item's
/// differing fields apart, marked as not proven), else the table's item's.
pub fn event(message_id: &str, items: &[TrailItem], proofs: &[Shown]) -> Markup {
    html! {
        h1 { "Event " code class="wrap" { (message_id) } }
        @if items.is_empty() {
            p class="empty" {
                "The table holds no event with this messageId (expired by TTL, or never written)."
            }
        }
        @for (i, item) in items.iter().enumerate() {
            @let shown = proofs.get(i);
            @let table = item_json(item);
            @match shown.and_then(|s| s.archived.as_ref()) {
                Some(line) => {
                    h2 { "As archived (the fields the proof covers)" }
                    (fields(line))
                },
                None => (fields(&table)),
            }
            @if let Some(shown) = shown {
                @let differs = !shown.differs.is_empty();
                section class="proof" aria-label="Proof" {
                    h2 { "Proof" }
                    // Beside the verdict, whatever it is: an item the receiver did not attest is
                    // never shown as proven without it.
                    @if let Some(why) = &shown.not_attested {
                        p class="problem verdict" role="alert" {
                            strong { "NOT ATTESTED: " (why) }
                            " The receiver did not write this item as it is: it was put in the table behind the function, or changed since."
                        }
                    }
                    @if differs {
                        p class="problem verdict" role="alert" { strong { (shown.verdict) } }
                    } @else {
                        p { (shown.verdict) }
                    }
                }
                @if differs {
                    section class="not-proven" aria-label="The table's item, not proven" {
                        h2 { "The table's item, where it differs (NOT PROVEN)" }
                        dl class="event" {
                            @for name in &shown.differs {
                                dt { (name) }
                                dd {
                                    @match table.get(name) {
                                        Some(value) => (field(name, value)),
                                        None => "absent from the table's item",
                                    }
                                }
                                "\n"
                            }
                        }
                    }
                }
            }
        }
    }
}

/// An item's fields as plain JSON.
fn item_json(item: &TrailItem) -> serde_json::Map<String, Value> {
    match audit_trail::output::Record::json(item) {
        Value::Object(plain) => plain,
        _ => serde_json::Map::new(),
    }
}

/// The health page: the newest sealed period, its age, and what that means.
pub fn health(
    recorded: &Recorded,
    bucket: &str,
    newest: Option<&super::health::Sealed>,
    tamper: &[String],
    now: chrono::DateTime<chrono::Utc>,
    length: audit_model::archive::PeriodLength,
) -> Markup {
    use super::health::{LOOK_BACK_DAYS, age, bounds};
    let newest = match newest {
        Some(sealed) => {
            let (from, to) = bounds(sealed.period);
            let behind = now.timestamp() - sealed.period.end();
            let late = behind
                > 2 * i64::from(length.seconds())
                    + (sealed.period.sealable_at() - sealed.period.end());
            html! {
                dl class="event" {
                    dt { "Newest sealed period" }
                    dd { (time(&from)) " – " (time(&to)) }
                    dt { "Its age" }
                    dd {
                        "ended " (age(behind))
                        @if late {
                            " — " strong { "behind" } ": more than two periods without a seal; see the archiver's log and docs/operations.md"
                        } @else {
                            " — on time"
                        }
                    }
                    dt { "Its digest" }
                    dd { code class="wrap" { (sealed.key) } }
                }
            }
        }
        None => html! {
            p class="problem" role="alert" {
                strong { "No sealed period" }
                " in the last " (LOOK_BACK_DAYS) " days: the archiver has written no digest (see docs/operations.md)."
            }
        },
    };
    html! {
        h1 { "Health" }
        (recorded_note(recorded))
        p { "Archive bucket " code { (bucket) } ", digest period " (length.seconds()) " s." }
        (newest)
        h2 { "Tamper records" }
        @if tamper.is_empty() {
            p {
                "None in the last " (LOOK_BACK_DAYS) " days: no stored item was changed or deleted behind the function's back."
            }
        } @else {
            p class="problem" role="alert" {
                strong { (tamper.len()) " tamper record object(s)" }
                " in the last " (LOOK_BACK_DAYS) " days (newest first, at most 50): stored items were changed or deleted behind the function's back. Each holds the old and new images (docs/archive.md)."
            }
            ul { @for key in tamper { li { code class="wrap" { (key) } } } }
        }
        p {
            "The page reads the digests' names only. " strong { "Verify these periods" }
            " below checks their signatures, the chain and every object of the periods in view, as "
            code { "auditctl verify --from T1 --to T2" } " does (which also takes "
            code { "--table" } " and longer ranges)."
        }
    }
}

/// The periods in view and the button that verifies them (disabled, with `no_key` as why, when
/// the viewer has no digest key).
pub fn verify_form(values: &[(String, String)], no_key: Option<&str>) -> Markup {
    let value = |name: &str| value_of(values, name);
    let custom = !value("from").is_empty();
    let time = |name: &str, label: &str| {
        html! {
            label {
                (label) " "
                input type="text" name=(name) value=(value(name)) placeholder="2026-11-22T10:00:00Z" autocomplete="off";
            }
        }
    };
    html! {
        h2 id="verify-h" { "Verify" }
        form class="verify" method="post" action="health" aria-labelledby="verify-h" {
            fieldset {
                legend { "Periods in view (UTC)" }
                label {
                    "Range "
                    select name="range" {
                        option value="" selected[custom] { "From and to" }
                        (preset_options(value("range"), custom, Preset::Day))
                    }
                }
                (time("from", "From"))
                (time("to", "To"))
                p class="hint" {
                    "From and to take the place of the range; at most "
                    (super::checks::MAX_VERIFY_DAYS)
                    " days of periods (auditctl verify takes longer ranges)."
                }
            }
            p {
                button type="submit" formmethod="get" { "Show" } " "
                button type="submit" name="run" value="1" disabled[no_key.is_some()]
                    aria-describedby=[no_key.map(|_| "why-no-verify")] { "Verify these periods" }
            }
            @if let Some(why) = no_key {
                p class="note" id="why-no-verify" { (why) }
            }
        }
    }
}

/// What a verify run checked, then every problem it found, a line each (its kind, its key or
/// messageId, the detail), or that it found none.
pub fn verified(verified: &super::checks::Verified) -> Markup {
    let summary = &verified.summary;
    let listed = verified.problems.len() as u64;
    html! {
        section class="verified" aria-label="Verify's outcome" {
            p {
                "Verify ran over " (time(&verified.range.from)) " – " (time(&verified.range.to))
                ", as " code { "auditctl verify --from " (verified.range.from) " --to " (verified.range.to) } "."
            }
            @if summary.holds() {
                p class="verdict" role="status" {
                    strong { "verified: no problem" } " — the trail of these periods is as sealed."
                }
            } @else {
                p class="problem verdict" role="alert" {
                    strong { (summary.problem_count()) " problem(s) found" }
                }
                ul class="problems" {
                    @for problem in &verified.problems {
                        li {
                            strong class="kind" { (problem.kind.to_string()) } " "
                            code class="wrap" { (problem.subject) } " "
                            (problem.detail)
                        }
                    }
                }
                @if listed < summary.problem_count() {
                    p { "The first " (listed) " are listed; auditctl verify prints them all." }
                }
            }
            h3 { "Checked" }
            ul class="checked" { @for line in summary.lines() { li { (line) } } }
        }
    }
}

/// A verify run that failed or was stopped, with a retry when it may help.
pub fn verify_failed(status: u16, message: &str, retry: Option<&str>) -> Markup {
    html! {
        section class="verified" aria-label="Verify's outcome" {
            p { "Verify did not finish." }
            (problem(status, message, retry))
        }
    }
}

/// The transparency log's newest checkpoint, its signature and the witnesses' cosignatures (or
/// why they could not be read, with a retry at `retry`).
pub fn log_head(head: &Result<Option<super::checks::LogHead>, String>, retry: &str) -> Markup {
    let shown = match head {
        Err(error) => problem(
            502,
            &format!("the log could not be read: {error}"),
            Some(retry),
        ),
        Ok(None) => html! {
            p {
                "No checkpoint yet: the archiver has not sealed a period into the log (docs/archive.md \"The transparency log\")."
            }
            p { "No witness has cosigned yet." }
        },
        Ok(Some(head)) => checkpoint(head),
    };
    html! { h2 { "Transparency log" } (shown) }
}

/// The log's newest checkpoint as the health page shows it.
fn checkpoint(head: &super::checks::LogHead) -> Markup {
    use super::checks::LogSignature;
    let signature = match &head.signature {
        LogSignature::Holds => html! { "holds (checked with the digest key's public key)" },
        LogSignature::Fails(why) => html! { strong { "does not hold" } ": " (why) },
        LogSignature::NotChecked(why) => html! { "not checked: " (why) },
    };
    let sealed = match &head.sealed {
        Some((period, sealed_at)) => {
            let (from, to) = super::health::bounds(*period);
            html! {
                "with the period " (time(&from)) " – " (time(&to)) ", sealed at " (time(sealed_at))
            }
        }
        None => html! { "not known (the newest digest carries another tree)" },
    };
    html! {
        dl class="event" {
            dt { "Newest checkpoint" }
            dd {
                "tree size " (head.size) " ("
                code class="wrap" { (audit_model::note::checkpoint_key(head.size)) } ")"
            }
            dt { "Sealed" }
            dd { (sealed) }
            dt { "Log signature" }
            dd { (signature) }
        }
        @let verified = head.cosignatures.iter().filter(|c| c.verified).count();
        @let unverified = head.cosignatures.len() - verified;
        @match head.cosigned_size {
            None => p { "No witness has cosigned yet." },
            Some(size) => {
                p {
                    "Cosignatures of "
                    @if size == head.size {
                        "the newest checkpoint (tree size " (size) ")"
                    } @else {
                        "tree size " (size) ", the newest cosigned (none cosigned the newest yet)"
                    }
                    ": " (verified) " verified with the witness keys given (auditctl ui --witness-key)"
                    @if unverified > 0 {
                        "; " strong { (unverified) " unverified" } ", not counted: anyone who can write under log/cosignatures/ can store a line naming a witness"
                    }
                    ":"
                }
                div class="table-wrap" {
                    table class="rows" id="cosignatures" {
                        thead {
                            tr {
                                th scope="col" { "Witness" }
                                th scope="col" { "Key id" }
                                th scope="col" { "Cosigned at (UTC)" }
                                th scope="col" { "Signature" }
                            }
                        }
                        tbody {
                            @for cosignature in &head.cosignatures {
                                tr {
                                    td { code { (cosignature.witness) } }
                                    td { code { (cosignature.key_id) } }
                                    td {
                                        @match cosignature.at {
                                            Some(at) => (time(&at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))),
                                            None => "not a timestamped cosignature",
                                        }
                                    }
                                    td {
                                        @if cosignature.verified {
                                            "verified with the witness's key"
                                        } @else {
                                            strong { "unverified" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The order an event's fields are shown in; any other after them, by name.
const FIELD_ORDER: [&str; 17] = [
    "auditTime",
    "messageId",
    "actor",
    "action",
    "resource",
    "outcome",
    "sourceIp",
    "auditText",
    "senderId",
    "originalSenderId",
    "sqsMessageId",
    "sentAt",
    "receivedAt",
    "receiveCount",
    "eventSource",
    "extra",
    "auditBucket",
];

fn fields(plain: &serde_json::Map<String, Value>) -> Markup {
    let mut names: Vec<&String> = plain.keys().collect();
    names.sort_by_key(|n| {
        (
            FIELD_ORDER
                .iter()
                .position(|f| f == n)
                .unwrap_or(FIELD_ORDER.len()),
            (*n).clone(),
        )
    });
    html! {
        dl class="event" {
            @for name in names {
                dt { (name) }
                dd { (field(name, &plain[name])) }
                "\n"
            }
            @if !plain.contains_key("senderId") {
                dt { "senderId" }
                dd {
                    "not recorded: the item was written before senderId was kept, or delivered without a SenderId"
                }
            }
        }
    }
}

/// One field's value as an event's page shows it.
fn field(name: &str, value: &Value) -> Markup {
    match (name, value) {
        ("auditTime" | "receivedAt" | "sentAt", Value::String(t)) => time(t),
        ("outcome", Value::String(o)) => outcome(o),
        (_, Value::String(text)) => html! { span class="wrap" { (text) } },
        (_, Value::Object(_) | Value::Array(_)) => html! {
            pre class="json" { (serde_json::to_string_pretty(value).unwrap_or_default()) }
        },
        (_, other) => html! { (other.to_string()) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_in_html_and_attributes() {
        let hostile = r#"<a href="x">'&'</a>"#;
        let html = time(hostile).into_string();
        assert_eq!(
            html,
            "<time datetime=\"&lt;a href=&quot;x&quot;&gt;'&amp;'&lt;/a&gt;\" \
             title=\"&lt;a href=&quot;x&quot;&gt;'&amp;'&lt;/a&gt;\">\
             &lt;a href=&quot;x&quot;&gt;'&amp;'&lt;/a&gt;</time>",
            "maud quotes every attribute with \", so ' needs no escape"
        );
    }

    #[test]
    fn an_event_without_a_sender_says_so() {
        let item = TrailItem::from(std::collections::HashMap::from([(
            "messageId".to_owned(),
            aws_sdk_dynamodb::types::AttributeValue::S("m".into()),
        )]));
        let html = event("m", &[item], &[]).into_string();
        assert!(html.contains("<dt>senderId</dt><dd>not recorded"), "{html}");
    }

    #[test]
    fn a_proven_event_shows_its_archived_line_and_a_changed_items_fields_apart_as_not_proven() {
        use aws_sdk_dynamodb::types::AttributeValue::S;
        let item = TrailItem::from(std::collections::HashMap::from([
            ("messageId".to_owned(), S("m".into())),
            ("actor".to_owned(), S("mallory".into())),
        ]));
        let shown = Shown {
            verdict: "NOT PROVEN: the table's item differs from the archived event in actor."
                .into(),
            archived: serde_json::from_str(r#"{"messageId":"m","actor":"alice"}"#).ok(),
            differs: vec!["actor".into()],
            ..Shown::default()
        };
        let html = event("m", &[item], &[shown]).into_string();
        let apart = html.find("class=\"not-proven\"").expect("the item apart");
        assert!(
            html[..apart].contains("<dt>actor</dt><dd><span class=\"wrap\">alice</span>"),
            "{html}"
        );
        assert!(!html[..apart].contains("mallory"), "{html}");
        assert!(html[apart..].contains("NOT PROVEN") && html[apart..].contains("mallory"));
        assert!(html.contains("role=\"alert\"><strong>NOT PROVEN: the table's item differs"));
    }

    #[test]
    fn outcomes_are_words_not_only_colours() {
        assert!(
            outcome("failure")
                .into_string()
                .contains("✗</span> failure")
        );
        assert!(outcome("odd<").into_string().contains("outcome-unknown"));
        assert!(outcome("odd<").into_string().contains("odd&lt;"));
    }
}
