//! Owns what `verify` tells: a problem (its kind, the key or `messageId` it concerns, the detail in
//! words), the observer that hears each as it is found, and the summary of what was checked. Must
//! not know how anything was read.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::time::{Duration, Instant};

use audit_model::archive::Period;
use audit_model::digest::ProblemKind;

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
    /// their digest missing).
    pub unsealed_objects: u64,
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
        lines.extend([
            format!(
                "chain     {}",
                if self.chain.is_empty() {
                    "nothing to check"
                } else {
                    &self.chain
                }
            ),
            format!(
                "periods   {} checked: {} sealed ({} empty), {} not sealed yet, {} before the trail, {} without a usable digest",
                self.periods,
                self.sealed,
                self.empty,
                self.not_sealed_yet,
                self.before_trail,
                self.missing
            ),
            format!(
                "objects   {} checked ({} trail, {} tamper); {} not covered by a digest; {} not attested; late objects: {}",
                self.trail_objects + self.tamper_objects,
                self.trail_objects,
                self.tamper_objects,
                self.unsealed_objects,
                self.unattested,
                self.late_objects
            ),
            format!(
                "events    {} checked ({} trail, {} tamper); {} archived twice",
                self.trail_events + self.tamper_events,
                self.trail_events,
                self.tamper_events,
                self.duplicated
            ),
        ]);
        if let Some(table) = &self.table {
            lines.push(format!(
                "items     {} archived events looked up in the table ({} expired by TTL); {} items in the range compared with the archive: {} archived, {} not archived yet, {} from before the trail; {} periods read beyond the range; {} archived late",
                table.archived_compared,
                table.expired,
                table.items,
                table.items_archived,
                table.not_archived_yet,
                table.before_trail,
                table.extra_periods,
                table.archived_late
            ));
            if table.items_repaired > 0 {
                lines.push(format!(
                    "repairs   {} of the archived items archived by auditctl archive repair (in objects a repair wrote: keyed p<period>-9…, metadata repair: true)",
                    table.items_repaired
                ));
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_prints_kind_subject_and_detail_two_spaces_apart() {
        let problem = Problem::new(
            ProblemKind::ObjectChanged,
            "trail/dt=2026-11-22/hour=10/p1795341600-x-a0.jsonl.gz",
            "version 2 beside the sealed version 1",
        );
        assert_eq!(
            problem.to_string(),
            "object changed  trail/dt=2026-11-22/hour=10/p1795341600-x-a0.jsonl.gz  version 2 beside the sealed version 1"
        );
    }

    #[test]
    fn the_console_prints_problems_as_lines_and_the_summary_last() {
        let mut console = Console::new(Vec::new(), false);
        console
            .problem(&Problem::new(ProblemKind::ItemMissing, "m-1", "gone"))
            .unwrap();
        let mut summary = Summary::default();
        summary.count(ProblemKind::ItemMissing);
        console.progress(
            &summary,
            Period {
                start: 0,
                length: Default::default(),
            },
            1,
        );
        console.finish(&summary).unwrap();
        let text = String::from_utf8(console.out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "item missing  m-1  gone");
        assert!(lines[1].starts_with("chain     nothing to check"));
        assert!(lines[2].starts_with("periods   0 checked"));
        assert_eq!(lines.last().unwrap(), &"problems  1 (1 item missing)");
        assert_eq!(console.printed, 1);
    }

    #[test]
    fn the_summary_counts_problems_by_kind() {
        let mut summary = Summary {
            periods: 3,
            sealed: 2,
            ..Summary::default()
        };
        assert!(summary.holds());
        assert!(summary.lines().last().unwrap().contains("none"));
        summary.count(ProblemKind::ItemChanged);
        summary.count(ProblemKind::DigestMissing);
        summary.count(ProblemKind::ItemChanged);
        assert!(!summary.holds());
        assert_eq!(
            summary.lines().last().unwrap(),
            "problems  3 (1 digest missing, 2 item changed)"
        );
        assert_eq!(summary.lines().len(), 5);
        summary.table = Some(TableSummary::default());
        assert_eq!(summary.lines().len(), 6);
    }
}
