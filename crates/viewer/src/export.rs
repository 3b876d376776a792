//! Owns the exports: a search streamed as CSV or JSON lines (`auditctl query`'s bytes), its access
//! event first. Must not know the pages or the headers (response.rs).

use std::io::Write;
use std::sync::{Arc, Mutex};

use audit_aws::s3::Bucket;
use bytes::Bytes;
use chrono::Utc;
use futures::{StreamExt, TryStreamExt};
use http::Response;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Map, Value};

use super::response::{self, Body, Failed};
use super::search::Search;
use super::{CONCURRENCY, EXPORT_PAGE_SIZE, Viewer};
use crate::error::{Error, Words};
use audit_trail::access::{AccessLog, Action, Recorded, Recorder};
use audit_trail::item::TrailItem;
use audit_trail::merge::Order;
use audit_trail::output::{Format, Printer};
use audit_trail::query::QueryOptions;

/// Bytes of an export sent at once.
const EXPORT_CHUNK: usize = 64 * 1024;

impl<L: AccessLog + 'static, B: Bucket + 'static> Viewer<L, B> {
    /// An export of a search, streamed as it is read: the bytes of `auditctl query --desc
    /// --format csv|jsonl` over the same range and fields (the same reader and printer).
    pub(super) async fn export(&self, query: &str, format: Format) -> Response<Body> {
        let prepared = async {
            let search = Search::parse(query, Utc::now(), false)?;
            let mut arguments = search.arguments();
            let name = match format {
                Format::Csv => "csv",
                Format::Jsonl => "jsonl",
                Format::Table => "table",
            };
            arguments.insert("format".into(), Value::String(name.into()));
            let options = QueryOptions {
                order: Order::Descending,
                page_size: EXPORT_PAGE_SIZE,
                concurrency: CONCURRENCY,
                limit: None,
            };
            let (recorded, rows) = self
                .access
                .read(
                    Action::UiExport,
                    &self.table,
                    &self.table,
                    Some(&arguments),
                    async {
                        let rows = self
                            .trail_rows(
                                self.reader.clone(),
                                &search.plan,
                                search.range.clone(),
                                options,
                            )
                            .await?;
                        Ok::<_, Failed>(rows)
                    },
                )
                .await?;
            let failure = Failure {
                access: self.access.clone(),
                recorded,
                table: self.table.clone(),
                arguments,
                words: self.words,
            };
            Ok::<_, Failed>((search, name, failure, rows))
        };
        let (search, name, failure, rows) = match prepared.await {
            Ok(ready) => ready,
            Err(failed) => return failed.page(self.words, "Export failed", None),
        };
        // As `auditctl query --no-access` when the search hides access events.
        let hide = !search.shows_access();
        let rows =
            rows.try_filter(move |row| futures::future::ready(!(hide && row.is_access_event())));
        let body = export_body(rows, format, failure);
        let content_type = match format {
            Format::Csv => "text/csv; charset=utf-8",
            _ => "application/x-ndjson; charset=utf-8",
        };
        response::download(body, content_type, &format!("audit-trail.{name}"))
    }
}

/// What an export's body needs to record its read failing after the response began: the
/// recorder, the access event sent, and what it named.
pub(super) struct Failure<L> {
    pub(super) access: Arc<Recorder<L>>,
    pub(super) recorded: Recorded,
    pub(super) table: String,
    pub(super) arguments: Map<String, Value>,
    pub(super) words: Words,
}

impl<L: AccessLog> Failure<L> {
    /// The body's error once the read's failure event is sent (`auditctl.ui.export`, outcome
    /// `failure`, naming the access event), or saying that it could not be.
    async fn record(&self, error: Error) -> std::io::Error {
        let failed = self
            .access
            .fail(
                &self.recorded,
                Action::UiExport,
                &self.table,
                Some(&self.arguments),
                Failed::from(error),
            )
            .await;
        std::io::Error::other(failed.message(self.words))
    }
}

/// Rows printed as `auditctl query` prints them, in chunks as they are read; a failure after
/// the first bytes ends the body with an error (the download fails rather than looking whole),
/// once its failure event is recorded (`failure`).
pub(super) fn export_body<L: AccessLog + 'static>(
    rows: impl futures::Stream<Item = Result<TrailItem, Error>> + Send + 'static,
    format: Format,
    failure: Failure<L>,
) -> Body {
    let buffer = Shared::default();
    let printer = Printer::<_, TrailItem>::new(format, buffer.clone());
    let state = (Box::pin(rows), Some(printer), buffer, Arc::new(failure));
    let chunks =
        futures::stream::unfold(state, |(mut rows, printer, buffer, failure)| async move {
            let mut printer = printer?;
            loop {
                match rows.next().await {
                    Some(Ok(row)) => {
                        if let Err(error) = printer.print(&row) {
                            return Some((Err(error), (rows, None, buffer, failure)));
                        }
                        if buffer.len() >= EXPORT_CHUNK {
                            return Some((
                                Ok(buffer.take()),
                                (rows, Some(printer), buffer, failure),
                            ));
                        }
                    }
                    Some(Err(error)) => {
                        let error = failure.record(error).await;
                        return Some((Err(error), (rows, None, buffer, failure)));
                    }
                    None => {
                        return match printer.finish() {
                            Ok(()) => Some((Ok(buffer.take()), (rows, None, buffer, failure))),
                            Err(error) => Some((Err(error), (rows, None, buffer, failure))),
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
