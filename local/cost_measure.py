"""The measuring run of `make cost-measure`: every AWS request of the local stack counted
(local/meter.py) while events go through it at a trickle and in full batches, and while it
idles, written to bench/cost/counts.json, which `make cost` (local/cost.py) prices.

Phases, after a warm-up (the counts of which are dropped):

* **idle**: nothing sent for IDLE_PERIODS digest periods; every sealing run's and witness run's
  requests are recorded run by run, and split into the runs that sealed a period (wrote its
  digest) and the runs that found nothing to do, so that the AWS hour (one period, 3600 s, and
  twelve runs of the five-minute schedule) is counted from the requests of one sealing run and
  eleven idle runs, not from the local period's length;
* **trickle**: TRICKLE_EVENTS events sent one at a time, TRICKLE_GAP seconds apart (each its
  own receive, invocation and archive object: below a few events a second, as in AWS);
* **batch**: BATCH_EVENTS events sent ten to a request as fast as the producer can.

The OCSF writer (docs/ocsf.md) runs beside the archiver on a stream trigger of its own, with its
template window scaled as the archiver's; its requests are the program "ocsf-writer", and the
records each of its invocations was given are kept, as the archiver's are.

For each active phase, the requests per event are the phase's requests less what the idle phase
made in as many seconds (the sealing and witness runs that would have run anyway), divided by
the events. SQS receives that returned nothing are polling, kept apart (Lambda's event source
mapping long-polls at its own rate, docs/operations.md "Cost of keeping the trail").

    python -m local.cost_measure [--out bench/cost/counts.json]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from local import procs
from local import witness as local_witness
from local.harness import LocalSystem, Producer, _client
from local.meter import Meter

ROOT_DIR = Path(__file__).resolve().parent.parent
IDLE_PERIODS = 8
TRICKLE_EVENTS = 40
TRICKLE_GAP = 1.5
BATCH_EVENTS = 2000
# The archiver's stream batching window on the local stack (the template's ArchiveBatchingWindow
# is 60 s), scaled down as the digest period is.
LOCAL_ARCHIVE_WINDOW = 1
# What a run is: programs measured run by run, and those that must not appear in a request per
# event (the stream's GetRecords by Lambda's trigger are not charged; polling is apart).
RUN_PROGRAMS = ("sealer", "witness")


def _diff(after: dict, before: dict) -> dict:
    out = {}
    for program, apis in after.items():
        for api, cell in apis.items():
            prev = before.get(program, {}).get(api, {"requests": 0, "bytes": 0})
            d = {"requests": cell["requests"] - prev["requests"], "bytes": cell["bytes"] - prev["bytes"]}
            if d["requests"]:
                out.setdefault(program, {})[api] = d
    return out


def _mean(runs: list[dict]) -> dict:
    """Mean requests (and bytes) per run, by API."""
    total: dict[str, dict[str, float]] = {}
    for run in runs:
        for api, cell in run.items():
            t = total.setdefault(api, {"requests": 0.0, "bytes": 0.0})
            t["requests"] += cell["requests"]
            t["bytes"] += cell["bytes"]
    n = max(len(runs), 1)
    return {api: {k: round(v / n, 3) for k, v in cell.items()} for api, cell in sorted(total.items())}


def _wrote(run: dict, shape: str) -> bool:
    return any(api.startswith("s3 PutObject") and api.endswith(shape) for api in run)


class RunRecorder:
    """Snapshots the sealer's and the witness's requests after each scheduled run."""

    def __init__(self, meter: Meter, system: LocalSystem):
        self.meter = meter
        self.runs: list[dict] = []
        self._last = meter.counts()
        self._lock = threading.Lock()
        inner = system.scheduler.after_run
        system.scheduler.after_run = lambda: (inner and inner(), self.snapshot())

    def snapshot(self) -> None:
        with self._lock:
            now = self.meter.counts()
            delta = _diff(now, self._last)
            self._last = now
            self.runs.append({p: delta.get(p, {}) for p in RUN_PROGRAMS})

    def take(self) -> list[dict]:
        with self._lock:
            runs, self.runs = self.runs, []
            self._last = self.meter.counts()
        return runs


def _send_one_by_one(sqs, url: str, bodies: list[str], gap: float) -> None:
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)
        time.sleep(gap)


def _send_batches(sqs, url: str, bodies: list[str]) -> None:
    for k in range(0, len(bodies), 10):
        entries = [{"Id": str(j), "MessageBody": b} for j, b in enumerate(bodies[k:k + 10])]
        if sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed"):
            raise RuntimeError("send failed")


def _settle(system: LocalSystem, timeout: float = 600) -> None:
    """Until the queue drained, the stream was archived and the last period is sealed."""
    if not system.wait_drained(timeout):
        raise RuntimeError(f"queue not drained: {system.depth()}")
    if not system.wait_archived(timeout):
        raise RuntimeError("the archiver did not catch up with the stream")
    if not system.wait_ocsf_written(timeout):
        raise RuntimeError("the OCSF writer did not catch up with the stream")
    if not system.wait_sealed(time.time(), timeout):
        raise RuntimeError("the last period was not sealed")


def _per_event(counts: dict, idle: dict, idle_s: float, seconds: float, events: int) -> dict:
    """Requests (and bytes) per event: the phase's, less the idle phase's for as long, per event."""
    out: dict[str, dict] = {}
    for program, apis in counts.items():
        if program in ("stream-poller", "ocsf-stream-poller"):
            continue
        for api, cell in apis.items():
            if api.endswith(" empty"):
                continue
            base = idle.get(program, {}).get(api, {"requests": 0, "bytes": 0})
            scale = seconds / idle_s
            req = max(cell["requests"] - base["requests"] * scale, 0.0) / events
            byt = max(cell["bytes"] - base["bytes"] * scale, 0.0) / events
            if req > 0:
                out.setdefault(program, {})[api] = {"requests": round(req, 4), "bytes": round(byt, 1)}
    return out


def _activity(system: LocalSystem) -> dict:
    """Invocations so far (each function) and the bytes each function has logged (what Lambda
    sends to CloudWatch Logs, less its own START/END/REPORT lines)."""
    logs = {"receiver": "function.log", "archiver": "archiver.log", "sealer": "sealer.log",
            "ocsf-writer": "ocsf-writer.log"}
    return {"invocations": {"receiver": sum(t.stats.invocations for t in system.triggers),
                            "archiver": system.streams.stats.invocations,
                            "sealer": system.scheduler.stats.runs,
                            "ocsf-writer": system.ocsf_streams.stats.invocations},
            "records_invoked": {"archiver": system.streams.stats.records_invoked,
                                "ocsf-writer": system.ocsf_streams.stats.records_invoked},
            "log_bytes": {k: (system.work_dir / f).stat().st_size if (system.work_dir / f).exists() else 0
                          for k, f in logs.items()}}


def _since(now: dict, before: dict) -> dict:
    return {k: {p: now[k][p] - before[k][p] for p in now[k]} for k in now}


def logs_summary(work: Path) -> dict:
    """From the functions' EMF documents (what CloudWatch turns into metrics): the mean duration
    of an invocation of each function (DurationMs, on this machine), and the custom metrics each
    publishes (a metric name with its dimensions' values)."""
    durations: dict[str, list[float]] = {}
    metrics: dict[str, set] = {}
    for fn, name in (("receiver", "function.log"), ("archiver", "archiver.log"), ("sealer", "sealer.log")):
        path = work / name
        for line in path.read_text(errors="replace").splitlines() if path.exists() else []:
            if '"_aws"' not in line:
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if fn == "sealer" and "DigestsSealed" not in doc:
                continue  # the warm-up's empty invocation, not a sealing run
            for directive in doc["_aws"].get("CloudWatchMetrics", []):
                for dims in directive.get("Dimensions", [[]]):
                    key = tuple((d, str(doc.get(d))) for d in dims)
                    for m in directive.get("Metrics", []):
                        metrics.setdefault(fn, set()).add((directive.get("Namespace"), m["Name"], key))
            # An invocation that did nothing (BatchSize 0 is the warm-up's) is not timed.
            if "DurationMs" in doc and (fn == "sealer" or doc.get("BatchSize")):
                durations.setdefault(fn, []).append(float(doc["DurationMs"]))
    every = set().union(*metrics.values()) if metrics else set()
    # The OCSF writer logs its handler's time with each batch it is given (no EMF of its own).
    writer = work / "ocsf-writer.log"
    for line in writer.read_text(errors="replace").splitlines() if writer.exists() else []:
        found = re.search(r'duration_ms[=":]+\s*([0-9.]+)', line)
        records = re.search(r'records[=":]+\s*([0-9]+)', line)
        if found and records and int(records.group(1)) > 0:
            durations.setdefault("ocsf-writer", []).append(float(found.group(1)))
    return {"durations_ms": {fn: round(max(sum(v) / len(v), 1.0), 1) for fn, v in durations.items()},
            "emf_metrics": {"all": len(every), "sealer": len(metrics.get("sealer", ()))}}


def _verify(system: LocalSystem, meter: Meter, began: str, events: int) -> dict:
    """One `auditctl verify` of the whole run (the archive, then the table), counted as the
    program "auditctl"."""
    stack = system.stack_env()
    env = procs.function_env({}, meter.endpoint("auditctl", system.endpoint), {
        "TABLE_NAME": system.stack.table_name, "ACCESS_QUEUE_URL": system.access_queue_url,
        **{k: stack[k] for k in ("ARCHIVE_BUCKET", "DIGEST_KEY_ID", "DIGEST_PERIOD_SECONDS", "WITNESS_KEY")
           if stack.get(k)}})
    args = ["verify", "--from", began, "--to", datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "--table"]
    print("auditctl " + " ".join(args), flush=True)
    done = subprocess.run([str(local_witness.build_auditctl()), *args], env=env, capture_output=True, text=True,
                          timeout=600)
    return {"command": "auditctl verify --from <the run's start> --to <its end> --table", "events": events,
            "exit": done.returncode, "stdout_tail": done.stdout.strip()[-600:],
            "stderr_tail": done.stderr.strip()[-600:], "counts": meter.counts(reset=True).get("auditctl", {})}


def measure(work: Path, out: Path) -> dict:
    # The functions' logs are appended to: a run reads only its own (an earlier run's EMF
    # documents would add their metrics and durations to this one's).
    work.mkdir(parents=True, exist_ok=True)
    for old in work.glob("*.log"):
        old.unlink()
    meter = Meter()
    producer_sqs = None
    with LocalSystem(work, archiver=True, meter=meter, archive_batching_window=LOCAL_ARCHIVE_WINDOW,
                     pollers=2, ocsf_writer=True) as system:
        recorder = RunRecorder(meter, system)
        producer_sqs = _client("sqs", meter.endpoint("producer", system.endpoint))
        # Events happen as they are sent: auditTimes within the last minute, not spread over a
        # month (a month would give the OCSF copy an object per day partition of every batch).
        made = Producer(system, seed=11, poison_share=0.0, retry_share=0.0, run_id="cost",
                        audit_times=(datetime.now(timezone.utc) - timedelta(seconds=60), 60))

        def bodies(n: int) -> list[str]:
            return [body for body, _ in made.make(n)]

        began = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        # Warm-up: the functions' first requests (credentials, the key's public part) dropped.
        _send_batches(producer_sqs, system.queue_url, bodies(5))
        _settle(system)
        meter.counts(reset=True)
        recorder.take()
        result: dict = {}
        mark = _activity(system)

        period = system.digest_period
        print(f"idle: {IDLE_PERIODS} periods of {period} s", flush=True)
        started = time.monotonic()
        time.sleep(IDLE_PERIODS * period)
        idle_s = time.monotonic() - started
        idle_counts = meter.counts(reset=True)
        runs = recorder.take()
        activity = _since(_activity(system), mark)
        sealing = [r["sealer"] for r in runs if _wrote(r["sealer"], "digest/")]
        idle_runs = [r["sealer"] for r in runs if not _wrote(r["sealer"], "digest/")]
        witnessing = [r["witness"] for r in runs if _wrote(r["witness"], "")]
        quiet = [r["witness"] for r in runs if not _wrote(r["witness"], "")]
        result["idle"] = {"seconds": round(idle_s, 1), "periods": IDLE_PERIODS, "runs": len(runs), **activity,
                          "counts": idle_counts,
                          "sealer": {"sealing_runs": len(sealing), "per_sealing_run": _mean(sealing),
                                     "idle_runs": len(idle_runs), "per_idle_run": _mean(idle_runs)},
                          "witness": {"cosigning_runs": len(witnessing), "per_cosigning_run": _mean(witnessing),
                                      "quiet_runs": len(quiet), "per_quiet_run": _mean(quiet)}}

        phases = (("trickle", TRICKLE_EVENTS, lambda b: _send_one_by_one(producer_sqs, system.queue_url, b,
                                                                         TRICKLE_GAP)),
                  ("batch", BATCH_EVENTS, lambda b: _send_batches(producer_sqs, system.queue_url, b)))
        for name, n, send in phases:
            print(f"{name}: {n} events", flush=True)
            items = bodies(n)
            objects_before = len(system.archive_objects())
            started = time.monotonic()
            mark = _activity(system)
            send(items)
            _settle(system)
            seconds = time.monotonic() - started
            counts = meter.counts(reset=True)
            recorder.take()
            activity = _since(_activity(system), mark)
            objects = len(system.archive_objects()) - objects_before
            result[name] = {"events": n, "seconds": round(seconds, 1), "archive_objects": objects,
                            "events_per_object": round(n / max(objects, 1), 1), "counts": counts, **activity,
                            "per_event": _per_event(counts, idle_counts, idle_s, seconds, n)}
            meter.counts(reset=True)
            recorder.take()
        result["auditctl"] = _verify(system, meter, began, 5 + TRICKLE_EVENTS + BATCH_EVENTS)

    # The commit measured, `-dirty` when the working tree had changes (what ran was not it).
    commit = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7"], capture_output=True,
                            text=True, cwd=ROOT_DIR).stdout.strip()
    doc = {"command": "make cost-measure", "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
           "commit": commit,
           "local": {"digest_period_s": period, "seal_interval_s": system.stack.schedule.interval_s
                     if system.stack.schedule else None, "archive_batching_window_s": LOCAL_ARCHIVE_WINDOW,
                     "trickle_gap_s": TRICKLE_GAP},
           **result, **logs_summary(work)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT_DIR / "bench" / "cost" / "counts.json")
    ap.add_argument("--work", type=Path, default=ROOT_DIR / ".local" / "cost")
    a = ap.parse_args(argv)
    doc = measure(a.work, a.out)
    print(json.dumps({k: doc[k] for k in ("date", "commit")}), f"-> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
