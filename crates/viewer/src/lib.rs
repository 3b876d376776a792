//! Owns `auditctl ui` as a library: the `Viewer`, its router (search, rows, chart, assets here) and
//! its loopback server. Must not know the command line or its words, a page's markup, the headers.

pub mod archive;
pub mod chart;
pub mod checks;
pub mod dead_letter_page;
pub mod dead_letters;
mod error;
mod event_page;
mod evidence;
mod export;
pub mod health;
mod health_page;
mod hot;
pub mod page;
pub mod proof_column;
pub mod response;
pub mod results;
pub mod search;
pub mod session;

use std::convert::Infallible;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use audit_aws::s3::Bucket;
use bytes::Bytes;
use chrono::Utc;
use futures::{StreamExt, TryStreamExt};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use maud::html;
use serde_json::Value;

use audit_trail::Reader;
use audit_trail::access::{AccessLog, Action, Recorded, Recorder};
use audit_trail::dlq::DeadLetterQueue;
use audit_trail::item::TrailItem;
use audit_trail::merge::Order;
use audit_trail::output::Format;
use audit_trail::query::QueryOptions;
pub use error::{Error, Words, own_words};
pub use response::Body;
use response::Failed;
use search::{Cursor, Search};
use session::{Admission, Session};

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
    /// Shared with the exports' bodies, which record a failure after their first bytes.
    access: Arc<Recorder<L>>,
    session: Session,
    dead_letters: Option<DeadLetters>,
    /// How the pages word an error (the command line's words).
    words: Words,
    archive: Option<Arc<archive::Archive<B>>>,
    /// The receiver's attestation key (`ATTESTATION_KEY_ID`), when given: an event's page says
    /// of each item whether the receiver attested it.
    attestations: Option<Arc<audit_proof::verify::attest::Attestations>>,
    /// The table's hot window in days (its tag `audit:retention-days`), read once when no access
    /// check read the tags.
    hot_days: tokio::sync::OnceCell<Option<u32>>,
}

/// The dead-letter queue the viewer works, and where a redrive sends messages.
pub struct DeadLetters {
    pub queue: DeadLetterQueue,
    pub url: String,
    /// The audit queue (`AUDIT_QUEUE_URL`): without it there is no redrive.
    pub target: Option<String>,
}

/// One page of newest-first rows, their proof marks, where the next begins, and how many access
/// events reading them left out.
/// A page read: its rows, their proof marks, the next page's cursor, the access events left out.
type Page = (
    Vec<TrailItem>,
    Vec<proof_column::Mark>,
    Option<Cursor>,
    usize,
);

struct Rows {
    rows: Vec<TrailItem>,
    marks: Vec<proof_column::Mark>,
    next: Option<Cursor>,
    hidden: usize,
    recorded: Recorded,
}

impl Rows {
    fn shown(&self) -> results::Shown<'_> {
        results::Shown {
            rows: &self.rows,
            marks: &self.marks,
            next: self.next.as_ref(),
            hidden: self.hidden,
        }
    }
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
            access: Arc::new(access),
            session,
            dead_letters: None,
            archive: None,
            attestations: None,
            hot_days: tokio::sync::OnceCell::new(),
            words: own_words,
        }
    }

    /// With `words` for the errors the pages show (the command line's).
    pub fn with_words(mut self, words: Words) -> Self {
        self.words = words;
        self
    }

    /// With the archive's health and each event's period seal, from `archive`'s digests.
    pub fn with_archive(mut self, archive: archive::Archive<B>) -> Self {
        self.archive = Some(Arc::new(archive));
        self
    }

    /// With the receiver's attestation key: each item of an event's page checked against it
    /// (docs/archive.md "Items attested at birth").
    pub fn with_attestations(
        mut self,
        attestations: Arc<audit_proof::verify::attest::Attestations>,
    ) -> Self {
        self.attestations = Some(attestations);
        self
    }

    /// With the dead-letter pages, over `dead_letters`.
    pub fn with_dead_letters(mut self, dead_letters: DeadLetters) -> Self {
        self.dead_letters = Some(dead_letters);
        self
    }

    /// The URL to open (with the one-time token).
    pub fn url(&self) -> String {
        self.session.url()
    }

    /// A fresh URL to open: a new one-time token in place of the last (`Session::fresh_url`).
    pub fn fresh_url(&self) -> Result<String, session::NoRandom> {
        self.session.fresh_url()
    }

    /// The answer to one request (its body already read).
    pub async fn respond(&self, request: Request<Bytes>) -> Response<Body> {
        let query = request.uri().query().unwrap_or_default().to_owned();
        let path = match self
            .session
            .admit(request.uri().path(), &query, request.headers())
        {
            Admission::Allowed { path } => path,
            Admission::Enter {
                set_cookie,
                location,
            } => {
                return response::enter(&set_cookie, &location);
            }
            Admission::Refused(status, why) => {
                return response::problem_page(status, "Refused", why, None);
            }
        };
        if request.method() == Method::POST {
            // What costs or changes something: from this viewer's own pages only.
            if !self.session.same_origin(request.headers()) {
                return response::problem_page(
                    StatusCode::FORBIDDEN,
                    "Refused",
                    "this action is sent from this viewer's own page only: the request's Origin is missing or not this viewer's",
                    None,
                );
            }
            let form = String::from_utf8_lossy(request.body()).into_owned();
            return match path.as_str() {
                "/dlq-redrive" => self.redrive(&form).await,
                "/health" => self.health_page(&form, true).await,
                "/dlq" => self.dead_letter_page(&form, true).await,
                _ => response::problem_page(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "Not allowed",
                    "a POST goes to health (verify), dlq (bodies) or dlq-redrive only",
                    None,
                ),
            };
        }
        if request.method() != Method::GET {
            return response::problem_page(
                StatusCode::METHOD_NOT_ALLOWED,
                "Not allowed",
                "this address is read with GET only (verify, bodies and a redrive are POSTs from the pages)",
                None,
            );
        }
        match path.as_str() {
            "/" => self.search_page(&query).await,
            "/rows" => self.more_rows(&query).await,
            "/event" => self.event_page(&query).await,
            "/export.csv" => self.export(&query, Format::Csv).await,
            "/export.jsonl" => self.export(&query, Format::Jsonl).await,
            "/evidence.zip" => self.evidence(&query).await,
            "/chart" => self.chart(&query).await,
            "/health" => self.health_page(&query, false).await,
            "/dlq" => self.dead_letter_page(&query, false).await,
            "/dlq-confirm" => self.confirm_page(&query).await,
            "/assets/viewer.css" => response::text(StatusCode::OK, "text/css; charset=utf-8", CSS),
            "/assets/viewer.js" => {
                response::text(StatusCode::OK, "text/javascript; charset=utf-8", JS)
            }
            _ => response::problem_page(
                StatusCode::NOT_FOUND,
                "Not found",
                &format!("no page at {path}"),
                Some("./"),
            ),
        }
    }

    /// The search page: the form, then the first page of rows (or why there are none).
    async fn search_page(&self, query: &str) -> Response<Body> {
        let search = match Search::parse(query, Utc::now(), false) {
            Ok(search) => search,
            Err(error) => {
                let failed = Failed::from(error);
                let status = failed.status;
                let main = html! {
                    (page::problem(status.as_u16(), &failed.message(self.words), None))
                    (page::search_form(&page::sent_values(query)))
                };
                return response::page(status, page::layout("Bad search", main));
            }
        };
        let form = page::search_form(&page::form_values(&search));
        match self.rows(&search).await {
            Ok(rows) => {
                // Read already (cached): which part of the range the archive answered.
                let window = self.hot_window().await.ok().flatten();
                let archived =
                    window.filter(|w| w.clip_default(search.range.clone()).from < w.start);
                response::page(
                    StatusCode::OK,
                    page::layout(
                        "Search",
                        html! {
                            (form)
                            (page::recorded_note(&rows.recorded))
                            @if let Some(window) = &archived {
                                (page::archive_note(window))
                            }
                            (results::results(&search, &rows.shown()))
                        },
                    ),
                )
            }
            Err(failed) => {
                let status = failed.status;
                let retry = failed.retry.then(|| format!("./?{query}"));
                response::page(
                    status,
                    page::layout(
                        "Search failed",
                        html! {
                            (form)
                            (page::problem(status.as_u16(), &failed.message(self.words), retry.as_deref()))
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
                .map(|rows| results::fragment(&search, &rows.shown())),
            Err(error) => Err(error.into()),
        };
        match result {
            Ok(fragment) => response::page(StatusCode::OK, fragment),
            Err(failed) => failed.fragment(self.words),
        }
    }

    /// One page of a search: the access recorded, then the page read (`page`); should the read
    /// fail, its failure recorded too (`Recorder::read`).
    async fn rows(&self, search: &Search) -> Result<Rows, Failed> {
        let (recorded, (rows, marks, next, hidden)) = self
            .access
            .read(
                Action::UiSearch,
                &self.table,
                &self.table,
                Some(&search.arguments()),
                self.page(search),
            )
            .await?;
        Ok(Rows {
            rows,
            marks,
            next,
            hidden,
            recorded,
        })
    }

    /// The rows after the cursor (the index checked when the table is read), newest first, and one more to know
    /// whether a next page exists: the rows, their proof marks, the next page's cursor, and how
    /// many access events were left out.
    async fn page(&self, search: &Search) -> Result<Page, Failed> {
        let options = QueryOptions {
            order: Order::Descending,
            page_size: page_size(search),
            concurrency: PAGE_CONCURRENCY,
            limit: None,
        };
        let cursor = search.cursor.clone();
        let hide = !search.shows_access();
        let hidden = std::sync::atomic::AtomicUsize::new(0);
        // A person reads a page at a time: each shard reads on only when its rows are needed
        // (exports and charts read whole ranges, each shard a page ahead).
        let mut rows: Vec<TrailItem> = self
            .trail_rows(
                self.reader.clone().on_demand(),
                &search.plan,
                search.page_range(),
                options,
            )
            .await?
            .try_filter(|row| {
                let after = cursor
                    .as_ref()
                    .is_none_or(|c| c.is_before(&row.audit_time, &row.message_id));
                let access = after && hide && row.is_access_event();
                if access {
                    hidden.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                futures::future::ready(after && !access)
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
        let marks = self.marks(&rows, Utc::now()).await;
        Ok((rows, marks, next, hidden.into_inner()))
    }

    /// The chart of a search (a fragment the page's script shows): its rows counted by hour and
    /// outcome, after its access event (`auditctl.ui.search` with `chart`).
    async fn chart(&self, query: &str) -> Response<Body> {
        let result = async {
            let search = Search::parse(query, Utc::now(), false)?;
            let mut arguments = search.arguments();
            arguments.insert("chart".into(), Value::Bool(true));
            let counted = async {
                let options = QueryOptions {
                    order: Order::Descending,
                    page_size: EXPORT_PAGE_SIZE,
                    concurrency: CONCURRENCY,
                    limit: Some(CHART_MAX as u64),
                };
                let mut counts = chart::Hours::default();
                let hide = !search.shows_access();
                let mut hidden = 0u64;
                let mut rows = self
                    .trail_rows(
                        self.reader.clone(),
                        &search.plan,
                        search.range.clone(),
                        options,
                    )
                    .await?
                    .take(CHART_MAX);
                while let Some(row) = rows.next().await {
                    let row = row?;
                    if hide && row.is_access_event() {
                        hidden += 1;
                        continue;
                    }
                    counts.add(&row.audit_time, &row.text("outcome"));
                }
                let mut note = if counts.total + hidden >= CHART_MAX as u64 {
                    format!("The chart counts the newest {CHART_MAX} events of the range only.")
                } else {
                    String::new()
                };
                if hidden > 0 {
                    note = format!(
                        "{note}{}{hidden} access event(s) (auditctl's own reads) not counted: show access events to count them.",
                        if note.is_empty() { "" } else { " " }
                    );
                }
                Ok::<_, Failed>((counts, note))
            };
            let (_, (counts, note)) = self
                .access
                .read(
                    Action::UiSearch,
                    &self.table,
                    &self.table,
                    Some(&arguments),
                    counted,
                )
                .await?;
            let (from, to) = search.range.bounds().unwrap_or((Utc::now(), Utc::now()));
            Ok::<_, Failed>(chart::render(&counts, from, to, &note))
        };
        match result.await {
            Ok(fragment) => response::page(StatusCode::OK, fragment),
            Err(failed) => failed.fragment(self.words),
        }
    }
}

/// A listener on 127.0.0.1 at `port` (0: a free one), and the address it got.
pub async fn listen(port: u16) -> Result<(tokio::net::TcpListener, SocketAddr), Error> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let failed = |error| Error::Listen { address, error };
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(failed)?;
    let bound = listener.local_addr().map_err(failed)?;
    Ok((listener, bound))
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
        Err(_) => response::page(
            StatusCode::PAYLOAD_TOO_LARGE,
            page::problem(413, "the request's body is too large or broken", None),
        ),
    }
}

#[cfg(test)]
mod tests;
