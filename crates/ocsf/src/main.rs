//! `audit-ocsf`: the lines of one archive object (stdin, as `gunzip` gives them) as OCSF Parquet
//! objects under a directory, in Security Lake's layout (docs/ocsf.md "Trying it"). The words
//! for people are here; the mapping and the writer are the library's.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;

use audit_ocsf::{Place, Record, object_key, record, write};
use clap::Parser;

/// Maps the lines of one archive object (on stdin) to OCSF 1.3 records, written as zstd Parquet:
/// one object per class, region, account and event day, under
/// OUT/ext/SOURCE/region=…/accountId=…/eventDay=YYYYMMDD/.
#[derive(Debug, Parser)]
#[command(name = "audit-ocsf", version)]
struct Args {
    /// The archive object's key the lines come from (`trail/dt=…/….jsonl.gz`): each record's
    /// `unmapped.trail.object`, as `auditctl prove` prints it.
    #[arg(long)]
    object: String,
    /// The directory the Parquet objects are written under.
    #[arg(long)]
    out: PathBuf,
    /// The custom source's name, the key's second part.
    #[arg(long, default_value = "audit-receiver")]
    source: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(message) => {
            eprintln!("audit-ocsf: {message}");
            ExitCode::from(2)
        }
    }
}

/// Writes the objects; gives back how many lines gave no record.
fn run(args: &Args) -> Result<usize, String> {
    let stem = args.object.rsplit('/').next().unwrap_or_default();
    let stem = stem.strip_suffix(".jsonl.gz").unwrap_or(stem);
    // One object per class, region, account and event day: its key says all four.
    let mut objects: BTreeMap<String, Vec<Record>> = BTreeMap::new();
    let mut refused = 0;
    for (number, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.map_err(|e| format!("reading stdin: {e}"))?;
        if line.is_empty() {
            continue;
        }
        let place = Place {
            object: &args.object,
            line_number: number as u64,
        };
        match record(&line, place) {
            Ok(r) => {
                let name = format!("{}-{stem}", r.class.uid());
                let key = object_key(&args.source, &r.region, &r.account, r.time, &name);
                objects.entry(key).or_default().push(r);
            }
            Err(e) => {
                eprintln!("audit-ocsf: line {number} gives no record: {e}");
                refused += 1;
            }
        }
    }
    for (key, mut records) in objects {
        let path = args.out.join(&key);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        let file = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        write(&mut records, file).map_err(|e| format!("{key}: {e}"))?;
        println!("{key}\t{} records", records.len());
    }
    Ok(refused)
}
