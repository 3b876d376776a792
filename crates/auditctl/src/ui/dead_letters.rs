//! Owns the viewer's dead-letter pages: the queue by reason with counts, one reason's messages
//! (bodies only on request), and the redrive of one reason after a confirmation that states how
//! many will move. Each listing is recorded as `auditctl.ui.view` and each redrive as
//! `auditctl.ui.redrive` before the queue is touched. Must not know how the queue is received or
//! moved (`audit_trail::dlq`).

use std::collections::BTreeMap;

use http::{HeaderMap, StatusCode};
use maud::{Markup, html};
use serde_json::{Map, Value};

use super::page::{layout, problem, recorded_note, time};
use super::{Body, Failed, Viewer, html_response};
use crate::TrailError;
use audit_trail::access::{AccessLog, Action, Recorded};
use audit_trail::dlq::{DeadLetterQueue, DlqMessage, OriginalSender, RedriveOptions};
use audit_trail::stack::StackTags;

/// The dead-letter queue the viewer works, and where a redrive sends messages.
pub struct DeadLetters {
    pub queue: DeadLetterQueue,
    pub url: String,
    /// The audit queue (`AUDIT_QUEUE_URL`): without it there is no redrive.
    pub target: Option<String>,
}

/// Why a redrive is not offered when no audit queue is set.
const NO_TARGET: &str = "redrive is unavailable: no audit queue to send the messages back to; start auditctl ui with AUDIT_QUEUE_URL or --queue-url (stack output AuditQueueUrl)";

/// What a dead-letter URL asks for.
struct Asked {
    reason: Option<String>,
    show_body: bool,
    count: Option<u64>,
}

fn asked(query: &str, allowed: &[&str]) -> Result<Asked, Failed> {
    let mut asked = Asked {
        reason: None,
        show_body: false,
        count: None,
    };
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        if !allowed.contains(&name.as_ref()) {
            return Err(bad(format!(
                "unknown parameter '{name}': this page takes {}",
                allowed.join(", ")
            )));
        }
        match name.as_ref() {
            "reason" if !value.is_empty() => asked.reason = Some(value.into_owned()),
            "body" => asked.show_body = value == "1",
            "count" => {
                asked.count = Some(value.parse().map_err(|_| {
                    bad(format!("count '{value}': the number of messages confirmed"))
                })?);
            }
            _ => {}
        }
    }
    Ok(asked)
}

fn bad(message: String) -> Failed {
    Failed {
        status: StatusCode::BAD_REQUEST,
        message,
        retry: false,
    }
}

impl<L: AccessLog + 'static, B: audit_aws::s3::Bucket + 'static> Viewer<L, B> {
    fn dead_letters(&self) -> Result<&DeadLetters, Failed> {
        self.dead_letters.as_ref().ok_or_else(|| Failed {
            status: StatusCode::NOT_FOUND,
            message: "no dead-letter queue: start auditctl ui with DEAD_LETTER_QUEUE_URL or --dlq-url (stack output AuditDeadLetterQueueUrl)".into(),
            retry: false,
        })
    }

    /// Records the access, then lists the queue (every message visible again after) with the
    /// receiver's role id, whose claims of an original sender alone are shown.
    async fn listing(
        &self,
        action_page: &str,
        asked: &Asked,
    ) -> Result<(Recorded, Vec<DlqMessage>, Option<String>, Option<String>), Failed> {
        let dead = self.dead_letters()?;
        let mut arguments = Map::new();
        arguments.insert("page".into(), Value::String(action_page.into()));
        if let Some(reason) = &asked.reason {
            arguments.insert("reason".into(), Value::String(reason.clone()));
        }
        if asked.show_body {
            arguments.insert("showBody".into(), Value::Bool(true));
        }
        let recorded = self
            .access
            .record_with(Action::UiView, &dead.url, &self.table, Some(&arguments))
            .await?;
        let tags = StackTags::read(self.reader.client(), &self.table, &self.location)
            .await
            .map_err(TrailError::from)?;
        let listing = dead.queue.list().await?;
        let short = listing.shortfall.map(|s| s.to_string());
        Ok((recorded, listing.messages, tags.receiver_role_id, short))
    }

    /// `/dlq`: the queue by reason with counts; with `reason`, that reason's messages; with
    /// `body=1`, their bodies too.
    pub(super) async fn dead_letter_page(&self, query: &str) -> http::Response<Body> {
        let result = async {
            let asked = asked(query, &["reason", "body"])?;
            let (recorded, messages, role, short) = self.listing("dlq", &asked).await?;
            let dead = self.dead_letters()?;
            Ok::<_, Failed>(render_queue(
                dead,
                &asked,
                &recorded,
                &messages,
                role.as_deref(),
                short,
            ))
        };
        match result.await {
            Ok(main) => html_response(StatusCode::OK, layout("Dead letters", main)),
            Err(failed) => failure(&failed, "Dead letters", Some(&format!("/dlq?{query}"))),
        }
    }

    /// `/dlq/confirm?reason=R`: how many messages of that reason a redrive would move, and the
    /// button that does it.
    pub(super) async fn confirm_page(&self, query: &str) -> http::Response<Body> {
        let result = async {
            let asked = asked(query, &["reason"])?;
            let reason = asked
                .reason
                .clone()
                .ok_or_else(|| bad("a redrive is by reason: give reason".into()))?;
            let dead = self.dead_letters()?;
            let Some(target) = &dead.target else {
                return Err(Failed {
                    status: StatusCode::CONFLICT,
                    message: NO_TARGET.into(),
                    retry: false,
                });
            };
            let (recorded, messages, _, short) = self.listing("dlq.confirm", &asked).await?;
            let count = messages.iter().filter(|m| m.reason() == reason).count();
            let main = html! {
                h1 { "Redrive " code { (reason) } }
                (recorded_note(&recorded))
                @if let Some(short) = short {
                    p class="note" { (short) }
                }
                @if count == 0 {
                    p { "No message of reason " code { (reason) } " is in the dead-letter queue now." }
                    p { a href="/dlq" { "Back to the dead-letter queue" } }
                } @else {
                    form method="post" action="/dlq/redrive" class="confirm" {
                        p {
                            strong { (count) " message(s)" } " of reason " code { (reason) }
                            " will move from the dead-letter queue back to "
                            code class="wrap" { (target) }
                            ", each under its original identity (a duplicate of a written event stays one item)."
                        }
                        input type="hidden" name="reason" value=(reason);
                        input type="hidden" name="count" value=(count);
                        p {
                            button type="submit" { "Redrive " (count) " message(s)" } " "
                            a href="/dlq" { "Cancel" }
                        }
                    }
                }
            };
            Ok::<_, Failed>(main)
        };
        match result.await {
            Ok(main) => html_response(StatusCode::OK, layout("Confirm the redrive", main)),
            Err(failed) => failure(&failed, "Redrive", None),
        }
    }

    /// `POST /dlq/redrive` (reason, count): the access recorded, then at most the confirmed count
    /// of that reason moved; what moved, what is left, what failed and why.
    pub(super) async fn redrive(&self, headers: &HeaderMap, body: &[u8]) -> http::Response<Body> {
        let result = async {
            if !self.session.same_origin(headers) {
                return Err(Failed {
                    status: StatusCode::FORBIDDEN,
                    message: "a redrive is sent from this viewer's own page only (its Origin is not this viewer's)".into(),
                    retry: false,
                });
            }
            let asked = asked(
                std::str::from_utf8(body).unwrap_or_default(),
                &["reason", "count"],
            )?;
            let (Some(reason), Some(count)) = (asked.reason.clone(), asked.count) else {
                return Err(bad("a redrive needs reason and the count confirmed".into()));
            };
            let dead = self.dead_letters()?;
            let Some(target) = &dead.target else {
                return Err(Failed {
                    status: StatusCode::CONFLICT,
                    message: NO_TARGET.into(),
                    retry: false,
                });
            };
            let mut arguments = Map::new();
            arguments.insert("reason".into(), Value::String(reason.clone()));
            arguments.insert("count".into(), Value::from(count));
            self.access
                .record_with(Action::UiRedrive, &dead.url, &self.table, Some(&arguments))
                .await?;
            let tags = StackTags::read(self.reader.client(), &self.table, &self.location)
                .await
                .map_err(TrailError::from)?;
            let options = RedriveOptions {
                reason: Some(reason.clone()),
                max: Some(count),
                rate: None,
                dry_run: false,
                receiver_role_id: tags.receiver_role_id,
                access_queue_arn: tags.access_queue_arn,
            };
            let report = dead.queue.redrive(target, &options).await?;
            let moved: u64 = report.moved.values().sum();
            let main = html! {
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
                p { a href="/dlq" { "Back to the dead-letter queue" } }
            };
            let status = if report.failed.is_empty() {
                StatusCode::OK
            } else {
                StatusCode::BAD_GATEWAY
            };
            Ok::<_, Failed>((status, main))
        };
        match result.await {
            Ok((status, main)) => html_response(status, layout("Redrive", main)),
            Err(failed) => failure(&failed, "Redrive", None),
        }
    }
}

fn failure(failed: &Failed, title: &str, retry: Option<&str>) -> http::Response<Body> {
    let retry = if failed.retry { retry } else { None };
    html_response(
        failed.status,
        layout(
            title,
            problem(failed.status.as_u16(), &failed.message, retry),
        ),
    )
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

fn render_queue(
    dead: &DeadLetters,
    asked: &Asked,
    recorded: &Recorded,
    messages: &[DlqMessage],
    role: Option<&str>,
    short: Option<String>,
) -> Markup {
    let mut by_reason: BTreeMap<String, u64> = BTreeMap::new();
    for m in messages {
        *by_reason.entry(m.reason()).or_default() += 1;
    }
    html! {
        h1 { "Dead-letter queue" }
        (recorded_note(recorded))
        p class="command" { (dead.url) }
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
                                td {
                                    a href={ "/dlq?" (q) } { "Messages" } " · "
                                    a href={ "/dlq?" (q) "&body=1" } { "with bodies" }
                                }
                                td {
                                    @if dead.target.is_some() {
                                        a class="button" href={ "/dlq/confirm?" (q) } { "Redrive " (n) "…" }
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
            @if dead.target.is_none() {
                p class="note" id="why-no-redrive" { (NO_TARGET) }
            }
        }
        @if let Some(reason) = &asked.reason {
            h2 { "Messages of reason " code { (reason) } }
            @if !asked.show_body {
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
                        @for m in messages.iter().filter(|m| m.reason() == *reason) {
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
                            @if asked.show_body {
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
