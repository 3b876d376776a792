//! Owns an evidence bundle as files (docs/archive.md "Evidence for auditors"): the query's
//! filters as a test on an archived line, the contents made (`LogReader::evidence`), the
//! manifest with who made it, and the files written as a directory, a .zip or a .tar.gz. Used
//! by `auditctl export --evidence` and the viewer's "Evidence bundle" link alike, so both give
//! the same files. Must not know a command line, where the log's key came from, or which
//! packing a path asks for (`audit_check_proof::packing`).

use std::io::{Seek, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use audit_model::archive::PeriodLength;
use audit_model::evidence::{
    CHECKPOINT, EVENTS, EVIDENCE_FORMAT, MANIFEST, Manifest, PROOFS, PUBLIC_KEY, Query, UNPROVEN,
};
use audit_model::note::WitnessKey;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};

use super::Ask;
use crate::archive::Archive;
use crate::offline::public_key_pem;
use crate::tlog::{LogKey, LogReader};

/// Why a bundle could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The archive could not be read, or what it holds does not prove the events.
    #[error(transparent)]
    Read(#[from] crate::Error),
    /// A proof or the manifest could not be written as JSON.
    #[error("the bundle's {what} cannot be written as JSON: {source}")]
    Json {
        what: &'static str,
        source: serde_json::Error,
    },
    /// A file of the bundle could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The filters of a query, as (the archived line's field, its value): actor, action, resource,
/// outcome, sourceIp, senderId.
pub type Filters = Vec<(&'static str, String)>;

/// Whether the archived line has each filter's field equal to its value (an IP in its
/// canonical form).
pub fn matches(line: &Value, filters: &[(&'static str, String)]) -> bool {
    filters.iter().all(|(name, want)| {
        let got = line.get(*name).and_then(Value::as_str);
        match (*name, got) {
            ("sourceIp", Some(got)) => got
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.to_string() == *want),
            (_, got) => got == Some(want.as_str()),
        }
    })
}

/// What a bundle is made of: the range's bounds (RFC 3339, as parsed), the filters, the period
/// length, the log's key (checked, its DER and ARN), the witnesses, the tree size asked for, and
/// who makes it (the access's caller).
pub struct Request<'a> {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// The range as the query gave it (the manifest's `query.from` and `query.to`).
    pub from_text: &'a str,
    pub to_text: &'a str,
    pub filters: &'a [(&'static str, String)],
    pub length: PeriodLength,
    pub key: &'a LogKey,
    pub key_der: &'a [u8],
    pub key_arn: &'a str,
    pub origin: &'a str,
    pub witnesses: &'a [WitnessKey],
    pub tree_size: Option<u64>,
    pub made_by: String,
}

/// A bundle's files, in the order they are written, and its manifest.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub files: Vec<(String, Vec<u8>)>,
    pub manifest: Manifest,
}

/// The lines, each ended by a newline; each line is freed once copied (a bundle's events are
/// its largest part: never held twice over).
fn jsonl(lines: Vec<String>) -> Vec<u8> {
    let mut text = Vec::with_capacity(lines.iter().map(|line| line.len() + 1).sum());
    for line in lines {
        text.extend_from_slice(line.as_bytes());
        text.push(b'\n');
    }
    text
}

/// The bundle of `request`: its events and proofs read from the archive, every file made.
pub async fn make<A: Archive>(
    log: &LogReader<'_, A>,
    request: &Request<'_>,
) -> Result<Bundle, BundleError> {
    let filters = request.filters;
    let keep = |line: &Value| matches(line, filters);
    let length = request.length;
    let ask = Ask {
        first: length.period_of(request.from),
        last: length.period_of(request.to),
        keep: &keep,
        filtered: !filters.is_empty(),
        key: request.key,
        origin: request.origin,
        witnesses: request.witnesses,
        tree_size: request.tree_size,
        now: Utc::now().timestamp(),
    };
    let mut evidence = log.evidence(&ask).await?;
    let event_count = evidence.events.len() as u64;
    // Each proof written as its line and freed, as the events below.
    let mut proofs = Vec::new();
    for proof in std::mem::take(&mut evidence.proofs) {
        serde_json::to_writer(&mut proofs, &proof).map_err(|source| BundleError::Json {
            what: "proofs",
            source,
        })?;
        proofs.push(b'\n');
    }
    let mut files: Vec<(String, Vec<u8>)> = vec![
        (
            EVENTS.to_owned(),
            jsonl(std::mem::take(&mut evidence.events)),
        ),
        (PROOFS.to_owned(), proofs),
        (
            UNPROVEN.to_owned(),
            jsonl(std::mem::take(&mut evidence.unproven_lines)),
        ),
        (
            CHECKPOINT.to_owned(),
            evidence.checkpoint.clone().into_bytes(),
        ),
        (
            PUBLIC_KEY.to_owned(),
            public_key_pem(request.key_der).into_bytes(),
        ),
    ];
    for (file, text) in &evidence.checkpoints {
        files.push((file.clone(), text.clone().into_bytes()));
    }
    let manifest = Manifest {
        format: EVIDENCE_FORMAT.to_owned(),
        made_at: Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
        made_by: request.made_by.clone(),
        origin: request.origin.to_owned(),
        key_arn: request.key_arn.to_owned(),
        query: Query {
            from: request.from_text.to_owned(),
            to: request.to_text.to_owned(),
            filters: filters
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Value::String(v.clone())))
                .collect::<Map<_, _>>(),
            period_seconds: length.seconds(),
        },
        periods: evidence.periods,
        events: event_count,
        unproven_events: evidence.unproven.len() as u64,
        tree_size: evidence.tree_size,
        proven: evidence.proven,
        not_proven: evidence.not_proven,
        completeness: evidence.completeness,
        unproven: evidence.unproven,
    };
    let mut text = serde_json::to_string_pretty(&manifest).map_err(|source| BundleError::Json {
        what: "manifest",
        source,
    })?;
    text.push('\n');
    files.push((MANIFEST.to_owned(), text.into_bytes()));
    Ok(Bundle { files, manifest })
}

impl Bundle {
    /// The files as one zip archive (deflate), each at its name (no directory above them).
    pub fn write_zip<W: Write + Seek>(&self, writer: W) -> std::io::Result<W> {
        let mut zip = zip::ZipWriter::new(writer);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(0o644);
        for (name, bytes) in &self.files {
            zip.start_file(name.as_str(), options)
                .map_err(std::io::Error::other)?;
            zip.write_all(bytes)?;
        }
        zip.finish().map_err(std::io::Error::other)
    }

    /// The files as one zip archive, in memory (what a download sends).
    pub fn zip_bytes(&self) -> std::io::Result<Vec<u8>> {
        Ok(self
            .write_zip(std::io::Cursor::new(Vec::new()))?
            .into_inner())
    }

    /// The files as one gzip'd tar, each at its name (no directory above them).
    pub fn write_tar_gz<W: Write>(&self, writer: W) -> std::io::Result<W> {
        let gzip = flate2::write::GzEncoder::new(writer, flate2::Compression::default());
        let mut tar = tar::Builder::new(gzip);
        for (name, bytes) in &self.files {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(Utc::now().timestamp().max(0) as u64);
            header.set_cksum();
            tar.append_data(&mut header, name, bytes.as_slice())?;
        }
        tar.into_inner()?.finish()
    }

    /// The files under `dir` (made, with their subdirectories).
    pub fn write_directory(&self, dir: &Path) -> Result<(), BundleError> {
        for (file, bytes) in &self.files {
            let path = dir.join(file);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|source| BundleError::Write {
                    path: parent.to_owned(),
                    source,
                })?;
            }
            std::fs::write(&path, bytes).map_err(|source| BundleError::Write { path, source })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_keeps_lines_whose_field_is_the_value() {
        let line: Value = serde_json::json!({"actor": "alice", "sourceIp": "2001:DB8::1"});
        assert!(matches(&line, &[]));
        assert!(matches(&line, &[("actor", "alice".to_owned())]));
        assert!(!matches(&line, &[("actor", "bob".to_owned())]));
        assert!(matches(&line, &[("sourceIp", "2001:db8::1".to_owned())]));
        assert!(!matches(&line, &[("action", "x".to_owned())]));
    }
}
