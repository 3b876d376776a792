//! Owns the dead-letter routes: list by reason, confirm, redrive, each access recorded before the
//! queue is touched. Must not know the markup (dead_letter_page.rs) or how the queue is moved.

use http::StatusCode;
use serde_json::{Map, Value};

use super::page::layout;
use super::response::{self, Body, Failed};
use super::{DeadLetters, Viewer};
use crate::error::Error;
use audit_trail::access::{AccessLog, Action, Recorded};
use audit_trail::dlq::{DlqMessage, RedriveOptions};
use audit_trail::stack::StackTags;

use super::dead_letter_page::{self, NO_TARGET};

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
            return Err(Failed::bad(format!(
                "unknown parameter '{name}': this page takes {}",
                allowed.join(", ")
            )));
        }
        match name.as_ref() {
            "reason" if !value.is_empty() => asked.reason = Some(value.into_owned()),
            "body" => asked.show_body = value == "1",
            "count" => {
                asked.count = Some(value.parse().map_err(|_| {
                    Failed::bad(format!("count '{value}': the number of messages confirmed"))
                })?);
            }
            _ => {}
        }
    }
    Ok(asked)
}

impl<L: AccessLog + 'static, B: audit_aws::s3::Bucket + 'static> Viewer<L, B> {
    fn dead_letters(&self) -> Result<&DeadLetters, Failed> {
        self.dead_letters.as_ref().ok_or_else(|| Failed::said(StatusCode::NOT_FOUND, "no dead-letter queue: start auditctl ui with DEAD_LETTER_QUEUE_URL or --dlq-url (stack output AuditDeadLetterQueueUrl)", false))
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
        let listed = async {
            let tags = StackTags::read(self.reader.client(), &self.table, &self.location)
                .await
                .map_err(Error::from)?;
            let listing = dead.queue.list().await?;
            Ok::<_, Failed>((tags, listing))
        };
        let (recorded, (tags, listing)) = self
            .access
            .read(
                Action::UiView,
                &dead.url,
                &self.table,
                Some(&arguments),
                listed,
            )
            .await?;
        let short = listing.shortfall.map(|s| s.to_string());
        Ok((recorded, listing.messages, tags.receiver_role_id, short))
    }

    /// `/dlq`: the queue by reason with counts; with `reason`, that reason's messages; with
    /// `body=1`, their bodies too, when `posted` (a POST from the page, its Origin checked).
    pub(super) async fn dead_letter_page(&self, query: &str, posted: bool) -> http::Response<Body> {
        let result = async {
            let asked = asked(query, &["reason", "body"])?;
            if asked.show_body && !posted {
                return Err(Failed::said(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "bodies are listed on a POST from the page's \"with bodies\" button only: open the dead-letter page and press it",
                    false,
                ));
            }
            let (recorded, messages, role, short) = self.listing("dlq", &asked).await?;
            let dead = self.dead_letters()?;
            Ok::<_, Failed>(dead_letter_page::queue(
                &dead_letter_page::Queue {
                    url: &dead.url,
                    redrive: dead.target.is_some(),
                    reason: asked.reason.as_deref(),
                    show_body: asked.show_body,
                    role: role.as_deref(),
                    short: short.as_deref(),
                },
                &recorded,
                &messages,
            ))
        };
        match result.await {
            Ok(main) => response::page(StatusCode::OK, layout("Dead letters", main)),
            Err(failed) => {
                let retry = (failed.retry && !posted).then(|| format!("dlq?{query}"));
                failed.page(self.words, "Dead letters", retry.as_deref())
            }
        }
    }

    /// `/dlq-confirm?reason=R`: how many messages of that reason a redrive would move, and the
    /// button that does it.
    pub(super) async fn confirm_page(&self, query: &str) -> http::Response<Body> {
        let result = async {
            let asked = asked(query, &["reason"])?;
            let reason = asked
                .reason
                .clone()
                .ok_or_else(|| Failed::bad("a redrive is by reason: give reason".into()))?;
            let dead = self.dead_letters()?;
            let Some(target) = &dead.target else {
                return Err(Failed::said(StatusCode::CONFLICT, NO_TARGET, false));
            };
            let (recorded, messages, _, short) = self.listing("dlq.confirm", &asked).await?;
            let count = messages.iter().filter(|m| m.reason() == reason).count();
            let main =
                dead_letter_page::confirm(&reason, &recorded, short.as_deref(), count, target);
            Ok::<_, Failed>(main)
        };
        match result.await {
            Ok(main) => response::page(StatusCode::OK, layout("Confirm the redrive", main)),
            Err(failed) => failed.page(self.words, "Redrive", None),
        }
    }

    /// `POST /dlq-redrive` (reason, count; its Origin checked by the router): the access
    /// recorded, then at most the confirmed count of that reason moved; what moved, what is
    /// left, what failed and why.
    pub(super) async fn redrive(&self, form: &str) -> http::Response<Body> {
        let result = async {
            let asked = asked(form, &["reason", "count"])?;
            let (Some(reason), Some(count)) = (asked.reason.clone(), asked.count) else {
                return Err(Failed::bad(
                    "a redrive needs reason and the count confirmed".into(),
                ));
            };
            let dead = self.dead_letters()?;
            let Some(target) = &dead.target else {
                return Err(Failed::said(StatusCode::CONFLICT, NO_TARGET, false));
            };
            let mut arguments = Map::new();
            arguments.insert("reason".into(), Value::String(reason.clone()));
            arguments.insert("count".into(), Value::from(count));
            let redriven = async {
                let tags = StackTags::read(self.reader.client(), &self.table, &self.location)
                    .await
                    .map_err(Error::from)?;
                let options = RedriveOptions {
                    reason: Some(reason.clone()),
                    max: Some(count),
                    rate: None,
                    dry_run: false,
                    receiver_role_id: tags.receiver_role_id,
                    access_queue_arn: tags.access_queue_arn,
                };
                Ok::<_, Failed>(dead.queue.redrive(target, &options).await?)
            };
            let (_, report) = self
                .access
                .read(
                    Action::UiRedrive,
                    &dead.url,
                    &self.table,
                    Some(&arguments),
                    redriven,
                )
                .await?;
            let main = dead_letter_page::redriven(&reason, target, &report);
            let status = if report.failed.is_empty() {
                StatusCode::OK
            } else {
                StatusCode::BAD_GATEWAY
            };
            Ok::<_, Failed>((status, main))
        };
        match result.await {
            Ok((status, main)) => response::page(status, layout("Redrive", main)),
            Err(failed) => failed.page(self.words, "Redrive", None),
        }
    }
}
