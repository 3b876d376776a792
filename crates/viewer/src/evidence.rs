//! Owns the search offered as an evidence bundle: a .zip made as `auditctl export --from --to
//! [filters] --evidence x.zip` makes it (`audit_proof::evidence::bundle`, the same files and
//! manifest), its access event first. Must not know the pages or the headers (response.rs).

use std::convert::Infallible;

use audit_aws::s3::Bucket;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full};

use super::Viewer;
use super::response::{self, Body, Failed};
use super::search::Search;
use crate::error::Error;
use audit_model::note::origin;
use audit_proof::evidence::bundle::{self, BundleError, Filters, Request};
use audit_proof::tlog::{LogKey, LogReader};
use audit_proof::verify::key::TrustedKey;
use audit_trail::access::{AccessLog, Action};
use audit_trail::filter;

/// The name a bundle is saved as.
pub const EVIDENCE_FILE: &str = "audit-evidence.zip";

/// The search's filters as `auditctl export` takes them: (the archived line's field, its value),
/// an outcome and an IP in their canonical form. `by` and `access` choose how rows are read and
/// shown, not which events are in the bundle.
fn filters(search: &Search) -> Filters {
    let value = |name: &str| search.value(name).map(str::to_owned);
    [
        ("actor", value("actor")),
        ("action", value("action")),
        ("resource", value("resource")),
        (
            "outcome",
            value("outcome")
                .and_then(|o| filter::parse_outcome(&o).ok())
                .map(|o| o.as_str().to_owned()),
        ),
        (
            "sourceIp",
            value("source_ip")
                .and_then(|ip| filter::parse_source_ip(&ip).ok())
                .map(|ip| ip.to_string()),
        ),
        ("senderId", value("sender")),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some((name, value?)))
    .collect()
}

fn failed(error: impl std::fmt::Display) -> Failed {
    Failed::said(StatusCode::INTERNAL_SERVER_ERROR, error.to_string(), false)
}

impl<L: AccessLog + 'static, B: Bucket + 'static> Viewer<L, B> {
    /// The search's range and filters as an evidence bundle (.zip), made from the archive
    /// bucket with the digest key's public key.
    pub(super) async fn evidence(&self, query: &str) -> Response<Body> {
        let made = async {
            let search = Search::parse(query, Utc::now(), false)?;
            let Some(archive) = &self.archive else {
                return Err(Failed::said(
                    StatusCode::NOT_FOUND,
                    "an evidence bundle needs the archive: start auditctl ui with ARCHIVE_BUCKET or --bucket (stack output AuditArchiveBucketName)",
                    false,
                ));
            };
            let Some(fetch) = &archive.key else {
                return Err(Failed::said(
                    StatusCode::NOT_FOUND,
                    "an evidence bundle needs the digest key: start auditctl ui with DIGEST_KEY_ID or --key-id (stack output AuditDigestKeyArn)",
                    false,
                ));
            };
            let filters = filters(&search);
            let mut arguments = search.arguments();
            arguments.insert("evidence".into(), EVIDENCE_FILE.into());
            // The access recorded first; should making the bundle then fail, its failure too.
            let (_, zip) = self
                .access
                .read(
                    Action::UiExport,
                    &archive.name,
                    &self.table,
                    Some(&arguments),
                    async {
                        let made_by = self
                            .access
                            .caller()
                            .map(|c| c.arn.clone())
                            .unwrap_or_else(|| "not recorded (--no-audit-event)".to_owned());
                        let info = fetch().await.map_err(Error::from)?;
                        let (der, arn) = (info.der.clone(), info.arn.clone());
                        TrustedKey::new(info).map_err(Error::from)?;
                        let key = LogKey::from_der(&der).map_err(failed)?;
                        let time = |text: &str| {
                            DateTime::parse_from_rfc3339(text)
                                .map(|t| t.to_utc())
                                .map_err(|e| Failed::bad(format!("{text}: {e}")))
                        };
                        let log_origin = origin(&archive.name);
                        let request = Request {
                            from: time(&search.range.from)?,
                            to: time(&search.range.to)?,
                            from_text: &search.range.from,
                            to_text: &search.range.to,
                            filters: &filters,
                            length: archive.length,
                            key: &key,
                            key_der: &der,
                            key_arn: &arn,
                            origin: &log_origin,
                            witnesses: &archive.witnesses,
                            tree_size: None,
                            made_by,
                        };
                        let log = LogReader {
                            archive: &archive.bucket,
                        };
                        let made =
                            bundle::make(&log, &request)
                                .await
                                .map_err(|error| match error {
                                    BundleError::Read(error) => Error::from(error).into(),
                                    error => failed(error),
                                })?;
                        made.zip_bytes().map_err(failed)
                    },
                )
                .await?;
            Ok(zip)
        };
        match made.await {
            Ok(zip) => {
                let body = Full::new(Bytes::from(zip))
                    .map_err(|never: Infallible| match never {})
                    .boxed_unsync();
                response::download(body, "application/zip", EVIDENCE_FILE)
            }
            Err(failed) => failed.page(self.words, "Evidence bundle failed", None),
        }
    }
}
