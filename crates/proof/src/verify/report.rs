//! Owns what `verify` tells: a problem (its kind, the key or `messageId` it concerns, the detail in
//! words), the observer that hears each as it is found, and the summary of what was checked. Must
//! not know how anything was read.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::time::{Duration, Instant};

use audit_model::archive::Period;
use audit_model::digest::{ProblemKind, digest_key};

use crate::Error;

/// One thing that does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub kind: ProblemKind,
    /// The object or digest key, or the item's `messageId`.
    pub subject: String,
    pub detail: String,
}

impl Problem {
    pub fn new(kind: ProblemKind, subject: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind,
            subject: subject.into(),
            detail: detail.into(),
        }
    }
}

/// `<kind>  <key or messageId>  <detail>`: the kind first, so that `cut`, `grep` and `sort` read
/// the output; two spaces between, as kinds and details hold single spaces.
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}  {}  {}", self.kind, self.subject, self.detail)
    }
}

/// Hears what `verify` finds, as it finds it.
pub trait Observer {
    /// A problem, to print now.
    fn problem(&mut self, problem: &Problem) -> Result<(), Error>;
    /// A period was checked (for a progress line).
    fn progress(&mut self, _summary: &Summary, _period: Period, _of: u64) {}
}

/// Collects problems (tests).
impl Observer for Vec<Problem> {
    fn problem(&mut self, problem: &Problem) -> Result<(), Error> {
        self.push(problem.clone());
        Ok(())
    }
}

/// Prints each problem on a line of `out` as it is found and, when stderr is a terminal, a
/// progress line there (overwritten in place, cleared before each problem and at the end).
pub struct Console<W: Write> {
    out: W,
    progress: bool,
    shown: bool,
    last: Option<Instant>,
    printed: u64,
}

impl<W: Write> Console<W> {
    /// `progress`: stderr is a terminal.
    pub fn new(out: W, progress: bool) -> Self {
        Self {
            out,
            progress,
            shown: false,
            last: None,
            printed: 0,
        }
    }

    /// Problems printed so far.
    pub fn printed(&self) -> u64 {
        self.printed
    }

    /// Clears the progress line, if one is shown.
    pub fn clear(&mut self) {
        if self.shown {
            eprint!("\r\x1b[K");
            let _ = std::io::stderr().flush();
            self.shown = false;
        }
    }

    /// The summary, after the problems.
    pub fn finish(&mut self, summary: &Summary) -> std::io::Result<()> {
        self.clear();
        for line in summary.lines() {
            writeln!(self.out, "{line}")?;
        }
        self.out.flush()
    }
}

impl<W: Write> Observer for Console<W> {
    fn problem(&mut self, problem: &Problem) -> Result<(), Error> {
        self.clear();
        writeln!(self.out, "{problem}")?;
        self.out.flush()?;
        self.printed += 1;
        Ok(())
    }

    fn progress(&mut self, summary: &Summary, period: Period, of: u64) {
        if !self.progress
            || self
                .last
                .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
        {
            return;
        }
        self.last = Some(Instant::now());
        let start = chrono::DateTime::from_timestamp(period.start, 0)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_default();
        eprint!(
            "\r\x1b[Kverify: period {start} ({} of {of}), {} objects, {} events, {} problems",
            summary.periods,
            summary.trail_objects + summary.tamper_objects,
            summary.trail_events + summary.tamper_events,
            summary.problem_count()
        );
        let _ = std::io::stderr().flush();
        self.shown = true;
    }
}

/// What was checked, and what was found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// The ARN of the digest key the signatures were checked with (what KMS answered for
    /// `DIGEST_KEY_ID`, resolved once: an alias repointed shows here).
    pub key: String,
    /// From which digest the range's chain is trusted, and why (or why there is none).
    pub chain: String,
    /// Periods of the range.
    pub periods: u64,
    /// With a digest.
    pub sealed: u64,
    /// With a digest that lists no object.
    pub empty: u64,
    /// Without a digest, and not due yet.
    pub not_sealed_yet: u64,
    /// Before the chain's first digest.
    pub before_trail: u64,
    /// Without a usable digest though due: none (each a `digest missing`), or bytes that are not
    /// a digest (a `signature invalid`).
    pub missing: u64,
    /// Listed objects read and checked, trail and tamper.
    pub trail_objects: u64,
    pub tamper_objects: u64,
    /// Their events (lines).
    pub trail_events: u64,
    pub tamper_events: u64,
    /// Objects in the range's periods that no digest covers (not sealed yet, before the trail, or
    /// their digest missing), and of those, in periods before the trail and in periods not sealed
    /// yet (the rest are in periods without a usable digest).
    pub unsealed_objects: u64,
    pub objects_before_trail: u64,
    pub objects_not_sealed_yet: u64,
    /// The period of the chain's first digest (where the trail begins), when there is one.
    pub genesis: Option<Period>,
    /// The periods not sealed yet: from when, and when the last one's digest is due.
    pub unsealed_span: Option<Unsealed>,
    /// Objects in sealed periods' places that their digest does not list, but a later digest
    /// lists as late (found after their period was sealed).
    pub late_objects: u64,
    /// Entries of the digests' unattested lists (each an `object not attested`).
    pub unattested: u64,
    /// Records read a second time in the range's sealed objects (each an `event duplicated`).
    pub duplicated: u64,
    /// With `--table`.
    pub table: Option<TableSummary>,
    /// With the attestation key: its ARN and the lines and items checked with it.
    pub attestations: Option<(String, u64)>,
    /// Without it: what the caller says instead (how to give it), when anything.
    pub attestations_unchecked: String,
    /// The transparency log.
    pub log: LogSummary,
    pub problems: BTreeMap<ProblemKind, u64>,
}

/// The periods of the range not sealed yet (within the grace: counted, not a problem).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsealed {
    /// The first one's start (epoch seconds).
    pub from: i64,
    /// When the last one's digest is due: its sealing time and the grace after it.
    pub due: i64,
    /// No period after them was sealed or found missing: they are the range's newest.
    pub newest: bool,
}

/// What was checked of the transparency log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogSummary {
    /// Digests of the range whose tree was checked.
    pub digests: u64,
    /// Digests of the range without a tree (sealed before the log began).
    pub untreed: u64,
    /// The digest whose period's leaves are the tree's first, when the range holds it.
    pub begins: Option<String>,
    /// The tree's size before the range's first period checked, and after its last.
    pub from: Option<u64>,
    pub to: u64,
    /// Leaves appended (lines of the listed objects) and compared with the tiles.
    pub leaves: u64,
    /// Tiles compared with the leaves.
    pub tiles: u64,
    /// Checkpoints read and checked (signature, size and root).
    pub checkpoints: u64,
    /// Consistency proofs made from the tiles and checked.
    pub consistency: u64,
    /// Cosignatures checked, and of how many witnesses (`--witness-key`).
    pub cosignatures: u64,
    pub witnesses: u64,
    /// Of digests sealed within the grace: their tiles or checkpoint not written yet (one each),
    /// and cosignatures not made yet of their checkpoints (counted, not problems).
    pub pending: u64,
    pub uncosigned_yet: u64,
}

impl LogSummary {
    /// The summary's `log` line, when the range has a digest.
    fn line(&self) -> Option<String> {
        if self.digests == 0 {
            return (self.untreed > 0).then(|| {
                format!(
                    "log       none in the range: its {} digest(s) carry no tree (sealed before the transparency log began)",
                    self.untreed
                )
            });
        }
        let start = match (&self.begins, self.untreed) {
            (Some(first), 0) => format!("the log begins at {first}; "),
            (Some(first), n) => format!(
                "the log begins at {first} ({n} digest(s) of the range before it carry no tree); "
            ),
            (None, _) => String::new(),
        };
        let cosigned = if self.witnesses == 0 {
            "cosignatures not asked for (--witness-key)".to_owned()
        } else {
            format!(
                "{} cosignature(s) of {} witness(es) ({} not made yet)",
                self.cosignatures, self.witnesses, self.uncosigned_yet
            )
        };
        let pending = match self.pending {
            0 => String::new(),
            n => format!(
                "; {n} part(s) of the log of digests sealed within the grace not written yet (tiles, checkpoint)"
            ),
        };
        Some(format!(
            "log       {start}tree sizes {} to {}: {} leaves appended and {} tiles compared over {} digest(s); {} checkpoint(s) checked (signature, size, root); {} consistency proof(s); {cosigned}{pending}",
            self.from.unwrap_or(0),
            self.to,
            self.leaves,
            self.tiles,
            self.digests,
            self.checkpoints,
            self.consistency
        ))
    }
}

/// What `--table` compared.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableSummary {
    /// Archived trail events of the range's periods looked up in the table.
    pub archived_compared: u64,
    /// Of those, gone from the table after their `expiresAt` (TTL).
    pub expired: u64,
    /// Of those, in the table but different (each an `item changed`).
    pub changed: u64,
    /// Of those, not in the table and not expired (each an `item missing`).
    pub missing: u64,
    /// Items of the table with auditTime in the range.
    pub items: u64,
    /// Of those, found among the archived events.
    pub items_archived: u64,
    /// Of those, archived by `auditctl archive repair` (in an object a repair wrote).
    pub items_repaired: u64,
    /// Written by the function within `--archive-lag` of now, not archived yet.
    pub not_archived_yet: u64,
    /// Written before the chain's first digest (never archived).
    pub before_trail: u64,
    /// In none of the periods they can have been archived in (each an `item not archived`).
    pub not_archived: u64,
    /// Periods read beyond the range to find where items were archived.
    pub extra_periods: u64,
    /// Of the items archived, those found only after `--archive-lag` (up to the stream's 24
    /// hours and the last retry's lag: `LATE_ARCHIVE_SECONDS`).
    pub archived_late: u64,
}

impl Summary {
    /// Whether everything held.
    pub fn holds(&self) -> bool {
        self.problems.is_empty()
    }

    pub fn problem_count(&self) -> u64 {
        self.problems.values().sum()
    }

    pub(crate) fn count(&mut self, kind: ProblemKind) {
        *self.problems.entry(kind).or_default() += 1;
    }

    /// The summary printed after the problems, a line each: the digest key (when known), the
    /// chain's start, periods, objects, events, items (with `--table`), problems.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = (!self.key.is_empty())
            .then(|| format!("key       {}", self.key))
            .into_iter()
            .collect();
        lines.push(format!(
            "chain     {}",
            if self.chain.is_empty() {
                "nothing to check"
            } else {
                &self.chain
            }
        ));
        lines.push(self.periods_line());
        lines.extend(self.trail_line());
        lines.push(self.objects_line());
        lines.push(format!(
            "events    {} checked ({} trail, {} tamper); {} archived twice{}",
            self.trail_events + self.tamper_events,
            self.trail_events,
            self.tamper_events,
            self.duplicated,
            reported(self.duplicated, "event duplicated")
        ));
        if let Some(table) = &self.table {
            lines.extend(table.lines());
        }
        match &self.attestations {
            Some((arn, checked)) => lines.push(format!(
                "attested  {checked} item line(s) checked (archived trail lines, and with --table the table's items of the range) against the receiver's attestation key {arn}"
            )),
            None if !self.attestations_unchecked.is_empty() => {
                lines.push(format!("attested  {}", self.attestations_unchecked));
            }
            None => {}
        }
        lines.extend(self.log.line());
        let problems = if self.problems.is_empty() {
            "problems  none: the trail is as sealed".to_owned()
        } else {
            let kinds: Vec<String> = self
                .problems
                .iter()
                .map(|(kind, n)| format!("{n} {kind}"))
                .collect();
            format!("problems  {} ({})", self.problem_count(), kinds.join(", "))
        };
        lines.push(problems);
        lines
    }
}

impl Summary {
    /// The periods from the trail's first (those before it are the `trail` line's), and why any
    /// of them is not sealed.
    fn periods_line(&self) -> String {
        let checked = self.periods - self.before_trail;
        let pending = match (self.not_sealed_yet, self.unsealed_span) {
            (0, _) | (_, None) => String::new(),
            (n, Some(span)) => format!(
                " ({}from {}: within the grace, no digest is due before {})",
                if span.newest {
                    format!("the newest {n}, ")
                } else {
                    String::new()
                },
                time(span.from),
                time(span.due)
            ),
        };
        format!(
            "periods   {checked} checked: {} sealed ({} empty), {} not sealed yet{pending}, {} without a usable digest{}",
            self.sealed,
            self.empty,
            self.not_sealed_yet,
            self.missing,
            reported(self.missing, "digest missing or signature invalid")
        )
    }

    /// When the range starts before the trail: where the trail begins, once.
    fn trail_line(&self) -> Option<String> {
        if self.before_trail == 0 {
            return None;
        }
        let n = self.before_trail;
        let objects = match self.objects_before_trail {
            0 => String::new(),
            k => format!(
                "; {k} object(s) in them, which no digest can prove (trail not sealed: reported above)"
            ),
        };
        Some(match self.genesis {
            Some(genesis) if n == self.periods => format!(
                "trail     the range ends before the trail begins (its first period {}, digest {}): none of its {n} period(s) is checked{objects}",
                time(genesis.start),
                digest_key(genesis)
            ),
            Some(genesis) => format!(
                "trail     the range starts before the trail: its first period is {} (digest {}); the {n} period(s) before it are not counted{objects}",
                time(genesis.start),
                digest_key(genesis)
            ),
            None => format!(
                "trail     none: no digest chain (see chain), so none of the range's {n} period(s) is checked{objects}"
            ),
        })
    }

    /// The objects checked, and why any is not covered by a digest.
    fn objects_line(&self) -> String {
        let missing =
            self.unsealed_objects - self.objects_before_trail - self.objects_not_sealed_yet;
        let why = because(&[
            (
                self.objects_not_sealed_yet,
                "in periods not sealed yet (not a problem)",
            ),
            (
                self.objects_before_trail,
                "before the trail (trail not sealed: reported above)",
            ),
            (
                missing,
                "in periods without a usable digest (reported above)",
            ),
        ]);
        let late = match self.late_objects {
            0 => String::new(),
            _ => " (found after their period was sealed, and listed as late by a later digest)"
                .to_owned(),
        };
        format!(
            "objects   {} checked ({} trail, {} tamper); {} not covered by a digest{why}; {} not attested{}; late objects: {}{late}",
            self.trail_objects + self.tamper_objects,
            self.trail_objects,
            self.tamper_objects,
            self.unsealed_objects,
            self.unattested,
            reported(self.unattested, "object not attested"),
            self.late_objects
        )
    }
}

impl TableSummary {
    /// The `items` lines: the archived events looked up in the table, the table's items looked up
    /// in the archive, each with why any was not found as it should be; repairs when any.
    fn lines(&self) -> Vec<String> {
        let same = self.archived_compared - self.changed - self.missing - self.expired;
        let not_same = because(&[
            (self.changed, "changed (item changed: reported above)"),
            (
                self.missing,
                "not in the table (item missing: reported above)",
            ),
            (
                self.expired,
                "expired by TTL (their expiresAt passed: not a problem)",
            ),
        ]);
        let not_archived = because(&[
            (
                self.not_archived_yet,
                "not archived yet (written within --archive-lag of now)",
            ),
            (
                self.before_trail,
                "written before the trail (trail not sealed: reported above)",
            ),
            (
                self.not_archived,
                "not archived (item not archived: reported above)",
            ),
        ]);
        let late = match self.archived_late {
            0 => String::new(),
            n => format!(" ({n} late: found beyond --archive-lag)"),
        };
        let mut lines = vec![
            format!(
                "items     {} archived events looked up in the table, {same} found as archived{not_same}",
                self.archived_compared
            ),
            format!(
                "items     {} items of the table in the range looked up in the archive, {} archived{late}{not_archived}; {} period(s) read beyond the range",
                self.items, self.items_archived, self.extra_periods
            ),
        ];
        if self.items_repaired > 0 {
            lines.push(format!(
                "repairs   {} of the archived items archived by auditctl archive repair (in objects a repair wrote: keyed p<period>-9…, metadata repair: true)",
                self.items_repaired
            ));
        }
        lines
    }
}

/// `: n why, m why` of the counts that are not zero; nothing when all are.
fn because(parts: &[(u64, &str)]) -> String {
    let said: Vec<String> = parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, why)| format!("{n} {why}"))
        .collect();
    if said.is_empty() {
        String::new()
    } else {
        format!(": {}", said.join(", "))
    }
}

/// ` (<kind>: reported above)` when `n` is not zero.
fn reported(n: u64, kind: &str) -> String {
    match n {
        0 => String::new(),
        _ => format!(" ({kind}: reported above)"),
    }
}

fn time(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| seconds.to_string())
}

#[cfg(test)]
mod tests;
