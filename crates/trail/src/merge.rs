//! Owns the k-way merge: streams of pages, each ordered by time only (as a Query on one shard of
//! the index returns them), into one stream ordered by (time, id) (docs/architecture.md "The crates",
//! trail). Pure: must not know AWS, unit-tested.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use futures::{Stream, StreamExt};

/// What the merge orders by: the time (the index's range key) then the id.
pub trait Keyed {
    fn time(&self) -> &str;
    fn id(&self) -> &str;
}

impl Keyed for (String, String) {
    fn time(&self) -> &str {
        &self.0
    }
    fn id(&self) -> &str {
        &self.1
    }
}

/// Which way the merged stream runs. `Descending` reverses both the time and the id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Ascending,
    Descending,
}

impl Order {
    fn compare<T: Keyed>(self, a: &T, b: &T) -> Ordering {
        let ascending = a.time().cmp(b.time()).then_with(|| a.id().cmp(b.id()));
        match self {
            Self::Ascending => ascending,
            Self::Descending => ascending.reverse(),
        }
    }
}

/// One source: its pages, and the rows read but not yet merged. The rows at the front that share
/// one time (a run) are sorted by id only once the run is complete (a later time was seen, or the
/// source ended): within a shard, DynamoDB orders equal range keys in no documented way.
struct Source<S, T> {
    pages: S,
    rows: VecDeque<T>,
    /// How many rows at the front form a complete, sorted run.
    ready: usize,
    ended: bool,
}

impl<S, T, E> Source<S, T>
where
    S: Stream<Item = Result<Vec<T>, E>> + Unpin,
    T: Keyed,
{
    /// Makes the front run complete and sorted, reading pages as needed. `Ok(false)` when the
    /// source has no rows left.
    async fn fill(&mut self, order: Order) -> Result<bool, E> {
        while self.ready == 0 {
            let Some(first) = self.rows.front() else {
                if self.ended {
                    return Ok(false);
                }
                self.read_page().await?;
                continue;
            };
            let run = self
                .rows
                .iter()
                .take_while(|row| row.time() == first.time())
                .count();
            if run < self.rows.len() || self.ended {
                self.rows.make_contiguous()[..run].sort_by(|a, b| order.compare(a, b));
                self.ready = run;
            } else {
                self.read_page().await?;
            }
        }
        Ok(true)
    }

    async fn read_page(&mut self) -> Result<(), E> {
        match self.pages.next().await {
            Some(page) => self.rows.extend(page?),
            None => self.ended = true,
        }
        Ok(())
    }

    fn pop(&mut self) -> Option<T> {
        self.ready = self.ready.saturating_sub(1);
        self.rows.pop_front()
    }
}

/// A source's front row in the heap (its key copied, so that the heap borrows no source): the
/// heap's greatest is the next row to emit.
struct HeadKey {
    time: String,
    id: String,
    source: usize,
    order: Order,
}

impl HeadKey {
    fn new<T: Keyed>(row: &T, source: usize, order: Order) -> Self {
        Self {
            time: row.time().to_owned(),
            id: row.id().to_owned(),
            source,
            order,
        }
    }
}

impl Keyed for HeadKey {
    fn time(&self) -> &str {
        &self.time
    }
    fn id(&self) -> &str {
        &self.id
    }
}

impl PartialEq for HeadKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for HeadKey {}
impl PartialOrd for HeadKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for HeadKey {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap pops the greatest: the row that comes first in `order` must be greatest.
        self.order
            .compare(self, other)
            .reverse()
            .then_with(|| other.source.cmp(&self.source))
    }
}

/// Merges sources whose pages are each ordered by time in `order` into one stream ordered by
/// (time, id) in `order`. Reads a source's next page only when its rows are used up (or to
/// complete a run of equal times), so memory is the pages held, not the rows in all. The first
/// error ends the stream.
pub fn merge<S, T, E>(sources: Vec<S>, order: Order) -> impl Stream<Item = Result<T, E>>
where
    S: Stream<Item = Result<Vec<T>, E>> + Unpin,
    T: Keyed,
{
    struct State<S, T, E> {
        sources: Vec<Source<S, T>>,
        heap: BinaryHeap<HeadKey>,
        started: bool,
        /// An error to yield after the row already taken; then the stream ends.
        pending: Option<E>,
        failed: bool,
    }
    let state = State {
        sources: sources
            .into_iter()
            .map(|pages| Source {
                pages,
                rows: VecDeque::new(),
                ready: 0,
                ended: false,
            })
            .collect(),
        heap: BinaryHeap::new(),
        started: false,
        pending: None,
        failed: false,
    };
    futures::stream::unfold(state, move |mut state| async move {
        if state.failed {
            return None;
        }
        if let Some(error) = state.pending.take() {
            state.failed = true;
            return Some((Err(error), state));
        }
        if !state.started {
            state.started = true;
            for index in 0..state.sources.len() {
                match state.sources[index].fill(order).await {
                    Ok(true) => {
                        let front = state.sources[index].rows.front()?;
                        state.heap.push(HeadKey::new(front, index, order));
                    }
                    Ok(false) => {}
                    Err(error) => {
                        state.failed = true;
                        return Some((Err(error), state));
                    }
                }
            }
        }
        // `fill` returned true, so each source in the heap has a front row: the `?`s below
        // cannot end the stream early.
        let next = state.heap.pop()?.source;
        let row = state.sources[next].pop()?;
        match state.sources[next].fill(order).await {
            Ok(true) => {
                let front = state.sources[next].rows.front()?;
                state.heap.push(HeadKey::new(front, next, order));
            }
            Ok(false) => {}
            // The row taken is still good: it goes out first, the error after it.
            Err(error) => state.pending = Some(error),
        }
        Some((Ok(row), state))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime")
            .block_on(future)
    }

    type Row = (String, String);
    type Pages = futures::stream::Iter<std::vec::IntoIter<Result<Vec<Row>, String>>>;

    fn row(time: &str, id: &str) -> Row {
        (time.to_owned(), id.to_owned())
    }

    /// A source of `rows` in pages of `size`.
    fn source(rows: &[Row], size: usize) -> Pages {
        let pages: Vec<Result<Vec<Row>, String>> =
            rows.chunks(size.max(1)).map(|c| Ok(c.to_vec())).collect();
        futures::stream::iter(pages)
    }

    fn run(sources: Vec<Pages>, order: Order) -> Vec<Row> {
        block_on(
            merge(sources, order)
                .map(|r| r.unwrap())
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn interleaves_sources_by_time() {
        let a = [row("1", "a"), row("3", "a2"), row("5", "a3")];
        let b = [row("2", "b"), row("4", "b2"), row("6", "b3")];
        let merged = run(vec![source(&a, 1), source(&b, 2)], Order::Ascending);
        let times: Vec<&str> = merged.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(times, ["1", "2", "3", "4", "5", "6"]);
    }

    #[test]
    fn equal_times_are_ordered_by_id_within_and_across_sources() {
        // Within a shard, equal times come in no particular id order, split across pages.
        let a = [
            row("1", "z"),
            row("2", "d"),
            row("2", "b"),
            row("2", "f"),
            row("3", "a"),
        ];
        let b = [row("2", "c"), row("2", "a"), row("2", "e")];
        let merged = run(vec![source(&a, 2), source(&b, 1)], Order::Ascending);
        assert_eq!(
            merged,
            [
                row("1", "z"),
                row("2", "a"),
                row("2", "b"),
                row("2", "c"),
                row("2", "d"),
                row("2", "e"),
                row("2", "f"),
                row("3", "a")
            ]
        );
    }

    #[test]
    fn descending_reverses_time_and_id() {
        // Descending sources come newest first (ScanIndexForward=false).
        let a = [row("3", "a"), row("2", "a"), row("2", "c"), row("1", "b")];
        let b = [row("2", "b"), row("1", "a")];
        let merged = run(vec![source(&a, 3), source(&b, 1)], Order::Descending);
        assert_eq!(
            merged,
            [
                row("3", "a"),
                row("2", "c"),
                row("2", "b"),
                row("2", "a"),
                row("1", "b"),
                row("1", "a")
            ]
        );
    }

    #[test]
    fn empty_sources_and_empty_pages_are_skipped() {
        let empty: Pages = futures::stream::iter(vec![Ok(vec![]), Ok(vec![])]);
        let a = [row("1", "a"), row("2", "a")];
        let merged = run(vec![source(&[], 1), empty, source(&a, 5)], Order::Ascending);
        assert_eq!(merged, a);
        assert!(run(vec![], Order::Ascending).is_empty());
        assert!(run(vec![source(&[], 1)], Order::Descending).is_empty());
    }

    #[test]
    fn many_pages_of_many_sources_give_the_sorted_whole() {
        // 32 shards, pages of 2, times repeating so that runs cross page boundaries.
        let mut all = Vec::new();
        let mut sources = Vec::new();
        for shard in 0..32u32 {
            let mut rows: Vec<Row> = (0..50u32)
                .map(|i| {
                    let time = format!("{:04}", (i * 7 + shard) % 40);
                    row(&time, &format!("{shard:02}-{i:03}"))
                })
                .collect();
            // Time order only; ids in reverse within equal times (worst case for the runs).
            rows.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.cmp(&a.1)));
            all.extend(rows.clone());
            sources.push(source(&rows, 2));
        }
        all.sort();
        assert_eq!(run(sources, Order::Ascending), all);
    }

    #[test]
    fn pages_are_read_only_as_rows_are_used() {
        // A source whose second page is an error: the merge yields the first page's rows that
        // come before the other source's, then the error, and stops.
        let failing: Pages = futures::stream::iter(vec![
            Ok(vec![row("1", "a"), row("2", "a")]),
            Err("page 2 failed".to_owned()),
        ]);
        let other = source(&[row("9", "z")], 1);
        let results: Vec<Result<Row, String>> =
            block_on(merge(vec![failing, other], Order::Ascending).collect());
        assert_eq!(results[0], Ok(row("1", "a")));
        assert_eq!(results.last(), Some(&Err("page 2 failed".to_owned())));
        assert!(!results.contains(&Ok(row("9", "z"))));
    }
}
