"""auditctl query at scale, on moto: rows per second, peak RSS, requests against the minimum.

Loads items into moto's DynamoDB (BatchWriteItem, 25 a call) in steps, with auditBucket computed
as the function does (FNV-1a 32 of the messageId's UTF-8 bytes, mod 32, two digits, after the
UTC day), and after each step runs the release auditctl over the whole range once:

    cargo build --release --bin auditctl
    .venv/bin/python bench/trail.py [--sizes 10000,50000,100000] [--page-size 500]

Prints a Markdown section for BENCHMARKS.md. Peak RSS is the auditctl process's own
(ru_maxrss from wait4), so it is not hidden by earlier runs; stdout goes to /dev/null.
Not part of `make bench` (it needs no Lambda build, and loading moto takes minutes).
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from local.stack import create_stack, read_stack  # noqa: E402

SHARDS = 32
DAYS = ["2026-11-22", "2026-11-23"]


def fnv1a_32(data: bytes) -> int:
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def bucket(message_id: str, audit_time: str) -> str:
    return f"{audit_time[:10]}#{fnv1a_32(message_id.encode()) % SHARDS:02d}"


def item(i: int) -> dict:
    message_id = f"bench-{i:08d}"
    day = DAYS[i % len(DAYS)]
    ms = (i * 7919) % 86_400_000  # spread over the day, out of insertion order
    t = f"{day}T{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}Z"
    return {
        "messageId": {"S": message_id},
        "auditTime": {"S": t},
        "auditBucket": {"S": bucket(message_id, t)},
        "auditText": {"S": f"user u{i % 1000} did action {i} on resource r{i % 97}"},
        "sqsMessageId": {"S": f"sqs-{i:08d}"},
        "receivedAt": {"S": t},
        "sentAt": {"S": t},
        "receiveCount": {"N": "1"},
        "eventSource": {"S": "arn:aws:sqs:us-east-1:123456789012:AuditQueue"},
        "extra": {"M": {"amount": {"N": f"{i}.50"}, "actor": {"S": f"u{i % 1000}"}}},
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_query(binary: Path, endpoint: str, table: str, page_size: int) -> dict:
    env = dict(os.environ, AWS_ENDPOINT_URL=endpoint, AWS_REGION="us-east-1",
               AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test", TABLE_NAME=table)
    env.pop("AWS_PROFILE", None)
    args = [str(binary), "query", "--from", f"{DAYS[0]}T00:00:00Z", "--to", f"{DAYS[-1]}T23:59:59.999Z",
            "--format", "jsonl", "--page-size", str(page_size), "--stats", "--no-audit-event"]
    started = time.monotonic()
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.Popen(args, env=env, stdout=devnull, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        stats = proc.stderr.read().decode().strip()
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"auditctl failed ({proc.returncode}): {stats}")
    # "<rows> rows, <requests> requests, <read> items read, <s> s, <r> rows/s"
    parts = stats.split(", ")
    return {"rows": int(parts[0].split()[0]), "requests": int(parts[1].split()[0]),
            "wall": wall, "rss_mb": usage.ru_maxrss / 1024, "stats": stats}


def minimum_requests(shard_sizes: dict[str, int], page_size: int) -> int:
    pages = sum(max(1, -(-n // page_size)) for n in shard_sizes.values())
    every = len(DAYS) * SHARDS
    empty = every - len(shard_sizes)
    return 1 + pages + empty  # DescribeTable, then at least one Query per shard of each day


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,50000,100000")
    ap.add_argument("--page-size", type=int, default=500)
    ap.add_argument("--moto", default=str(ROOT / ".venv/bin/moto_server"))
    ap.add_argument("--binary", default=str(ROOT / "target/release/auditctl"))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    binary = Path(args.binary)
    if not binary.exists():
        raise SystemExit(f"{binary} missing: cargo build --release --bin auditctl")

    port = free_port()
    log = open(os.environ.get("MOTO_LOG", os.devnull), "wb")
    moto = subprocess.Popen([args.moto, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        stack = create_stack(read_stack(), endpoint)
        ddb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1",
                           aws_access_key_id="test", aws_secret_access_key="test")
        loaded = 0
        shard_sizes: dict[str, int] = {}
        rows = []
        for size in sizes:
            started = time.monotonic()
            batch = []
            while loaded < size:
                it = item(loaded)
                shard_sizes[it["auditBucket"]["S"]] = shard_sizes.get(it["auditBucket"]["S"], 0) + 1
                batch.append({"PutRequest": {"Item": it}})
                loaded += 1
                if len(batch) == 25 or loaded == size:
                    pending = {stack.table_name: batch}
                    while pending:
                        pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
                    batch = []
            load_s = time.monotonic() - started
            r = run_query(binary, endpoint, stack.table_name, args.page_size)
            if r["rows"] != size:
                raise SystemExit(f"expected {size} rows, got {r['rows']}: {r['stats']}")
            r["size"] = size
            r["load_s"] = load_s
            r["minimum"] = minimum_requests(shard_sizes, args.page_size)
            rows.append(r)
            print(f"# {size}: {r['stats']}; peak RSS {r['rss_mb']:.1f} MB; loaded in {load_s:.0f} s",
                  file=sys.stderr)
    finally:
        status = moto.poll()
        moto.kill()
        moto.wait()
        if status is not None:
            print(f"moto_server exited early with {status} (MOTO_LOG=<file> keeps its log)", file=sys.stderr)

    print("## Reading the trail (`bench/trail.py`)\n")
    print(f"`auditctl query` (release build) over {len(DAYS)} UTC days of items on moto "
          f"({platform.processor() or platform.machine()}, {os.cpu_count()} cores shared with moto), "
          f"`--format jsonl --page-size {args.page_size}` to /dev/null, default `--concurrency 8`. "
          "Peak RSS is auditctl's own (wait4 ru_maxrss). The minimum request count is one "
          "DescribeTable plus, for each of the 32 shards of each day, ⌈items / page size⌉ Queries "
          "(at least one).\n")
    print("| items in range | rows/s | wall | peak RSS | requests | minimum |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['size']:,} | {r['rows'] / r['wall']:,.0f} | {r['wall']:.1f} s | {r['rss_mb']:.1f} MB "
              f"| {r['requests']} | {r['minimum']} |")
    print(f"\nCommand: `.venv/bin/python bench/trail.py --sizes {args.sizes} --page-size {args.page_size}`.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
