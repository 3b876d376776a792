"""`auditctl ui` page times at 100,000 events: the first page of a search and each further page
(the cursor), medians, over the DynamoDB stand-in of bench/trail_standin.py (moto answers a Query
on an index by scanning the whole table, about 4 s a Query at 100,000 items: BENCHMARKS.md
"Reading the trail").

It starts the stand-in with N items over two UTC days (with --lookup's structured fields: every
item of one actor, `bench-actor`), starts `auditctl ui --no-audit-event` against it (the stand-in
serves no SQS or STS: the access event's own cost is one SendMessage and, cached by nothing,
GetCallerIdentity, DescribeTable and ListTagsOfResource per page, not measured here), opens the
printed URL, then times over HTTP on 127.0.0.1, each request on a connection of its own:

  first page   GET /?from=D0T00:00:00Z&to=D1T23:59:59.999Z     (the time index, 50 rows)
  next pages   GET /rows?…&cursor=…, following each page's link  (the further pages)
  and the same two with &actor=bench-actor (the lookup).

Usage (builds nothing; a debug build is slower than the release one):

    cargo build --bin auditctl
    python3 bench/ui.py [--items 100000] [--runs 21] [--binary target/debug/auditctl]

Prints one Markdown table row per kind of page: the median, p90 and maximum in milliseconds."""

import argparse
import http.client
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trail_standin import ACTOR, ROOT, TABLE, StandIn  # noqa: E402

DAYS = ["2026-11-22", "2026-11-23"]
RANGE = f"from={DAYS[0]}T00:00:00Z&to={DAYS[1]}T23:59:59.999Z"


class Viewer:
    def __init__(self, binary: Path, endpoint: str):
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update({"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                    "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": endpoint, "TABLE_NAME": TABLE})
        for name in ("ACCESS_QUEUE_URL", "DEAD_LETTER_QUEUE_URL", "AUDIT_QUEUE_URL", "ARCHIVE_BUCKET"):
            env.pop(name, None)
        self.proc = subprocess.Popen([str(binary), "ui", "--no-audit-event"], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True,
                                     start_new_session=True)
        line = self.proc.stdout.readline()
        m = re.match(r"auditctl ui: open http://127\.0\.0\.1:(\d+)(/\S+)", line)
        if not m:
            self.stop()
            raise SystemExit(f"auditctl ui printed no URL: {line!r}")
        self.port, token_path = int(m[1]), m[2]
        # Every path begins with the run's secret (docs/ui.md "Who can open it").
        self.secret = token_path.split("/?", 1)[0]
        status, headers, _ = self.get(token_path)
        assert status == 303, status
        self.cookie = headers["set-cookie"].split(";")[0]

    def get(self, path: str, cookie: str | None = None) -> tuple[int, dict, str]:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        c.request("GET", path, headers={"Cookie": cookie} if cookie else {})
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body

    def timed(self, path: str) -> tuple[float, str]:
        t0 = time.perf_counter()
        status, _, body = self.get(self.secret + path, self.cookie)
        took = (time.perf_counter() - t0) * 1000
        if status != 200:
            text = re.sub(r"<[^>]+>", " ", body)
            raise SystemExit(f"{path}: HTTP {status}: {text[-1500:]}")
        return took, body

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            self.proc.wait(timeout=15)


def rows(body: str) -> int:
    return body.count('class="open"')


def next_link(body: str) -> str | None:
    m = re.search(r'data-rows="([^"]+)"', body)
    return "/" + m[1].replace("&amp;", "&") if m else None  # relative to the run's secret


def measure(viewer: Viewer, query: str, runs: int) -> tuple[list[float], list[float]]:
    first, further = [], []
    for _ in range(runs):
        took, body = viewer.timed(f"/?{query}")
        assert rows(body) == 50, rows(body)
        first.append(took)
    # Further pages: follow the links from the first page, one page each.
    _, body = viewer.timed(f"/?{query}")
    for _ in range(runs):
        link = next_link(body)
        assert link, "a further page"
        took, body = viewer.timed(link)
        assert rows(body) == 50, rows(body)
        further.append(took)
    return first, further


def row(kind: str, times: list[float]) -> str:
    times = sorted(times)
    p90 = times[min(len(times) - 1, int(len(times) * 0.9))]
    return f"| {kind} | {len(times)} | {statistics.median(times):.0f} | {p90:.0f} | {times[-1]:.0f} |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--binary", default=str(ROOT / "target/debug/auditctl"))
    args = ap.parse_args()
    binary = Path(args.binary)
    if not binary.exists():
        raise SystemExit(f"{binary} missing: run `cargo build --bin auditctl` first")
    standin = StandIn(args.items, DAYS, structured=True)
    viewer = None
    try:
        viewer = Viewer(binary, standin.endpoint)
        print(f"auditctl ui ({binary.relative_to(ROOT) if binary.is_relative_to(ROOT) else binary}) against the "
              f"stand-in, {args.items:,} items over {len(DAYS)} UTC days; {platform.machine()}, {os.cpu_count()} cores")
        print()
        print("| page | runs | median ms | p90 ms | max ms |")
        print("| --- | ---: | ---: | ---: | ---: |")
        first, further = measure(viewer, RANGE, args.runs)
        print(row("first page, time index", first))
        print(row("next page, time index", further))
        first, further = measure(viewer, f"{RANGE}&actor={ACTOR}", args.runs)
        print(row(f"first page, actor={ACTOR} (lookup)", first))
        print(row(f"next page, actor={ACTOR} (lookup)", further))
        print()
        print(f"stand-in requests: {standin.counts()}")
    finally:
        if viewer:
            viewer.stop()
        standin.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
