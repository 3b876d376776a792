//! Owns the rows a search reads, as `auditctl query` reads them (docs/ui.md "Past the table's
//! hot window"): the table's, and, on a stack deployed with `RetentionDays`, the archive's for the
//! part of the range before the table's hot window (`audit_trail::hot`,
//! `LogReader::archived_from`), read only when the table's part is exhausted. Must not know the
//! pages.

use audit_aws::s3::Bucket;
use audit_model::range::TimeRange;
use audit_proof::tlog::LogReader;
use audit_trail::Reader;
use audit_trail::access::AccessLog;
use audit_trail::filter::Plan;
use audit_trail::hot::{HotWindow, archived_items, line_kept};
use audit_trail::item::TrailItem;
use audit_trail::merge::Order;
use audit_trail::query::QueryOptions;
use audit_trail::stack::StackTags;
use chrono::Utc;
use futures::stream::{self, BoxStream};
use futures::{StreamExt, TryStreamExt};

use crate::{Error, Viewer};

impl<L: AccessLog + 'static, B: Bucket + 'static> Viewer<L, B> {
    /// The table's hot window now: its days from the table's tag, as the access's check read
    /// them, else read once; `None` when the table keeps items forever.
    pub(crate) async fn hot_window(&self) -> Result<Option<HotWindow>, Error> {
        let days = match self.access.stack_tags() {
            Some(tags) => tags.retention_days,
            None => {
                *self
                    .hot_days
                    .get_or_try_init(|| async {
                        StackTags::read(self.reader.client(), &self.table, &self.location)
                            .await
                            .map(|tags| tags.retention_days)
                    })
                    .await?
            }
        };
        Ok(days.map(|days| HotWindow::at(days, Utc::now())))
    }

    /// `plan`'s rows over `range` through `reader`, in `options.order`: the table's index checked
    /// when the table is read; before the hot window, the archive's (oldest first they come
    /// first, newest first last, read when reached). A range that misses the window by minutes
    /// only (a preset, back from now; the chart's and the exports' links carry it as from and
    /// to) starts at the window (`HotWindow::clip_default`).
    pub(crate) async fn trail_rows(
        &self,
        reader: Reader,
        plan: &Plan,
        range: TimeRange,
        options: QueryOptions,
    ) -> Result<BoxStream<'static, Result<TrailItem, Error>>, Error> {
        let order = options.order;
        let Some(window) = self.hot_window().await? else {
            reader.check_index(plan).await?;
            return Ok(reader.read(plan, range, options).err_into().boxed());
        };
        let range = window.clip_default(range);
        let split = window.split(&range);
        let table = match split.table {
            Some(part) => {
                reader.check_index(plan).await?;
                reader.read(plan, part, options).err_into().left_stream()
            }
            None => stream::empty().right_stream(),
        };
        let Some(part) = split.archive else {
            return Ok(table.boxed());
        };
        let archive = self.archive.clone().ok_or(Error::PastHotWindow {
            start: window.start.clone(),
            days: window.days,
        })?;
        let filters = plan.on_time_index().filters;
        let archived = stream::once(async move {
            let log = LogReader {
                archive: &archive.bucket,
            };
            let items = match part.bounds() {
                Some((from, _)) => {
                    let keep = |time: &str| part.from.as_str() <= time && time <= part.to.as_str();
                    let keep_line = |line: &str| line_kept(line, &part, &filters);
                    let (read, _) = log
                        .archived_from(archive.length, from, Utc::now(), &keep, &keep_line)
                        .await?;
                    archived_items(read.lines, &part, &filters, order)
                }
                None => Vec::new(),
            };
            Ok::<_, Error>(stream::iter(items.into_iter().map(Ok::<_, Error>)))
        })
        .try_flatten();
        Ok(match order {
            Order::Ascending => archived.chain(table).boxed(),
            Order::Descending => table.chain(archived).boxed(),
        })
    }
}
