//! Owns the choices a flag takes among a library's values, as clap names and helps them
//! (`--format`, `--by`; docs/auditctl.md): each maps onto audit_trail's own type. Must not know
//! what a choice does (audit_trail::output, audit_trail::filter).

use audit_trail::{filter, output};

/// How rows are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for a terminal, long text truncated; a text asked for in full (a body)
    /// under its row.
    Table,
    /// One JSON object per line, every attribute, numbers with their exact digits.
    Jsonl,
    /// Comma-separated values with a header line (RFC 4180 quoting).
    Csv,
}

impl From<Format> for output::Format {
    fn from(format: Format) -> Self {
        match format {
            Format::Table => Self::Table,
            Format::Jsonl => Self::Jsonl,
            Format::Csv => Self::Csv,
        }
    }
}

/// The index a query reads, as `--by` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    /// byAuditTime: every event in the range; --actor, --action and --resource filter it.
    Time,
    /// byActor.
    Actor,
    /// byAction.
    Action,
    /// byResource.
    Resource,
}

impl From<By> for filter::By {
    fn from(by: By) -> Self {
        match by {
            By::Time => Self::Time,
            By::Actor => Self::Actor,
            By::Action => Self::Action,
            By::Resource => Self::Resource,
        }
    }
}
