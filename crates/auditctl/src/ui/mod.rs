//! Owns `auditctl ui`'s server: the routes (search, further pages, an event, exports, the
//! embedded assets), each search, view and export recorded as an access event before it reads
//! (the same reader and recorder as every command), and serving them on a loopback listener until
//! told to stop. Must not know the command line (commands/ui.rs) or how the table is read.

pub mod chart;
pub mod checks;
pub mod dead_letters;
pub mod health;
pub mod page;
pub mod search;
pub mod session;

use std::convert::Infallible;
use std::future::Future;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use audit_aws::s3::Bucket;
use bytes::Bytes;
use chrono::Utc;
use futures::{StreamExt, TryStreamExt};
use http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION, SET_COOKIE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use maud::{Markup, html};
use serde_json::{Map, Value};

use crate::TrailError;
use audit_trail::Reader;
use audit_trail::access::{AccessLog, Action, Recorded, Recorder};
use audit_trail::item::TrailItem;
use audit_trail::merge::Order;
use audit_trail::output::{Format, Printer};
use audit_trail::query::QueryOptions;
use search::{Cursor, Search, SearchError};
use session::{Admission, Session};

/// A response's body: a page at once, or an export as it is read.
pub type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// Rows on a page of results.
pub const PAGE_ROWS: usize = 50;
/// Query requests in flight at most for one page (as `auditctl query`'s default).
const CONCURRENCY: usize = 8;
/// Items per Query request of an export (as `auditctl query`'s default).
const EXPORT_PAGE_SIZE: i32 = 500;
/// Query requests in flight at most for one page of rows: one per shard of a day.
const PAGE_CONCURRENCY: usize = 32;
/// The Query `Limit` per shard for a page of a time search without filters: messageIds spread a
/// day's events evenly over its 32 shards (FNV-1a), so 50 rows take about 2 from each, and a
/// shard that holds more of them is read on (each shard keeps a page ahead of the merge).
const TIME_PAGE_SIZE: i32 = 8;

/// The Query `Limit` of a page of `search`: small on the time index without filters, where every
/// item read is a row; a page's worth where a filter may leave most of what is read, and on a
/// lookup's 4 shards.
fn page_size(search: &Search) -> i32 {
    match (&search.plan.source, search.plan.filters.is_empty()) {
        (audit_trail::filter::Source::Time, true) => TIME_PAGE_SIZE,
        _ => i32::try_from(PAGE_ROWS + 1).unwrap_or(i32::MAX),
    }
}

/// Tamper records the health page names at most.
const TAMPER_SHOWN: usize = 50;
/// Rows a chart counts at most (the newest of its range).
const CHART_MAX: usize = 100_000;
/// Bytes of an export sent at once.
const EXPORT_CHUNK: usize = 64 * 1024;
/// How long connections still open may finish after Ctrl-C.
const DRAIN: Duration = Duration::from_secs(3);

const CSS: &str = include_str!("assets/viewer.css");
const JS: &str = include_str!("assets/viewer.js");

/// The viewer: the table it reads, how it records access, and who may use it; `B` is the archive
/// bucket's adapter (S3, or its twin in tests).
pub struct Viewer<L, B = audit_aws::s3::S3Bucket> {
    reader: Reader,
    table: String,
    /// Where requests go (endpoint or region), for error messages.
    location: String,
    access: Recorder<L>,
    session: Session,
    dead_letters: Option<dead_letters::DeadLetters>,
    archive: Option<Arc<health::Archive<B>>>,
}

/// What a request failed on, with its status.
struct Failed {
    status: StatusCode,
    message: String,
    /// Worth trying again (an AWS call failed), not bad input.
    retry: bool,
}

impl From<SearchError> for Failed {
    fn from(error: SearchError) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: error.to_string(),
            retry: false,
        }
    }
}

impl From<TrailError> for Failed {
    /// A caller AWS denies is refused (403, no retry helps); any other failed call is the
    /// upstream's (502, worth a retry).
    fn from(error: TrailError) -> Self {
        let denied = matches!(error, TrailError::QueueDenied { .. });
        Self {
            status: if denied {
                StatusCode::FORBIDDEN
            } else {
                StatusCode::BAD_GATEWAY
            },
            message: error.to_string(),
            retry: !denied,
        }
    }
}

impl From<audit_trail::Error> for Failed {
    fn from(error: audit_trail::Error) -> Self {
        TrailError::from(error).into()
    }
}

impl From<audit_trail::access::AccessError> for Failed {
    fn from(error: audit_trail::access::AccessError) -> Self {
        TrailError::from(error).into()
    }
}

/// One page of newest-first rows and where the next begins.
struct Rows {
    rows: Vec<TrailItem>,
    next: Option<Cursor>,
    recorded: Recorded,
}

impl<L: AccessLog + 'static, B: Bucket + 'static> Viewer<L, B> {
    /// The viewer of `table` through `reader`; `location` is where requests go (for errors).
    pub fn new(
        reader: Reader,
        table: String,
        location: String,
        access: Recorder<L>,
        session: Session,
    ) -> Self {
        Self {
            reader,
            table,
            location,
            access,
            session,
            dead_letters: None,
            archive: None,
        }
    }

    /// With the archive's health and each event's period seal, from `archive`'s digests.
    pub fn with_archive(mut self, archive: health::Archive<B>) -> Self {
        self.archive = Some(Arc::new(archive));
        self
    }

    /// With the dead-letter pages, over `dead_letters`.
    pub fn with_dead_letters(mut self, dead_letters: dead_letters::DeadLetters) -> Self {
        self.dead_letters = Some(dead_letters);
        self
    }

    /// The URL to open (with the one-time token).
    pub fn url(&self) -> String {
        self.session.url()
    }

    /// The answer to one request (its body already read).
    pub async fn respond(&self, request: Request<Bytes>) -> Response<Body> {
        let path = request.uri().path().to_owned();
        let query = request.uri().query().unwrap_or_default().to_owned();
        match self.session.admit(&path, &query, request.headers()) {
            Admission::Allowed => {}
            Admission::Enter {
                set_cookie,
                location,
            } => {
                let mut response = text(StatusCode::SEE_OTHER, "text/plain", "opening");
                set(&mut response, LOCATION, &location);
                set(&mut response, SET_COOKIE, &set_cookie);
                return response;
            }
            Admission::Refused(status, why) => {
                return html_response(
                    status,
                    page::layout("Refused", page::problem(status.as_u16(), why, None)),
                );
            }
        }
        if request.method() == Method::POST && path == "/dlq/redrive" {
            return self.redrive(request.headers(), request.body()).await;
        }
        if request.method() != Method::GET {
            return html_response(
                StatusCode::METHOD_NOT_ALLOWED,
                page::layout(
                    "Not allowed",
                    page::problem(
                        405,
                        "this address is read with GET only (a redrive is a POST to /dlq/redrive)",
                        None,
                    ),
                ),
            );
        }
        match path.as_str() {
            "/" => self.search_page(&query).await,
            "/rows" => self.more_rows(&query).await,
            "/event" => self.event_page(&query).await,
            "/export.csv" => self.export(&query, Format::Csv).await,
            "/export.jsonl" => self.export(&query, Format::Jsonl).await,
            "/chart" => self.chart(&query).await,
            "/health" => self.health_page(&query).await,
            "/dlq" => self.dead_letter_page(&query).await,
            "/dlq/confirm" => self.confirm_page(&query).await,
            "/assets/viewer.css" => text(StatusCode::OK, "text/css; charset=utf-8", CSS),
            "/assets/viewer.js" => text(StatusCode::OK, "text/javascript; charset=utf-8", JS),
            _ => html_response(
                StatusCode::NOT_FOUND,
                page::layout(
                    "Not found",
                    page::problem(404, &format!("no page at {path}"), Some("/")),
                ),
            ),
        }
    }

    /// The search page: the form, then the first page of rows (or why there are none).
    async fn search_page(&self, query: &str) -> Response<Body> {
        let search = match Search::parse(query, Utc::now(), false) {
            Ok(search) => search,
            Err(error) => {
                let failed = Failed::from(error);
                let main = html! {
                    (page::problem(failed.status.as_u16(), &failed.message, None))
                    (page::search_form(&page::sent_values(query)))
                };
                return html_response(failed.status, page::layout("Bad search", main));
            }
        };
        let form = page::search_form(&page::form_values(&search));
        match self.rows(&search).await {
            Ok(rows) => html_response(
                StatusCode::OK,
                page::layout(
                    "Search",
                    html! {
                        (form)
                        (page::recorded_note(&rows.recorded))
                        (page::results(&search, &rows.rows, rows.next.as_ref()))
                    },
                ),
            ),
            Err(failed) => {
                let retry = failed.retry.then(|| format!("/?{query}"));
                html_response(
                    failed.status,
                    page::layout(
                        "Search failed",
                        html! {
                            (form)
                            (page::problem(failed.status.as_u16(), &failed.message, retry.as_deref()))
                        },
                    ),
                )
            }
        }
    }

    /// A further page of rows, as a fragment the page's script adds to the table.
    async fn more_rows(&self, query: &str) -> Response<Body> {
        let result = match Search::parse(query, Utc::now(), true) {
            Ok(search) => self
                .rows(&search)
                .await
                .map(|rows| page::fragment(&search, &rows.rows, rows.next.as_ref())),
            Err(error) => Err(error.into()),
        };
        match result {
            Ok(fragment) => html_response(StatusCode::OK, fragment),
            Err(failed) => html_response(
                failed.status,
                page::problem(failed.status.as_u16(), &failed.message, None),
            ),
        }
    }

    /// One page of a search: the access recorded, the index checked, then the rows after the
    /// cursor, newest first, and one more to know whether a next page exists.
    async fn rows(&self, search: &Search) -> Result<Rows, Failed> {
        let recorded = self
            .access
            .record_with(
                Action::UiSearch,
                &self.table,
                &self.table,
                Some(&search.arguments()),
            )
            .await?;
        self.reader.check_index(&search.plan).await?;
        let options = QueryOptions {
            order: Order::Descending,
            page_size: page_size(search),
            concurrency: PAGE_CONCURRENCY,
            limit: None,
        };
        let cursor = search.cursor.clone();
        // A person reads a page at a time: each shard reads on only when its rows are needed
        // (exports and charts read whole ranges, each shard a page ahead).
        let mut rows: Vec<TrailItem> = self
            .reader
            .clone()
            .on_demand()
            .read(&search.plan, search.page_range(), options)
            .try_filter(move |row| {
                futures::future::ready(
                    cursor
                        .as_ref()
                        .is_none_or(|c| c.is_before(&row.audit_time, &row.message_id)),
                )
            })
            .take(PAGE_ROWS + 1)
            .try_collect()
            .await?;
        let next = if rows.len() > PAGE_ROWS {
            rows.truncate(PAGE_ROWS);
            rows.last().map(|last| Cursor {
                audit_time: last.audit_time.clone(),
                message_id: last.message_id.clone(),
            })
        } else {
            None
        };
        Ok(Rows {
            rows,
            next,
            recorded,
        })
    }

    /// The chart of a search (a fragment the page's script shows): its rows counted by hour and
    /// outcome, after its access event (`auditctl.ui.search` with `chart`).
    async fn chart(&self, query: &str) -> Response<Body> {
        let result = async {
            let search = Search::parse(query, Utc::now(), false)?;
            let mut arguments = search.arguments();
            arguments.insert("chart".into(), Value::Bool(true));
            self.access
                .record_with(Action::UiSearch, &self.table, &self.table, Some(&arguments))
                .await?;
            self.reader.check_index(&search.plan).await?;
            let options = QueryOptions {
                order: Order::Descending,
                page_size: EXPORT_PAGE_SIZE,
                concurrency: CONCURRENCY,
                limit: Some(CHART_MAX as u64),
            };
            let mut counts = chart::Hours::default();
            let mut rows = std::pin::pin!(
                self.reader
                    .read(&search.plan, search.range.clone(), options)
                    .take(CHART_MAX)
            );
            while let Some(row) = rows.next().await {
                let row = row?;
                counts.add(&row.audit_time, &row.text("outcome"));
            }
            let note = if counts.total >= CHART_MAX as u64 {
                format!("The chart counts the newest {CHART_MAX} events of the range only.")
            } else {
                String::new()
            };
            let (from, to) = search.range.bounds().unwrap_or((Utc::now(), Utc::now()));
            Ok::<_, Failed>(chart::render(&counts, from, to, &note))
        };
        match result.await {
            Ok(fragment) => html_response(StatusCode::OK, fragment),
            Err(failed) => html_response(
                failed.status,
                page::problem(failed.status.as_u16(), &failed.message, None),
            ),
        }
    }

    /// An event's page: every item of one messageId (`auditctl get`), after its access event.
    async fn event_page(&self, query: &str) -> Response<Body> {
        let mut id = None;
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            match name.as_ref() {
                "id" if id.is_none() && !value.is_empty() => id = Some(value.into_owned()),
                _ => {
                    let message = format!(
                        "an event's page takes one parameter, id (its messageId): '{name}' is not it"
                    );
                    return html_response(
                        StatusCode::BAD_REQUEST,
                        page::layout("Bad request", page::problem(400, &message, None)),
                    );
                }
            }
        }
        let Some(id) = id else {
            return html_response(
                StatusCode::BAD_REQUEST,
                page::layout(
                    "Bad request",
                    page::problem(400, "an event's page needs id, its messageId", None),
                ),
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
            Ok((recorded, items, proofs)) => html_response(
                StatusCode::OK,
                page::layout(
                    "Event",
                    html! {
                        (page::recorded_note(&recorded))
                        (page::event(&id, &items, &proofs))
                    },
                ),
            ),
            Err(failed) => {
                let retry = format!("/event?{query}");
                html_response(
                    failed.status,
                    page::layout(
                        "Event",
                        page::problem(failed.status.as_u16(), &failed.message, Some(&retry)),
                    ),
                )
            }
        }
    }

    /// What the page says of an event's proof: the transparency log's verdict, checked here,
    /// when the page has the digest key; and its period's digest status unless it is proven.
    async fn proof(&self, item: &TrailItem) -> String {
        let status = self.digest_status(item).await;
        let (Some(archive), Ok(audit_time)) = (
            &self.archive,
            chrono::DateTime::parse_from_rfc3339(&item.audit_time),
        ) else {
            return status;
        };
        let anchor = match item.attributes.get("receivedAt") {
            Some(aws_sdk_dynamodb::types::AttributeValue::S(text)) => {
                chrono::DateTime::parse_from_rfc3339(text).unwrap_or(audit_time)
            }
            _ => audit_time,
        };
        let verdict = checks::proof_verdict(
            archive,
            &item.message_id,
            &item.audit_time,
            anchor.to_utc(),
            Utc::now().timestamp(),
        )
        .await;
        match verdict {
            Some(proven @ checks::ProofVerdict::Proven { .. }) => proven.to_string(),
            Some(other) => format!("{other} {status}"),
            None => status,
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
            Err(error) => format!("Not known: the archive could not be read: {error}"),
        }
    }

    /// The health page over the periods in view (`range`, or `from` and `to`; the last 24 hours
    /// when none): the newest sealed period and its age, the tamper records, the log's newest
    /// checkpoint and its cosignatures, after its access event (`auditctl.ui.view`); with `run=1`,
    /// `verify` over those periods too, after `auditctl.ui.verify` instead.
    async fn health_page(&self, query: &str) -> Response<Body> {
        let now = Utc::now();
        let (search, run) = match health_query(query, now) {
            Ok(parsed) => parsed,
            Err(error) => {
                let main = html! {
                    h1 { "Health" }
                    (page::problem(400, &error, None))
                    (page::verify_form(&page::sent_values(query), None))
                };
                return html_response(StatusCode::BAD_REQUEST, page::layout("Health", main));
            }
        };
        let Some(archive) = &self.archive else {
            return html_response(
                StatusCode::NOT_FOUND,
                page::layout(
                    "Health",
                    page::problem(
                        404,
                        "no archive: start auditctl ui with ARCHIVE_BUCKET or --bucket (stack output AuditArchiveBucketName)",
                        None,
                    ),
                ),
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
            return html_response(StatusCode::BAD_REQUEST, page::layout("Health", main));
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
            let recorded = self
                .access
                .record_with(action, &archive.name, &self.table, Some(&arguments))
                .await?;
            let newest = archive.newest_sealed(now).await.map_err(|e| {
                TrailError::Aws(format!(
                    "listing the digests of bucket {}: {e}",
                    archive.name
                ))
            })?;
            let tamper = archive
                .tamper_objects(now, TAMPER_SHOWN)
                .await
                .map_err(|e| {
                    TrailError::Aws(format!(
                        "listing the tamper records of bucket {}: {e}",
                        archive.name
                    ))
                })?;
            let log = archive
                .log_head(newest.as_ref())
                .await
                .map_err(|e| e.to_string());
            let verified = if run {
                Some(
                    match archive.clone().verify(search.range.clone(), now).await {
                        Some(Ok(verified)) => Ok(verified),
                        Some(Err(error)) => Err(Failed::from(error)),
                        None => Err(Failed {
                            status: StatusCode::GATEWAY_TIMEOUT,
                            message: format!(
                                "verify took longer than {} s and was stopped; run auditctl verify --from {} --to {} for this range",
                                checks::VERIFY_TIMEOUT.as_secs(),
                                search.range.from,
                                search.range.to
                            ),
                            retry: true,
                        }),
                    },
                )
            } else {
                None
            };
            let status = match &verified {
                Some(Err(failed)) => failed.status,
                _ => StatusCode::OK,
            };
            let verify_section = match &verified {
                None => html! {},
                Some(Ok(verified)) => page::verified(verified),
                Some(Err(failed)) => {
                    let retry = format!("/health?{query}");
                    page::verify_failed(
                        failed.status.as_u16(),
                        &failed.message,
                        failed.retry.then_some(retry.as_str()),
                    )
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
                (page::log_head(&log, "/health"))
            };
            Ok::<_, Failed>((status, main))
        };
        match result.await {
            Ok((status, main)) => html_response(status, page::layout("Health", main)),
            Err(failed) => {
                let retry = format!("/health?{query}");
                html_response(
                    failed.status,
                    page::layout(
                        "Health",
                        html! {
                            h1 { "Health" }
                            (page::problem(failed.status.as_u16(), &failed.message, Some(&retry)))
                            (form)
                        },
                    ),
                )
            }
        }
    }

    /// An export of a search, streamed as it is read: the bytes of `auditctl query --desc
    /// --format csv|jsonl` over the same range and fields (the same reader and printer).
    async fn export(&self, query: &str, format: Format) -> Response<Body> {
        let prepared = async {
            let search = Search::parse(query, Utc::now(), false)?;
            let mut arguments = search.arguments();
            let name = match format {
                Format::Csv => "csv",
                Format::Jsonl => "jsonl",
                Format::Table => "table",
            };
            arguments.insert("format".into(), Value::String(name.into()));
            self.access
                .record_with(Action::UiExport, &self.table, &self.table, Some(&arguments))
                .await?;
            self.reader.check_index(&search.plan).await?;
            Ok::<_, Failed>((search, name))
        };
        let (search, name) = match prepared.await {
            Ok(ready) => ready,
            Err(failed) => {
                return html_response(
                    failed.status,
                    page::layout(
                        "Export failed",
                        page::problem(failed.status.as_u16(), &failed.message, None),
                    ),
                );
            }
        };
        let options = QueryOptions {
            order: Order::Descending,
            page_size: EXPORT_PAGE_SIZE,
            concurrency: CONCURRENCY,
            limit: None,
        };
        let rows = self
            .reader
            .read(&search.plan, search.range.clone(), options)
            .map_err(TrailError::from);
        let body = export_body(rows, format);
        let content_type = match format {
            Format::Csv => "text/csv; charset=utf-8",
            _ => "application/x-ndjson; charset=utf-8",
        };
        let mut response = Response::new(body);
        set(&mut response, CONTENT_TYPE, content_type);
        set(&mut response, CACHE_CONTROL, "no-store");
        set(
            &mut response,
            http::header::CONTENT_DISPOSITION,
            &format!("attachment; filename=\"audit-trail.{name}\""),
        );
        response
    }
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

/// Rows printed as `auditctl query` prints them, in chunks as they are read; a failure after
/// the first bytes ends the body with an error (the download fails rather than looking whole).
fn export_body(
    rows: impl futures::Stream<Item = Result<TrailItem, TrailError>> + Send + 'static,
    format: Format,
) -> Body {
    let buffer = Shared::default();
    let printer = Printer::<_, TrailItem>::new(format, buffer.clone());
    let state = (Box::pin(rows), Some(printer), buffer);
    let chunks = futures::stream::unfold(state, |(mut rows, printer, buffer)| async move {
        let mut printer = printer?;
        loop {
            match rows.next().await {
                Some(Ok(row)) => {
                    if let Err(error) = printer.print(&row) {
                        return Some((Err(error), (rows, None, buffer)));
                    }
                    if buffer.len() >= EXPORT_CHUNK {
                        return Some((Ok(buffer.take()), (rows, Some(printer), buffer)));
                    }
                }
                Some(Err(error)) => {
                    let error = std::io::Error::other(error.to_string());
                    return Some((Err(error), (rows, None, buffer)));
                }
                None => {
                    return match printer.finish() {
                        Ok(()) => Some((Ok(buffer.take()), (rows, None, buffer))),
                        Err(error) => Some((Err(error), (rows, None, buffer))),
                    };
                }
            }
        }
    });
    BodyExt::boxed_unsync(StreamBody::new(chunks.map_ok(Frame::data)))
}

/// A byte buffer the printer writes to and the body takes from.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Shared {
    fn len(&self) -> usize {
        self.0.lock().map(|b| b.len()).unwrap_or(0)
    }
    fn take(&self) -> Bytes {
        self.0
            .lock()
            .map(|mut b| Bytes::from(std::mem::take(&mut *b)))
            .unwrap_or_default()
    }
}

impl Write for Shared {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("export buffer poisoned"))?
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn set<B>(response: &mut Response<B>, name: http::header::HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
}

/// A complete body of `content_type`, with the headers every answer carries: no caching, no
/// sniffing, no referrer beyond the viewer, and nothing loaded from elsewhere.
fn text(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(
        Full::new(body.into())
            .map_err(|never: Infallible| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    set(&mut response, CONTENT_TYPE, content_type);
    set(&mut response, CACHE_CONTROL, "no-store");
    set(
        &mut response,
        http::header::HeaderName::from_static("x-content-type-options"),
        "nosniff",
    );
    // same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on a form's
    // POST, which the redrive's origin check must refuse. No URL of the viewer leaves it either way.
    set(&mut response, http::header::REFERRER_POLICY, "same-origin");
    set(
        &mut response,
        http::header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    response
}

fn html_response(status: StatusCode, body: Markup) -> Response<Body> {
    text(status, "text/html; charset=utf-8", body.into_string())
}

/// Serves `viewer` on `listener` (HTTP/1.1) until `stop` completes; then stops accepting, lets
/// open connections finish for a moment, and returns.
pub async fn serve<L: AccessLog + 'static, B: Bucket + 'static>(
    listener: tokio::net::TcpListener,
    viewer: Arc<Viewer<L, B>>,
    stop: impl Future<Output = ()>,
) {
    let (closing, closed) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        let accepted = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            continue; // a connection that failed before it began: the next one
        };
        let viewer = viewer.clone();
        let mut closed = closed.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let viewer = viewer.clone();
                async move { Ok::<_, Infallible>(answer(&viewer, request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = async { closed.wait_for(|closing| *closing).await.is_ok() } => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    let _ = closing.send(true);
    let _ = tokio::time::timeout(DRAIN, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
}

/// Bodies of requests are small (forms): read at most this many bytes.
const MAX_REQUEST_BODY: usize = 64 * 1024;

async fn answer<L: AccessLog + 'static, B: Bucket + 'static>(
    viewer: &Viewer<L, B>,
    request: Request<hyper::body::Incoming>,
) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_REQUEST_BODY);
    match limited.collect().await {
        Ok(collected) => {
            viewer
                .respond(Request::from_parts(parts, collected.to_bytes()))
                .await
        }
        Err(_) => html_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            page::problem(413, "the request's body is too large or broken", None),
        ),
    }
}

#[cfg(test)]
mod tests;
