//! Owns the dead-letter pages' markup: the queue by reason, one reason's messages, a redrive's
//! confirmation and outcome. Must not know HTTP, the routes or how the queue is worked.

use std::collections::BTreeMap;

use maud::{Markup, html};

use super::page::{problem, recorded_note, time};
use audit_model::Reason;
use audit_trail::access::Recorded;
use audit_trail::dlq::{DlqMessage, OriginalSender, RedriveReport};

/// Why a redrive is not offered when no audit queue is set.
pub const NO_TARGET: &str = "redrive is unavailable: no audit queue to send the messages back to; start auditctl ui with AUDIT_QUEUE_URL or --queue-url (stack output AuditQueueUrl)";

/// Where the reason codes are explained in full, with what to do.
const REASONS_DOC: &str = "docs/operations.md \"Reason codes\"";

/// Whether a redrive of a reason's messages can succeed: they go back with the same body, so a
/// permanent reason (the model's one decision, `Reason::disposition`) fails the same way again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outlook {
    /// Transient: another receive may pass.
    MayPass,
    /// Permanent: it fails again, unless its cause was fixed since (a bug in the function).
    FailsAgain,
    /// A code this viewer does not know (a newer function's).
    Unknown,
}

impl Outlook {
    pub fn of(code: &str) -> Self {
        match Reason::from_code(code) {
            Some(reason) if reason.is_transient() => Self::MayPass,
            Some(_) => Self::FailsAgain,
            None => Self::Unknown,
        }
    }
}

/// The warning beside a redrive that will fail again.
pub const FAILS_AGAIN: &str = "permanent: the messages go back with the same body and fail the same way, so a redrive brings them back here; redrive only once the cause is fixed (a bug in the function, for panic)";

/// A reason code explained in place: what it means, and whether a redrive can pass.
fn explained(code: &str) -> Markup {
    let meaning = Reason::from_code(code).map(Reason::meaning);
    html! {
        @match meaning {
            Some(meaning) => { (meaning) "." },
            None => { "a code this viewer does not know." },
        }
        " "
        @match Outlook::of(code) {
            Outlook::MayPass => { span class="class" { "Transient: a redrive may pass." } },
            Outlook::FailsAgain => { span class="class" { strong { "Permanent" } ": a redrive fails again." } },
            Outlook::Unknown => { span class="class" { "Whether a redrive passes is not known." } },
        }
        " (" (REASONS_DOC) ")"
    }
}

/// What the queue's page shows: the queue's URL, whether a redrive is offered, the reason whose
/// messages are listed (with their bodies or not), the receiver's role id (whose claims of an
/// original sender alone are shown), and why the listing may be short.
#[derive(Clone, Copy)]
pub struct Queue<'a> {
    pub url: &'a str,
    pub redrive: bool,
    pub reason: Option<&'a str>,
    pub show_body: bool,
    pub role: Option<&'a str>,
    pub short: Option<&'a str>,
}

/// How many messages of `reason` a redrive would move to `target`, and the button that does it.
pub fn confirm(
    reason: &str,
    recorded: &Recorded,
    short: Option<&str>,
    count: usize,
    target: &str,
) -> Markup {
    html! {
        h1 { "Redrive " code { (reason) } }
        (recorded_note(recorded))
        @if let Some(short) = short {
            p class="note" { (short) }
        }
        @if count == 0 {
            p { "No message of reason " code { (reason) } " is in the dead-letter queue now." }
            p { a href="dlq" { "Back to the dead-letter queue" } }
        } @else {
            @let fails = Outlook::of(reason) == Outlook::FailsAgain;
            p { code { (reason) } ": " (explained(reason)) }
            @if fails {
                p class="problem" role="alert" { strong { "This redrive will fail again" } " — " (FAILS_AGAIN) "." }
            }
            form method="post" action="dlq-redrive" class="confirm" {
                p {
                    strong { (count) " message(s)" } " of reason " code { (reason) }
                    " will move from the dead-letter queue back to "
                    code class="wrap" { (target) }
                    ", each under its original identity (a duplicate of a written event stays one item)."
                }
                input type="hidden" name="reason" value=(reason);
                input type="hidden" name="count" value=(count);
                p {
                    button type="submit" {
                        "Redrive " (count) " message(s)" @if fails { " anyway" }
                    } " "
                    a href="dlq" { "Cancel" }
                }
            }
        }
    }
}

/// What a redrive of `reason` to `target` moved, what is left, what failed and why.
pub fn redriven(reason: &str, target: &str, report: &RedriveReport) -> Markup {
    let moved: u64 = report.moved.values().sum();
    html! {
        h1 { "Redrive " code { (reason) } }
        p role="status" {
            strong { "Moved " (moved) " message(s)" } " to " code class="wrap" { (target) } "."
        }
        (counts("Left in the dead-letter queue", &report.left))
        @for (id, error) in &report.failed {
            (problem(502, &format!("{id} not moved: {error}"), None))
        }
        @for id in &report.access_events {
            p class="note" {
                (id) " left in the dead-letter queue: an access event is written only as sent by its own caller."
            }
        }
        @if let Some(unseen) = &report.unseen {
            p class="note" { (unseen.to_string()) }
        }
        p { a href="dlq" { "Back to the dead-letter queue" } }
    }
}

fn counts(title: &str, by_reason: &BTreeMap<String, u64>) -> Markup {
    let total: u64 = by_reason.values().sum();
    html! {
        p { (title) " : " (total) }
        @if !by_reason.is_empty() {
            ul { @for (reason, n) in by_reason { li { code { (reason) } ": " (n) } } }
        }
    }
}

/// The queue by reason with counts and, for `queue.reason`, its messages.
pub fn queue(queue: &Queue, recorded: &Recorded, messages: &[DlqMessage]) -> Markup {
    let Queue {
        url,
        redrive,
        reason,
        show_body,
        role,
        short,
    } = *queue;
    let mut by_reason: BTreeMap<String, u64> = BTreeMap::new();
    for m in messages {
        *by_reason.entry(m.reason()).or_default() += 1;
    }
    html! {
        h1 { "Dead-letter queue" }
        (recorded_note(recorded))
        p class="command" { (url) }
        @if let Some(short) = short {
            p class="note" role="note" { (short) }
        }
        @if by_reason.is_empty() {
            p class="empty" { "The dead-letter queue is empty." }
        } @else {
            div class="table-wrap" {
                table class="rows" id="reasons" {
                    thead {
                        tr {
                            th scope="col" { "Reason" }
                            th scope="col" { "Messages" }
                            th scope="col" { "What it means" }
                            th scope="col" { "Look" }
                            th scope="col" { "Redrive" }
                        }
                    }
                    tbody {
                        @for (reason, n) in &by_reason {
                            @let q = form_urlencoded::Serializer::new(String::new())
                                .append_pair("reason", reason)
                                .finish();
                            tr {
                                td { code { (reason) } }
                                td { (n) }
                                td class="meaning" { (explained(reason)) }
                                td {
                                    a href={ "dlq?" (q) } { "Messages" } " · "
                                    form method="post" action="dlq" class="inline" {
                                        input type="hidden" name="reason" value=(reason);
                                        input type="hidden" name="body" value="1";
                                        button type="submit" class="link" { "with bodies" }
                                    }
                                }
                                td {
                                    @if redrive && Outlook::of(reason) == Outlook::FailsAgain {
                                        span class="warn" { "Will fail again" } " "
                                        a href={ "dlq-confirm?" (q) } title=(FAILS_AGAIN) { "Redrive anyway…" }
                                    } @else if redrive {
                                        a class="button" href={ "dlq-confirm?" (q) } { "Redrive " (n) "…" }
                                    } @else {
                                        button type="button" disabled aria-describedby="why-no-redrive" {
                                            "Redrive"
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if !redrive {
                p class="note" id="why-no-redrive" { (NO_TARGET) }
            }
        }
        @if let Some(reason) = reason {
            h2 { "Messages of reason " code { (reason) } }
            @if !show_body {
                p class="hint" {
                    "Bodies are not shown unless asked for: audit text can be personal data."
                }
            }
            div class="table-wrap" {
                table class="rows" {
                    thead {
                        tr {
                            @for name in ["messageId", "original SQS id", "failed at", "receives", "body bytes", "original sender"] {
                                th scope="col" { (name) }
                            }
                        }
                    }
                    tbody {
                        @for m in messages.iter().filter(|m| m.reason() == reason) {
                            tr {
                                td class="mono" { (m.message_id) }
                                td class="mono" { (m.original_id()) }
                                td {
                                    @if let Some(at) = m.context().map(|c| c.failed_at).filter(|t| !t.is_empty()) {
                                        (time(&at))
                                    }
                                }
                                td { (m.receive_count().map(|n| n.to_string()).unwrap_or_default()) }
                                td { (m.body.len()) }
                                td class="mono" { (original_sender(m, role)) }
                            }
                            @if show_body {
                                tr { td colspan="6" class="body" { pre class="json" { (m.body) } } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Who first sent a dead letter, as far as the receiver's role vouches for it.
fn original_sender(message: &DlqMessage, role: Option<&str>) -> Markup {
    match message.original_sender(role) {
        OriginalSender::Own(id) | OriginalSender::Vouched(id) => html! { (id) },
        OriginalSender::Unvouched { why, .. } => html! { "not attested (" (why) ")" },
        OriginalSender::Unknown => html! { "unknown" },
    }
}
