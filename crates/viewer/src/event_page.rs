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
        let read = async {
            let recorded = self
                .access
                .record_with(Action::UiView, &self.table, &self.table, Some(&arguments))
                .await?;
            let items: Vec<TrailItem> = self.reader.get(&id).try_collect().await?;
            let mut proofs = Vec::with_capacity(items.len());
            for item in &items {
                proofs.push(self.proof(item).await);
            }
            Ok::<_, Failed>((recorded, items, proofs))
        };
        match read.await {
            Ok((recorded, items, proofs)) => response::page(
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
        let status = self.digest_status(item).await;
        let unproven = |verdict: String| page::Shown {
            verdict,
            ..page::Shown::default()
        };
        let (Some(archive), Ok(audit_time)) = (
            &self.archive,
            chrono::DateTime::parse_from_rfc3339(&item.audit_time),
        ) else {
            return unproven(status);
        };
        let anchor = match item.attributes.get("receivedAt") {
            Some(aws_sdk_dynamodb::types::AttributeValue::S(text)) => {
                chrono::DateTime::parse_from_rfc3339(text).unwrap_or(audit_time)
            }
            _ => audit_time,
        };
        let Value::Object(table) = audit_trail::output::Record::json(item) else {
            return unproven(status);
        };
        let verdict = checks::proof_verdict(
            archive,
            &table,
            &item.audit_time,
            anchor.to_utc(),
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
            Some(other) => unproven(format!("{other} {status}")),
            None => unproven(status),
        }
    }

    /// An event's period's digest status, and how to check it.
    async fn digest_status(&self, item: &TrailItem) -> String {
        let Some(archive) = &self.archive else {
            return "Not known here: start auditctl ui with ARCHIVE_BUCKET (stack output AuditArchiveBucketName) to see the period's digest.".to_owned();
        };
        let Ok(at) = chrono::DateTime::parse_from_rfc3339(&item.audit_time) else {
            return "Not known: the item's auditTime is not a time.".to_owned();
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
        match archive.status(at.to_utc(), now).await {
            Ok(health::PeriodStatus::Sealed(sealed)) => format!(
                "Sealed: its period {} – {} has its signed digest {} in bucket {}. The page does not check it; {} does.",
                health::bounds(sealed.period).0,
                health::bounds(sealed.period).1,
                sealed.key,
                archive.name,
                verify(sealed.period)
            ),
            Ok(health::PeriodStatus::Open { period }) => format!(
                "Not sealed yet: its period ends at {}, and the archiver seals it about {} after.",
                health::bounds(period).1,
                health::age(period.sealable_at() - period.end())
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
        }
    }
}
