//! Owns the HTML of `auditctl ui`: the layout, the search form, the rows of results (a page, and
//! the fragment a further page adds), an event's page and the messages of a refusal or a failure.
//! Must not know how rows are read or who may see them.

use std::fmt::Write;

use serde_json::Value;

use super::search::{Cursor, PARAMETERS, Preset, Search};
use audit_trail::access::Recorded;
use audit_trail::item::TrailItem;

/// Text made safe inside HTML text and quoted attributes. Written by hand: these five
/// replacements are all the escaping the pages need, where a template engine would add a
/// dependency for them.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole page: `title`, the navigation, and `main`.
pub fn layout(title: &str, main: &str) -> String {
    format!(
        r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · auditctl ui</title>
<link rel="stylesheet" href="/assets/viewer.css">
<script src="/assets/viewer.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to the content</a>
<header><nav aria-label="Viewer">
<a href="/" class="brand">auditctl ui</a>
<a href="/">Search</a>
<a href="/dlq">Dead letters</a>
<a href="/health">Health</a>
</nav></header>
<main id="main" tabindex="-1">
{main}
</main>
</body>
</html>
"##,
        title = escape(title)
    )
}

/// A refusal or failure in words, with a way to try again when it may help.
pub fn problem(status: u16, message: &str, retry: Option<&str>) -> String {
    let mut out = format!(
        r#"<div class="problem" role="alert"><p><strong>Error {status}:</strong> {}</p>"#,
        escape(message)
    );
    if let Some(url) = retry {
        let _ = write!(
            out,
            r#"<p><a class="button" href="{}">Retry</a></p>"#,
            escape(url)
        );
    }
    out.push_str("</div>");
    out
}

/// The note when this access was not recorded (no access queue, or `--no-audit-event`).
pub fn recorded_note(recorded: &Recorded) -> String {
    let why = match recorded {
        Recorded::Sent { .. } => return String::new(),
        Recorded::Skipped => "access not recorded: auditctl ui was started with --no-audit-event",
        Recorded::NotConfigured => audit_trail::access::NOT_CONFIGURED,
    };
    format!(r#"<p class="note" role="note">{}</p>"#, escape(why))
}

/// The range presets as `<option>`s: `chosen` selected (`default` when none is), none when the
/// range is `custom` (from and to).
fn preset_options(chosen: &str, custom: bool, default: Preset) -> String {
    let mut options = String::new();
    for preset in Preset::ALL {
        let selected =
            if !custom && (chosen == preset.name() || (chosen.is_empty() && preset == default)) {
                " selected"
            } else {
                ""
            };
        let _ = write!(
            options,
            r#"<option value="{}"{selected}>{}</option>"#,
            preset.name(),
            preset.label()
        );
    }
    options
}

/// The search form, filled with what `values` gives (name, value) — a search's, or on bad input
/// what was sent.
pub fn search_form(values: &[(String, String)]) -> String {
    let value = |name: &str| {
        values
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| escape(v))
            .unwrap_or_default()
    };
    let chosen = value("range");
    let custom = values
        .iter()
        .any(|(n, v)| (n == "from" || n == "to") && !v.is_empty());
    let presets = preset_options(&chosen, custom, Preset::Hour);
    let outcome = value("outcome");
    let mut outcomes = String::from(r#"<option value="">any</option>"#);
    for o in ["success", "failure", "unknown"] {
        let selected = if outcome == o { " selected" } else { "" };
        let _ = write!(outcomes, r#"<option value="{o}"{selected}>{o}</option>"#);
    }
    let input = |name: &str, label: &str, kind: &str| {
        format!(
            r#"<label>{label} <input type="{kind}" name="{name}" value="{}" autocomplete="off"></label>"#,
            value(name)
        )
    };
    // datetime-local cannot show a value with an offset: an RFC 3339 text stays as it is.
    let time = |name: &str, label: &str| {
        let v = value(name);
        let kind = if v.is_empty() || (v.len() <= 19 && !v.contains(['Z', '+'])) {
            "datetime-local"
        } else {
            "text"
        };
        format!(
            r#"<label>{label} <input type="{kind}" step="1" name="{name}" value="{v}" placeholder="2026-11-22T10:00:00Z"></label>"#
        )
    };
    format!(
        r#"<form class="search" method="get" action="/" role="search">
<fieldset><legend>When (UTC)</legend>
<label>Range <select name="range">{presets}</select></label>
{from}
{to}
<p class="hint">From and to (UTC) take the place of the range; from alone runs to now.</p>
</fieldset>
<fieldset><legend>Who, what, to what</legend>
{actor}
{action}
{resource}
<label>Outcome <select name="outcome">{outcomes}</select></label>
{source_ip}
{sender}
</fieldset>
<p><button type="submit">Search</button> <a href="/">Clear</a></p>
</form>"#,
        from = time("from", "From"),
        to = time("to", "To"),
        actor = input("actor", "Actor", "text"),
        action = input("action", "Action", "text"),
        resource = input("resource", "Resource", "text"),
        source_ip = input("source_ip", "Source IP", "text"),
        sender = input("sender", "Sender (senderId)", "text"),
    )
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
pub fn time(text: &str) -> String {
    let shown = text.replacen('T', " ", 1).replacen('Z', " UTC", 1);
    format!(
        r#"<time datetime="{t}" title="{t}">{}</time>"#,
        escape(&shown),
        t = escape(text)
    )
}

/// An outcome as text (and a mark), never by colour alone.
pub fn outcome(text: &str) -> String {
    let mark = match text {
        "success" => "✓",
        "failure" => "✗",
        "" => return String::new(),
        _ => "?",
    };
    format!(
        r#"<span class="outcome outcome-{cls}"><span aria-hidden="true">{mark}</span> {}</span>"#,
        escape(text),
        cls = if matches!(text, "success" | "failure") {
            text
        } else {
            "unknown"
        }
    )
}

/// The results of a search: what it read, the export links, the rows, and the link to more.
pub fn results(search: &Search, rows: &[TrailItem], next: Option<&Cursor>) -> String {
    let fixed = search.fixed_query();
    let mut out = format!(
        r#"<section class="results" aria-label="Results">
<p class="summary">Events from {} to {}, newest first{}.</p>
<p class="export">Export this search: <a href="/export.csv?{q}" download>CSV</a> · <a href="/export.jsonl?{q}" download>JSON lines</a>
<span class="command">the same bytes as <code>{}</code></span></p>
<p class="export"><a href="/health?{periods}">Health and verify of these periods</a></p>
"#,
        time(&search.range.from),
        time(&search.range.to),
        match search.plan.index() {
            "byAuditTime" => String::new(),
            index => format!(" (index {index})"),
        },
        escape(&search.command("csv")),
        q = escape(&fixed),
        periods = escape(
            &form_urlencoded::Serializer::new(String::new())
                .append_pair("from", &search.range.from)
                .append_pair("to", &search.range.to)
                .finish()
        ),
    );
    let _ = writeln!(
        out,
        r#"<div id="chart" data-src="/chart?{q}"><p><a href="/chart?{q}">Events per hour (chart)</a></p></div>"#,
        q = escape(&fixed)
    );
    if rows.is_empty() {
        out.push_str(r#"<p class="empty">No events in this range match.</p>"#);
    }
    out.push_str(
        r#"<div class="table-wrap"><table class="rows">
<thead><tr><th scope="col">Time (UTC)</th><th scope="col">Actor</th><th scope="col">Action</th><th scope="col">Resource</th><th scope="col">Outcome</th><th scope="col">Source IP</th><th scope="col">Sender</th><th scope="col">Text</th></tr></thead>
<tbody id="rows">
"#,
    );
    out.push_str(&row_lines(search, rows));
    out.push_str("</tbody></table></div>\n");
    out.push_str(&more(search, next));
    out.push_str("</section>");
    out
}

/// The fragment a further page adds: its rows, then the link to the next (or the end).
pub fn fragment(search: &Search, rows: &[TrailItem], next: Option<&Cursor>) -> String {
    format!(
        "<template id=\"page\"><table><tbody>{}</tbody></table>{}</template>",
        row_lines(search, rows),
        more(search, next)
    )
}

fn more(search: &Search, next: Option<&Cursor>) -> String {
    match next {
        Some(cursor) => {
            let query = escape(&search.next_query(cursor));
            format!(
                r#"<p class="more"><a id="more" href="/?{query}" data-rows="/rows?{query}">Load more (older)</a></p>"#
            )
        }
        None => r#"<p class="more" id="end">End of the results.</p>"#.to_owned(),
    }
}

fn row_lines(search: &Search, rows: &[TrailItem]) -> String {
    let mut out = String::new();
    for row in rows {
        let link = |field: &str| {
            let value = row.text(field);
            if value.is_empty() {
                return String::new();
            }
            format!(
                r#"<a href="/?{}" title="Search by this {field}">{}</a>"#,
                escape(&search.by_field(field, &value)),
                escape(&value)
            )
        };
        let event = form_urlencoded::Serializer::new(String::new())
            .append_pair("id", &row.message_id)
            .finish();
        let text = row.text("auditText");
        let _ = writeln!(
            out,
            r#"<tr><td><a href="/event?{event}" class="open" title="Open the event {id}">{time}</a></td><td>{actor}</td><td>{action}</td><td>{resource}</td><td>{outcome}</td><td>{ip}</td><td class="mono">{sender}</td><td class="text">{text}</td></tr>"#,
            event = escape(&event),
            id = escape(&row.message_id),
            time = time(&row.audit_time),
            actor = link("actor"),
            action = link("action"),
            resource = link("resource"),
            outcome = outcome(&row.text("outcome")),
            ip = escape(&row.text("sourceIp")),
            sender = escape(&row.text("senderId")),
            text = escape(&text),
        );
    }
    out
}

/// An event's page: every item of one `messageId` (one, unless the producer reused it), each
/// field in full.
pub fn event(message_id: &str, items: &[TrailItem], proofs: &[String]) -> String {
    let mut out = format!(
        "<h1>Event <code class=\"wrap\">{}</code></h1>\n",
        escape(message_id)
    );
    if items.is_empty() {
        out.push_str(
            r#"<p class="empty">The table holds no event with this messageId (expired by TTL, or never written).</p>"#,
        );
    }
    for (i, item) in items.iter().enumerate() {
        out.push_str(&fields(item));
        if let Some(proof) = proofs.get(i) {
            let _ = writeln!(
                out,
                r#"<section class="proof" aria-label="Proof"><h2>Proof</h2><p>{}</p></section>"#,
                escape(proof)
            );
        }
    }
    out
}

/// The health page: the newest sealed period, its age, and what that means.
pub fn health(
    recorded: &Recorded,
    bucket: &str,
    newest: Option<&super::health::Sealed>,
    tamper: &[String],
    now: chrono::DateTime<chrono::Utc>,
    length: audit_model::archive::PeriodLength,
) -> String {
    use super::health::{LOOK_BACK_DAYS, age, bounds};
    let mut out = format!(
        "<h1>Health</h1>{}<p>Archive bucket <code>{}</code>, digest period {} s.</p>",
        recorded_note(recorded),
        escape(bucket),
        length.seconds()
    );
    match newest {
        Some(sealed) => {
            let (from, to) = bounds(sealed.period);
            let behind = now.timestamp() - sealed.period.end();
            let late = behind
                > 2 * i64::from(length.seconds())
                    + (sealed.period.sealable_at() - sealed.period.end());
            let _ = write!(
                out,
                r#"<dl class="event"><dt>Newest sealed period</dt><dd>{} – {}</dd><dt>Its age</dt><dd>ended {} ago{}</dd><dt>Its digest</dt><dd><code class="wrap">{}</code></dd></dl>"#,
                time(&from),
                time(&to),
                age(behind),
                if late {
                    " — <strong>behind</strong>: more than two periods without a seal; see the archiver's log and docs/operations.md"
                } else {
                    " — on time"
                },
                escape(&sealed.key)
            );
        }
        None => {
            let _ = write!(
                out,
                r#"<p class="problem" role="alert"><strong>No sealed period</strong> in the last {LOOK_BACK_DAYS} days: the archiver has written no digest (see docs/operations.md).</p>"#
            );
        }
    }
    if tamper.is_empty() {
        let _ = write!(
            out,
            "<h2>Tamper records</h2><p>None in the last {LOOK_BACK_DAYS} days: no stored item was changed or deleted behind the function's back.</p>"
        );
    } else {
        let _ = write!(
            out,
            r#"<h2>Tamper records</h2><p class="problem" role="alert"><strong>{} tamper record object(s)</strong> in the last {LOOK_BACK_DAYS} days (newest first, at most 50): stored items were changed or deleted behind the function's back. Each holds the old and new images (docs/archive.md).</p><ul>"#,
            tamper.len()
        );
        for key in tamper {
            let _ = write!(out, r#"<li><code class="wrap">{}</code></li>"#, escape(key));
        }
        out.push_str("</ul>");
    }
    out.push_str("<p>The page reads the digests' names only. <strong>Verify these periods</strong> below checks their signatures, the chain and every object of the periods in view, as <code>auditctl verify --from T1 --to T2</code> does (which also takes <code>--table</code> and longer ranges).</p>");
    out
}

/// The periods in view and the button that verifies them (disabled, with `no_key` as why, when
/// the viewer has no digest key).
pub fn verify_form(values: &[(String, String)], no_key: Option<&str>) -> String {
    let value = |name: &str| {
        values
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| escape(v))
            .unwrap_or_default()
    };
    let chosen = value("range");
    let custom = !value("from").is_empty();
    let mut presets = format!(
        r#"<option value=""{}>From and to</option>"#,
        if custom { " selected" } else { "" }
    );
    presets.push_str(&preset_options(&chosen, custom, Preset::Day));
    let time = |name: &str, label: &str| {
        format!(
            r#"<label>{label} <input type="text" name="{name}" value="{}" placeholder="2026-11-22T10:00:00Z" autocomplete="off"></label>"#,
            value(name)
        )
    };
    let button = match no_key {
        None => {
            r#"<button type="submit" name="run" value="1">Verify these periods</button>"#.to_owned()
        }
        Some(why) => format!(
            r#"<button type="submit" name="run" value="1" disabled aria-describedby="why-no-verify">Verify these periods</button></p><p class="note" id="why-no-verify">{}"#,
            escape(why)
        ),
    };
    format!(
        r#"<h2 id="verify-h">Verify</h2>
<form class="verify" method="get" action="/health" aria-labelledby="verify-h">
<fieldset><legend>Periods in view (UTC)</legend>
<label>Range <select name="range">{presets}</select></label>
{from}
{to}
<p class="hint">From and to take the place of the range; at most {max} days of periods (auditctl verify takes longer ranges).</p>
</fieldset>
<p><button type="submit">Show</button> {button}</p>
</form>"#,
        from = time("from", "From"),
        to = time("to", "To"),
        max = super::checks::MAX_VERIFY_DAYS,
    )
}

/// What a verify run checked, then every problem it found, a line each (its kind, its key or
/// messageId, the detail), or that it found none.
pub fn verified(verified: &super::checks::Verified) -> String {
    let summary = &verified.summary;
    let mut out = format!(
        r#"<section class="verified" aria-label="Verify's outcome"><p>Verify ran over {} – {}, as <code>auditctl verify --from {} --to {}</code>.</p>"#,
        time(&verified.range.from),
        time(&verified.range.to),
        escape(&verified.range.from),
        escape(&verified.range.to)
    );
    if summary.holds() {
        out.push_str(
            r#"<p class="verdict" role="status"><strong>verified: no problem</strong> — the trail of these periods is as sealed.</p>"#,
        );
    } else {
        let _ = write!(
            out,
            r#"<p class="problem verdict" role="alert"><strong>{} problem(s) found</strong></p><ul class="problems">"#,
            summary.problem_count()
        );
        for problem in &verified.problems {
            let _ = write!(
                out,
                r#"<li><strong class="kind">{}</strong> <code class="wrap">{}</code> {}</li>"#,
                escape(&problem.kind.to_string()),
                escape(&problem.subject),
                escape(&problem.detail)
            );
        }
        out.push_str("</ul>");
        let listed = verified.problems.len() as u64;
        if listed < summary.problem_count() {
            let _ = write!(
                out,
                "<p>The first {listed} are listed; auditctl verify prints them all.</p>"
            );
        }
    }
    out.push_str(r#"<h3>Checked</h3><ul class="checked">"#);
    for line in summary.lines() {
        let _ = write!(out, "<li>{}</li>", escape(&line));
    }
    out.push_str("</ul></section>");
    out
}

/// A verify run that failed or was stopped, with a retry when it may help.
pub fn verify_failed(status: u16, message: &str, retry: Option<&str>) -> String {
    format!(
        r#"<section class="verified" aria-label="Verify's outcome"><p>Verify did not finish.</p>{}</section>"#,
        problem(status, message, retry)
    )
}

/// The transparency log's newest checkpoint, its signature and the witnesses' cosignatures (or
/// why they could not be read, with a retry at `retry`).
pub fn log_head(head: &Result<Option<super::checks::LogHead>, String>, retry: &str) -> String {
    use super::checks::LogSignature;
    let mut out = String::from("<h2>Transparency log</h2>");
    let head = match head {
        Err(error) => {
            out.push_str(&problem(
                502,
                &format!("the log could not be read: {error}"),
                Some(retry),
            ));
            return out;
        }
        Ok(None) => {
            out.push_str("<p>No checkpoint yet: the archiver has not sealed a period into the log (docs/archive.md \"The transparency log\").</p><p>No witness has cosigned yet.</p>");
            return out;
        }
        Ok(Some(head)) => head,
    };
    let signature = match &head.signature {
        LogSignature::Holds => "holds (checked with the digest key's public key)".to_owned(),
        LogSignature::Fails(why) => format!("<strong>does not hold</strong>: {}", escape(why)),
        LogSignature::NotChecked(why) => format!("not checked: {}", escape(why)),
    };
    let sealed = match &head.sealed {
        Some((period, sealed_at)) => {
            let (from, to) = super::health::bounds(*period);
            format!(
                "with the period {} – {}, sealed at {}",
                time(&from),
                time(&to),
                time(sealed_at)
            )
        }
        None => "not known (the newest digest carries another tree)".to_owned(),
    };
    let _ = write!(
        out,
        r#"<dl class="event"><dt>Newest checkpoint</dt><dd>tree size {} (<code class="wrap">{}</code>)</dd><dt>Sealed</dt><dd>{sealed}</dd><dt>Log signature</dt><dd>{signature}</dd></dl>"#,
        head.size,
        escape(&audit_model::note::checkpoint_key(head.size))
    );
    match head.cosigned_size {
        None => out.push_str("<p>No witness has cosigned yet.</p>"),
        Some(size) => {
            let of = if size == head.size {
                format!("the newest checkpoint (tree size {size})")
            } else {
                format!("tree size {size}, the newest cosigned (none cosigned the newest yet)")
            };
            let _ = write!(
                out,
                r#"<p>Cosignatures of {of}, as stored (auditctl verify --witness-key checks each with the witness's key):</p><div class="table-wrap"><table class="rows" id="cosignatures"><thead><tr><th scope="col">Witness</th><th scope="col">Key id</th><th scope="col">Cosigned at (UTC)</th></tr></thead><tbody>"#
            );
            for cosignature in &head.cosignatures {
                let at = cosignature
                    .at
                    .map(|t| time(&t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)))
                    .unwrap_or_else(|| "not a timestamped cosignature".to_owned());
                let _ = write!(
                    out,
                    "<tr><td><code>{}</code></td><td><code>{}</code></td><td>{at}</td></tr>",
                    escape(&cosignature.witness),
                    escape(&cosignature.key_id)
                );
            }
            out.push_str("</tbody></table></div>");
        }
    }
    out
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

fn fields(item: &TrailItem) -> String {
    let Value::Object(plain) = audit_trail::output::Record::json(item) else {
        return String::new();
    };
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
    let mut out = String::from("<dl class=\"event\">\n");
    for name in names {
        let value = &plain[name];
        let shown = match (name.as_str(), value) {
            ("auditTime" | "receivedAt" | "sentAt", Value::String(t)) => time(t),
            ("outcome", Value::String(o)) => outcome(o),
            (_, Value::String(text)) => format!(r#"<span class="wrap">{}</span>"#, escape(text)),
            (_, Value::Object(_) | Value::Array(_)) => format!(
                r#"<pre class="json">{}</pre>"#,
                escape(&serde_json::to_string_pretty(value).unwrap_or_default())
            ),
            (_, other) => escape(&other.to_string()),
        };
        let _ = writeln!(out, "<dt>{}</dt><dd>{shown}</dd>", escape(name));
    }
    if !plain.contains_key("senderId") {
        out.push_str("<dt>senderId</dt><dd>not recorded: the item was written before senderId was kept, or delivered without a SenderId</dd>\n");
    }
    out.push_str("</dl>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_in_html_and_attributes() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn an_event_without_a_sender_says_so() {
        let item = TrailItem::from(std::collections::HashMap::from([(
            "messageId".to_owned(),
            aws_sdk_dynamodb::types::AttributeValue::S("m".into()),
        )]));
        let html = event("m", &[item], &[]);
        assert!(html.contains("<dt>senderId</dt><dd>not recorded"), "{html}");
    }

    #[test]
    fn outcomes_are_words_not_only_colours() {
        assert!(outcome("failure").contains("✗</span> failure"));
        assert!(outcome("odd<").contains("outcome-unknown"));
        assert!(outcome("odd<").contains("odd&lt;"));
    }
}
