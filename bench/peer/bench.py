"""Drives the peer handler in-process with an events file and prints its figures as JSON.

usage: bench.py latency|cpu|rss|sustained ENDPOINT EVENT_FILE REPEAT

latency|cpu|rss: one warm call (first record), then REPEAT calls with the whole event; prints the
median wall and process CPU of one call and the peak RSS. sustained: REPEAT is a number of seconds
S; calls with the whole event back to back until S seconds have passed (at least 3 calls); prints
totals, throughput and the median call. An https ENDPOINT is verified against AWS_CA_BUNDLE if set.
"""
import json
import os
import sys
import time

os.environ["AWS_ENDPOINT_URL"] = sys.argv[2]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import handler  # noqa: E402  (the endpoint must be set before the client is built)


def max_rss_mb():
    """This process's peak RSS (VmHWM), in MB. Not getrusage's ru_maxrss: across fork and exec
    Linux carries the parent's RSS at the fork into it, so a peer started by a large benchmark
    process would report the benchmark's size."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def call(event):
    response = handler.handler(event, None)
    if response["batchItemFailures"]:
        sys.exit(f"{len(response['batchItemFailures'])} records failed")


def sustained(event, seconds):
    """Whole batches back to back for `seconds` of wall time (at least 3), with totals."""
    walls = []
    started, started_cpu = time.perf_counter(), time.process_time()
    ended = started
    while len(walls) < 3 or ended - started < seconds:
        wall = time.perf_counter()
        call(event)
        ended = time.perf_counter()
        walls.append(ended - wall)
    cpu = time.process_time() - started_cpu
    walls.sort()
    records = len(event["Records"])
    return {
        "scenario": "sustained",
        "records": records,
        "batches": len(walls),
        "seconds": ended - started,
        "records_per_second": records * len(walls) / (ended - started),
        "cpu_seconds": cpu,
        "batch_seconds_median": walls[len(walls) // 2],
        "max_rss_mb": max_rss_mb(),
    }


def main():
    scenario, _, event_file = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(event_file) as f:
        event = json.load(f)
    handler.handler({"Records": event["Records"][:1]}, None)  # warm: connection, imports
    if scenario == "sustained":
        print(json.dumps(sustained(event, float(sys.argv[4]))))
        return
    repeat = int(sys.argv[4])
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        response = handler.handler(event, None)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        if response["batchItemFailures"]:
            sys.exit(f"{len(response['batchItemFailures'])} records failed")
    walls.sort()
    cpus.sort()
    print(json.dumps({
        "scenario": scenario,
        "records": len(event["Records"]),
        "seconds": walls[len(walls) // 2],
        "cpu_seconds": cpus[len(cpus) // 2],
        "max_rss_mb": max_rss_mb(),
    }))


main()
