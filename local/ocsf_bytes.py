"""The bytes each `make sql` query scans over the OCSF Parquet copy against the gzip JSON-lines
archive, for the same answer (docs/ocsf.md "Queries"):

    python -m local.ocsf_bytes [--events 10000] [--work DIR]

Makes an archive of EVENTS trail lines from the sample lines as the receiver stores them
(tests/e2e/data/ocsf-trail-lines.jsonl; each with its own messageId, an auditTime 8 s after the
one before, actors varied), 1,000 lines an object as the archiver's default batch writes them,
gzip level 6; the Parquet copy of each object by target/debug/audit-ocsf (`cargo build --bin
audit-ocsf` first); then runs each query over both (local/sql.py), checks the answers are equal,
and prints the bytes Athena would scan (local/sql.py's bytes_scanned)."""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import tempfile
from pathlib import Path

from local.sql import bytes_scanned, canonical, connect, connect_ocsf, parameters, run

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "e2e" / "data" / "ocsf-trail-lines.jsonl"
PER_OBJECT = 1000
ACTORS = ["alice", "bob", "carol", "dave", "erin"]


def make(archive: Path, lake: Path, events: int) -> None:
    base = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line]
    for o in range((events + PER_OBJECT - 1) // PER_OBJECT):
        lines = []
        for n in range(o * PER_OBJECT, min(events, (o + 1) * PER_OBJECT)):
            item = dict(base[n % len(base)], messageId=f"m-{n:07d}")
            s = n * 8
            item["auditTime"] = (f"2026-11-22T{s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d}."
                                 f"{n % 1000:03d}Z")
            if "actor" in item and "extra" not in item:
                item["actor"] = ACTORS[n % len(ACTORS)]
            lines.append(json.dumps(item, sort_keys=True, separators=(",", ":")))
        key = f"trail/dt=2026-11-22/hour={o % 24:02d}/p1795341600-{o:040d}-a0.jsonl.gz"
        text = "\n".join(lines) + "\n"
        path = archive / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(text.encode(), 6))
        done = subprocess.run([str(ROOT / "target" / "debug" / "audit-ocsf"), "--object", key, "--out", str(lake)],
                              input=text, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"audit-ocsf: {done.stderr}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=10000)
    ap.add_argument("--work", help="where the archive and the copy are made (default: a temporary directory)")
    args = ap.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="ocsf-bytes-"))
    archive, lake = work / "archive", work / "lake"
    make(archive, lake, args.events)
    stored = {"trail": sum(p.stat().st_size for p in archive.rglob("*.gz")),
              "ocsf": sum(p.stat().st_size for p in lake.rglob("*.parquet"))}
    print(f"{args.events} events: gzip JSON lines {stored['trail']} bytes, Parquet {stored['ocsf']} bytes")
    print("| query | rows | JSON lines scanned | Parquet scanned |")
    print("| --- | --- | --- | --- |")
    for name, actor in (("actor", "alice"), ("actions", None), ("failures", None)):
        params = parameters(name, actor, canonical("2026-11-22T00:00:00Z"), canonical("2026-11-23T23:59:59Z"), None)
        over_trail = run(name, connect(archive), params)
        over_ocsf = run(name, connect_ocsf(lake), params, "ocsf")
        if over_trail != over_ocsf:
            raise SystemExit(f"{name}: the answers differ")
        scanned = {source: bytes_scanned(name, source, d)[0] for source, d in (("trail", archive), ("ocsf", lake))}
        print(f"| `{name}` | {len(over_trail[1])} | {scanned['trail']} | {scanned['ocsf']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
