//! Owns an event's route: its items (as `auditctl get`) after its access event, and what the page
//! says of each item's proof and period. Must not know the markup or the headers.

use audit_aws::s3::Bucket;
use chrono::Utc;
use futures::TryStreamExt;
use http::{Response, StatusCode};
use maud::html;
use serde_json::{Map, Value};

use super::response::{self, Body, Failed};
use super::{Viewer, checks, health, page};
use audit_trail::access::{AccessLog, Action};
use audit_trail::item::TrailItem;

impl<L: AccessLog + 'static, B: Bucket + 'static> Viewer<L, B> {
    /// An event's page: every item of one messageId (`auditctl get`), after its access event.
    pub(super) async fn event_page(&self, query: &str) -> Response<Body> {
        let mut id = None;
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            match name.as_ref() {
                "id" if id.is_none() && !value.is_empty() => id = Some(value.into_owned()),
                _ => {
                    let message = format!(
                        "an event's page takes one parameter, id (its messageId): '{name}' is not it"
                    );
                    return Failed::bad(message).page(self.words, "Bad request", None);
                }
            }
        }
        let Some(id) = id else {
            return Failed::bad("an event's page needs id, its messageId".into()).page(
                self.words,
                "Bad request",
                None,
            );
        };
        let mut arguments = Map::new();
        arguments.insert("messageId".into(), Value::String(id.clone()));
        let read = self.access.read(
            Action::UiView,
            &self.table,
            &self.table,
            Some(&arguments),
            async {
                let items: Vec<TrailItem> = self.reader.get(&id).try_collect().await?;
                let mut proofs = Vec::with_capacity(items.len());
                for item in &items {
                    proofs.push(self.proof(item).await);
                }
                Ok::<_, Failed>((items, proofs))
            },
        );
        match read.await {
            Ok((recorded, (items, proofs))) => response::page(
                StatusCode::OK,
                page::layout(
                    "Event",
                    html! {
                        (page::recorded_note(&recorded))
                        (page::event(&id, &items, &proofs))
                    },
                ),
            ),
            Err(failed) => failed.page(self.words, "Event", Some(&format!("event?{query}"))),
        }
    }

    /// What the page says of an event's proof: the transparency log's verdict, checked here,
    /// when the page has the digest key, with the archived line it covers; and its period's
    /// digest status unless a proof holds.
    async fn proof(&self, item: &TrailItem) -> page::Shown {
        let shown = self.proven(item).await;
        page::Shown {
            not_attested: self.attestations.as_ref().and_then(|a| {
                a.check_line(item.line().as_bytes())
                    .map(|unattested| unattested.why.to_string())
            }),
            ..shown
        }
    }

    /// The proof's part of what the page says of an item.
    async fn proven(&self, item: &TrailItem) -> page::Shown {
        let unproven = |verdict: String| page::Shown {
            verdict,
            ..page::Shown::default()
        };
        let audit_time = chrono::DateTime::parse_from_rfc3339(&item.audit_time);
        // The event's period is that of its receivedAt (else its auditTime), as for `prove`.
        let anchor = match (item.attributes.get("receivedAt"), audit_time) {
            (Some(aws_sdk_dynamodb::types::AttributeValue::S(text)), Ok(audit_time)) => {
                Ok(chrono::DateTime::parse_from_rfc3339(text).unwrap_or(audit_time))
            }
            (_, audit_time) => audit_time,
        };
        let Ok(anchor) = anchor.map(|a| a.to_utc()) else {
            return unproven("Not known: the item's auditTime is not a time.".to_owned());
        };
        let (status, open) = self.digest_status(anchor).await;
        let Some(archive) = &self.archive else {
            return unproven(status);
        };
        let Value::Object(table) = audit_trail::output::Record::json(item) else {
            return unproven(status);
        };
        let verdict = checks::proof_verdict(
            archive,
            &table,
            &item.audit_time,
            anchor,
            Utc::now().timestamp(),
            self.words,
        )
        .await;
        match verdict {
            Some(
                ref verdict @ (checks::ProofVerdict::Proven(ref held)
                | checks::ProofVerdict::Differs(ref held)),
            ) => page::Shown {
                verdict: verdict.to_string(),
                archived: Some(held.line.clone()),
                differs: held.fields.clone(),
                not_attested: None,
            },
            // Its period not sealed yet: the period and when it is sealed, said once.
            Some(checks::ProofVerdict::NotYet(_)) if open => unproven(status),
            Some(other) => unproven(format!("{other} {status}")),
            None => unproven(status),
        }
    }

    /// The digest status of the period of an event received at `anchor`, and how to check it;
    /// and whether that period is not sealed yet (then this says all there is to say).
    async fn digest_status(&self, anchor: chrono::DateTime<Utc>) -> (String, bool) {
        let Some(archive) = &self.archive else {
            return ("Not known here: start auditctl ui with ARCHIVE_BUCKET (stack output AuditArchiveBucketName) to see the period's digest.".to_owned(), false);
        };
        let now = Utc::now();
        let verify = |period: audit_model::archive::Period| {
            let (from, to) = health::bounds(period);
            format!(
                "auditctl verify --from {from} --to {}",
                chrono::DateTime::from_timestamp(period.end() - 1, 999_000_000)
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                    .unwrap_or(to)
            )
        };
        // The one period, and when the archiver's next scheduled run seals it (its end, the seal
        // delay, then the schedule or one period, whichever is shorter: docs/ui.md "An event").
        let open = |period| {
            let (start, end) = health::bounds(period);
            let by = chrono::DateTime::from_timestamp(audit_proof::verify::sealed_by(&period), 0)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                .unwrap_or_default();
            format!(
                "No proof yet: its period {start} – {end} is not sealed yet; the archiver seals it by {by}."
            )
        };
        let status = match archive.status(anchor, now).await {
            Ok(health::PeriodStatus::Open { period }) => return (open(period), true),
            Ok(health::PeriodStatus::Sealed(sealed)) => format!(
                "Sealed: its period {} – {} has its signed digest {} in bucket {}. The page does not check it; {} does.",
                health::bounds(sealed.period).0,
                health::bounds(sealed.period).1,
                sealed.key,
                archive.name,
                verify(sealed.period)
            ),
            Ok(health::PeriodStatus::Missing { period }) => format!(
                "No digest: its period {} – {} could have been sealed {} ago and was not; {} says why.",
                health::bounds(period).0,
                health::bounds(period).1,
                health::age(now.timestamp() - period.sealable_at()),
                verify(period)
            ),
            Err(error) => format!(
                "Not known: the archive could not be read: {}",
                crate::error::read_failure(&error)
            ),
        };
        (status, false)
    }
}
