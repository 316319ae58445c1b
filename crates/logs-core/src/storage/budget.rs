//! A bound on the pages an export's scan holds fetched at once.
//!
//! The Parquet reader fetches every page it needs from a row group's columns before it decodes
//! any of them, and keeps them until it has decoded the row group. The scan reads several files
//! at once (its partitions), so an export holds the fetched pages of several row groups at
//! once. With row groups of 131 072 rows that is about 20 MB each for the wide export, but a
//! file written with one row group (pyarrow's `write_table` with a `row_group_size` above its
//! rows, one file per day) brings a whole day's `error` column at once: 58 MB for 400 000
//! rows, once per partition.
//!
//! [`FetchBudget`] is shared by the readers of one export. Each reader ([`BudgetShare`])
//! counts the bytes it has fetched for the row group it is reading, and gives them back when
//! it fetches for another row group or is dropped. A fetch that would take the bytes held by
//! all readers past the limit waits until others give theirs back, unless
//! - no other reader holds any: a row group larger than the limit is read alone rather than
//!   never;
//! - or every other reader that holds bytes is waiting too, and this one holds bytes and
//!   started waiting first: a reader waits only for readers that can go on, so the scan never
//!   stalls (bytes are given back only by a reader's progress).
//!
//! The limit is on what the reader asks for; the pages the scan reads ahead over a store
//! (`read_ahead.rs`, at most 8 MiB per row group) and the decoded batches come on top. The
//! scan's metrics (`--explain`) show the most bytes held at once, `fetched_bytes_held_peak`,
//! and the reads that waited, `row_group_reads_waited`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, Gauge, MetricBuilder};
use tokio::sync::Notify;

/// The bytes the readers of one export hold fetched (see the module documentation).
#[derive(Debug)]
pub(crate) struct FetchBudget {
    limit: u64,
    state: Mutex<State>,
    /// Signalled whenever `state` changes.
    changed: Notify,
    /// In the scan's metrics, once its first reader is made.
    metrics: OnceLock<BudgetMetrics>,
}

#[derive(Debug, Default)]
struct State {
    /// Bytes held, by reader.
    held: HashMap<u64, u64>,
    /// Readers waiting to fetch, in the order they started waiting.
    waiting: Vec<u64>,
    next_id: u64,
    /// The most bytes held at once so far.
    peak: u64,
}

impl State {
    fn total(&self) -> u64 {
        self.held.values().sum()
    }

    fn may_fetch(&self, id: u64, bytes: u64, limit: u64) -> bool {
        let own = self.held.get(&id).copied().unwrap_or(0);
        let others = self.total() - own;
        if others == 0 || others.saturating_add(own).saturating_add(bytes) <= limit {
            return true;
        }
        // Every other holder waits as well: the first holder to have started waiting goes on.
        let holding = |reader: &u64| self.held.get(reader).is_some_and(|&n| n > 0);
        let all_others_wait =
            self.held.iter().filter(|&(r, &n)| *r != id && n > 0).all(|(r, _)| self.waiting.contains(r));
        all_others_wait && own > 0 && self.waiting.iter().find(|r| holding(r)) == Some(&id)
    }
}

impl FetchBudget {
    /// A budget of `limit` bytes for the readers of one export.
    pub(crate) fn new(limit: u64) -> Arc<FetchBudget> {
        Arc::new(FetchBudget {
            limit,
            state: Mutex::default(),
            changed: Notify::new(),
            metrics: OnceLock::new(),
        })
    }

    /// The share of a new reader of the scan whose metrics are `metrics`.
    pub(crate) fn share(self: &Arc<Self>, metrics: &ExecutionPlanMetricsSet) -> BudgetShare {
        self.metrics.get_or_init(|| BudgetMetrics {
            waits: MetricBuilder::new(metrics).global_counter("row_group_reads_waited"),
            peak: MetricBuilder::new(metrics).global_gauge("fetched_bytes_held_peak"),
        });
        let mut state = self.lock();
        let id = state.next_id;
        state.next_id += 1;
        BudgetShare { budget: Arc::clone(self), id, row_group: None }
    }

    /// The most bytes the readers held at once so far.
    #[cfg(test)]
    pub(crate) fn peak(&self) -> u64 {
        self.lock().peak
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits until reader `id` may fetch `bytes` more, and counts them as its.
    async fn acquire(&self, id: u64, bytes: u64) {
        let mut waiting = None;
        loop {
            // Created before the state is looked at, so that no change in between is missed.
            let changed = self.changed.notified();
            {
                let mut state = self.lock();
                if state.may_fetch(id, bytes, self.limit) {
                    state.waiting.retain(|&r| r != id);
                    *state.held.entry(id).or_insert(0) += bytes;
                    state.peak = state.peak.max(state.total());
                    let peak = state.peak;
                    drop(state);
                    self.changed.notify_waiters();
                    if let Some(metrics) = self.metrics.get() {
                        metrics.peak.set_max(usize::try_from(peak).unwrap_or(usize::MAX));
                        if waiting.is_some() {
                            metrics.waits.add(1);
                        }
                    }
                    return;
                }
                if waiting.is_none() {
                    state.waiting.push(id);
                    waiting = Some(Waiting { budget: self, id });
                    drop(state);
                    // Others may now go on (the last holder that was not waiting).
                    self.changed.notify_waiters();
                    continue;
                }
            }
            changed.await;
        }
    }

    fn release(&self, id: u64) {
        let mut state = self.lock();
        if state.held.remove(&id).is_some_and(|n| n > 0) {
            drop(state);
            self.changed.notify_waiters();
        }
    }
}

/// A reader's wait, undone if the fetch is dropped while waiting.
struct Waiting<'a> {
    budget: &'a FetchBudget,
    id: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut state = self.budget.lock();
        let before = state.waiting.len();
        state.waiting.retain(|&r| r != self.id);
        if state.waiting.len() != before {
            drop(state);
            self.budget.changed.notify_waiters();
        }
    }
}

/// What the budget reports in the scan's metrics.
#[derive(Debug)]
struct BudgetMetrics {
    /// Row-group reads that waited for other readers to give bytes back.
    waits: Count,
    /// The most bytes the export's readers held at once.
    peak: Gauge,
}

/// One reader's share of its export's [`FetchBudget`].
#[derive(Debug)]
pub(crate) struct BudgetShare {
    budget: Arc<FetchBudget>,
    id: u64,
    /// The row group this reader holds bytes of.
    row_group: Option<usize>,
}

impl BudgetShare {
    /// Waits until this reader may hold `bytes` more of `row_group`; a fetch for another row
    /// group than the last first gives back what this reader held.
    pub(crate) async fn acquire(&mut self, row_group: usize, bytes: u64) {
        if self.row_group != Some(row_group) {
            self.budget.release(self.id);
            self.row_group = Some(row_group);
        }
        self.budget.acquire(self.id, bytes).await;
    }
}

impl Drop for BudgetShare {
    fn drop(&mut self) {
        self.budget.release(self.id);
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    fn share(budget: &Arc<FetchBudget>) -> BudgetShare {
        budget.share(&ExecutionPlanMetricsSet::new())
    }

    #[tokio::test]
    async fn fetches_within_the_limit_go_on_and_one_past_it_waits_for_the_others_row_group() {
        let budget = FetchBudget::new(100);
        let (mut a, mut b) = (share(&budget), share(&budget));
        a.acquire(0, 60).await;
        b.acquire(0, 40).await;
        assert_eq!(budget.peak(), 100);
        // a's next row group gives back its 60, then asks for 70: b's 40 leave no room.
        let mut next = Box::pin(a.acquire(1, 70));
        assert!((&mut next).now_or_never().is_none(), "waits for b");
        // b moves on to a small row group, giving back its 40: a's 70 now fit.
        b.acquire(1, 10).await;
        next.await;
        assert_eq!(budget.peak(), 100);
        assert_eq!(budget.metrics.get().unwrap().waits.value(), 1);
    }

    #[tokio::test]
    async fn a_row_group_larger_than_the_limit_is_read_alone() {
        let budget = FetchBudget::new(10);
        let (mut a, mut b) = (share(&budget), share(&budget));
        a.acquire(0, 50).await;
        let mut waiting = Box::pin(b.acquire(0, 50));
        assert!((&mut waiting).now_or_never().is_none());
        drop(a);
        waiting.await;
        assert_eq!(budget.peak(), 50);
    }

    /// Two readers each holding a filter column's pages and each asking for the rest of their
    /// row group: the first to have waited goes on, the other after it has moved on.
    #[tokio::test]
    async fn readers_that_all_wait_do_not_stall() {
        let budget = FetchBudget::new(100);
        let (mut a, mut b) = (share(&budget), share(&budget));
        a.acquire(0, 10).await;
        b.acquire(0, 10).await;
        let mut a_rest = Box::pin(a.acquire(0, 90));
        assert!((&mut a_rest).now_or_never().is_none(), "b holds bytes and does not wait");
        let mut b_rest = Box::pin(b.acquire(0, 90));
        assert!((&mut b_rest).now_or_never().is_none(), "a waited first");
        a_rest.await;
        assert!((&mut b_rest).now_or_never().is_none(), "a holds 100 and goes on");
        drop(a);
        b_rest.await;
        assert_eq!(budget.peak(), 110);
    }

    #[tokio::test]
    async fn a_fetch_dropped_while_waiting_leaves_no_trace() {
        let budget = FetchBudget::new(10);
        let (mut a, mut b, mut c) = (share(&budget), share(&budget), share(&budget));
        a.acquire(0, 5).await;
        b.acquire(0, 5).await;
        assert!(Box::pin(c.acquire(0, 5)).now_or_never().is_none());
        assert!(budget.lock().waiting.is_empty());
        drop(c);
        drop(b);
        a.acquire(0, 5).await;
        assert_eq!(budget.lock().total(), 10);
        drop(a);
        assert_eq!(budget.lock().total(), 0);
    }
}
