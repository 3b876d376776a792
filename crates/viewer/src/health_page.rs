//! Owns the health page's route: its query, access event, the seal, tamper records, the log's head
//! and verify on request. Must not know the markup (page.rs) or the headers (response.rs).

use audit_aws::s3::Bucket;
use chrono::Utc;
use http::{Response, StatusCode};
use maud::html;
use serde_json::{Map, Value};

use super::response::{self, Body, Failed};
use super::search::{self, Search};
use super::{TAMPER_SHOWN, Viewer, checks, page};
use crate::error::Error;
use audit_trail::access::{AccessLog, Action};

impl<L: AccessLog + 'static, B: Bucket + 'static> Viewer<L, B> {
    /// The health page over the periods in view (`range`, or `from` and `to`; the last 24 hours
    /// when none): the newest sealed period and its age, the tamper records, the log's newest
    /// checkpoint and its cosignatures, after its access event (`auditctl.ui.view`); with `run=1`
    /// when `posted` (a POST from the page's button, its Origin checked), `verify` over those
    /// periods too, after `auditctl.ui.verify` instead.
    pub(super) async fn health_page(&self, query: &str, posted: bool) -> Response<Body> {
        let now = Utc::now();
        let (search, run) = match health_query(query, now) {
            Ok((_, true)) if !posted => {
                return response::problem_page(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "Health",
                    "verify runs on a POST from the health page's button only: open the health page and press Verify these periods",
                    Some("health"),
                );
            }
            Ok(parsed) => parsed,
            Err(error) => {
                let main = html! {
                    h1 { "Health" }
                    (page::problem(400, &error, None))
                    (page::verify_form(&page::sent_values(query), None))
                };
                return response::page(StatusCode::BAD_REQUEST, page::layout("Health", main));
            }
        };
        let Some(archive) = &self.archive else {
            return response::problem_page(
                StatusCode::NOT_FOUND,
                "Health",
                "no archive: start auditctl ui with ARCHIVE_BUCKET or --bucket (stack output AuditArchiveBucketName)",
                None,
            );
        };
        let no_key = archive
            .may_verify(&search.range)
            .err()
            .filter(|e| matches!(e, checks::VerifyRefused::NoKey))
            .map(|e| e.to_string());
        let form = page::verify_form(&page::form_values(&search), no_key.as_deref());
        if run && let Err(refused) = archive.may_verify(&search.range) {
            let main = html! {
                h1 { "Health" }
                (page::problem(400, &refused.to_string(), None))
                (form)
            };
            return response::page(StatusCode::BAD_REQUEST, page::layout("Health", main));
        }
        let result = async {
            let mut arguments = Map::new();
            arguments.insert("page".into(), Value::String("health".into()));
            arguments.insert("from".into(), Value::String(search.range.from.clone()));
            arguments.insert("to".into(), Value::String(search.range.to.clone()));
            let action = if run {
                Action::UiVerify
            } else {
                Action::UiView
            };
            let listed = async {
                let newest = archive
                    .newest_sealed(now)
                    .await
                    .map_err(|error| Error::Listing {
                        what: "digests",
                        bucket: archive.name.clone(),
                        error,
                    })?;
                let tamper = archive
                    .tamper_objects(now, TAMPER_SHOWN)
                    .await
                    .map_err(|error| Error::Listing {
                        what: "tamper records",
                        bucket: archive.name.clone(),
                        error,
                    })?;
                Ok::<_, Failed>((newest, tamper))
            };
            let (recorded, (newest, tamper)) = self
                .access
                .read(action, &archive.name, &self.table, Some(&arguments), listed)
                .await?;
            let log = archive.log_head(newest.as_ref(), self.words).await;
            let verified = if run {
                Some(
                    match archive.clone().verify(search.range.clone(), now).await {
                        Some(Ok(verified)) => Ok(verified),
                        Some(Err(error)) => Err(Failed::from(error)),
                        None => Err(Failed::said(
                            StatusCode::GATEWAY_TIMEOUT,
                            format!(
                                "verify took longer than {} s and was stopped; run auditctl verify --from {} --to {} for this range",
                                checks::VERIFY_TIMEOUT.as_secs(),
                                search.range.from,
                                search.range.to
                            ),
                            true,
                        )),
                    },
                )
            } else {
                None
            };
            // A verify run that failed is the read failing: its failure event is sent.
            let verified = match verified {
                Some(Err(failed)) => Some(Err(self
                    .access
                    .fail(&recorded, action, &archive.name, Some(&arguments), failed)
                    .await)),
                verified => verified,
            };
            // The log's head that could not be read is the read failing too: its failure event
            // is sent (once: a verify run's failure has said the read failed already).
            let log = match log {
                Err(error) if !matches!(verified, Some(Err(_))) => {
                    let failed = self
                        .access
                        .fail(
                            &recorded,
                            action,
                            &archive.name,
                            Some(&arguments),
                            Failed::from(error),
                        )
                        .await;
                    Err(failed.message(self.words))
                }
                log => log.map_err(self.words),
            };
            let status = match &verified {
                Some(Err(failed)) => failed.status,
                _ => StatusCode::OK,
            };
            let verify_section = match verified {
                None => html! {},
                Some(Ok(verified)) => page::verified(&verified),
                Some(Err(failed)) => {
                    let retry = format!("health?{}", periods(&search));
                    let (status, retry) = (failed.status, failed.retry.then_some(retry.as_str()));
                    page::verify_failed(status.as_u16(), &failed.message(self.words), retry)
                }
            };
            let main = html! {
                (page::health(
                    &recorded,
                    &archive.name,
                    newest.as_ref(),
                    &tamper,
                    now,
                    archive.length,
                ))
                (form)
                (verify_section)
                (page::log_head(&log, "health"))
            };
            Ok::<_, Failed>((status, main))
        };
        match result.await {
            Ok((status, main)) => response::page(status, page::layout("Health", main)),
            Err(failed) => {
                let status = failed.status;
                let retry = format!("health?{}", periods(&search));
                response::page(
                    status,
                    page::layout(
                        "Health",
                        html! {
                            h1 { "Health" }
                            (page::problem(status.as_u16(), &failed.message(self.words), Some(&retry)))
                            (form)
                        },
                    ),
                )
            }
        }
    }
}

/// The periods in view of `search`, as the health page's query (a retry's: it shows the page,
/// and its button verifies).
fn periods(search: &Search) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (name, value) in page::form_values(search) {
        if matches!(name.as_str(), "range" | "from" | "to") && !value.is_empty() {
            query.append_pair(&name, &value);
        }
    }
    query.finish()
}

/// The health page's query at `now`: the periods in view, as a search's range (`range`, or
/// `from` and `to`; the last 24 hours when none), and whether to verify them (`run=1`).
fn health_query(query: &str, now: chrono::DateTime<Utc>) -> Result<(Search, bool), String> {
    let mut run = false;
    let mut rest = form_urlencoded::Serializer::new(String::new());
    let mut ranged = false;
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        match name.as_ref() {
            "run" if value == "1" => run = true,
            "run" => return Err(format!("run '{value}': run=1 verifies the periods in view")),
            "range" | "from" | "to" if value.trim().is_empty() => {} // a form's empty field
            "range" | "from" | "to" => {
                ranged |= name != "to";
                rest.append_pair(&name, &value);
            }
            _ => {
                return Err(format!(
                    "unknown parameter '{name}': the health page takes range, from, to and run=1"
                ));
            }
        }
    }
    if !ranged {
        rest.append_pair("range", search::Preset::Day.name());
    }
    let search = Search::parse(&rest.finish(), now, false).map_err(|e| e.to_string())?;
    Ok((search, run))
}
