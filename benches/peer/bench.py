"""Drives the peer handler in-process with an events file and prints its figures as JSON.

usage: bench.py latency|cpu|rss ENDPOINT EVENT_FILE REPEAT
"""
import json
import os
import resource
import sys
import time

os.environ["AWS_ENDPOINT_URL"] = sys.argv[2]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import handler  # noqa: E402  (the endpoint must be set before the client is built)


def main():
    scenario, _, event_file, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with open(event_file) as f:
        event = json.load(f)
    handler.handler({"Records": event["Records"][:1]}, None)  # warm: connection, imports
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
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))


main()
