"""The function process is killed (SIGKILL, as a crash or an out-of-memory kill would) in the
middle of a batch, several times, and started again: still nothing lost, nothing doubled in the
table.

Each kill is timed from inside a batch: the fault proxy holds one PutItem of the batch while the
function is killed, then lets it reach the store (a write whose answer nobody receives). The
trigger sees the invocation fail; the whole batch returns after the visibility timeout, and the
records already written come back as duplicates.
"""

import json
import queue
import threading
import time

from conftest import env_int
from local.faultproxy import FaultConfig
from local.harness import LocalSystem, Producer, verify

MESSAGES = 400
KILLS = 3
# Scaled down from the template's 180 s so that the killed batches return within seconds. The
# template's maxReceiveCount (5) is raised through its own parameter: every kill, and every
# receive while the function is down, counts a receive, which must not send valid messages to
# the dead-letter queue.
VISIBILITY_TIMEOUT = 4
PARAMETERS = {"MaxReceiveCount": "10"}


def test_function_killed_mid_batch_and_restarted(work_dir):
    seed = env_int("E2E_SEED", 7)
    faults = FaultConfig(seed=seed)  # no random faults: only the crashes
    with LocalSystem(work_dir, parameters=PARAMETERS, visibility_timeout=VISIBILITY_TIMEOUT,
                     faults=faults) as system:
        kill_at = [int(MESSAGES * (k + 1) / (KILLS + 1)) for k in range(KILLS)]
        puts = [0]
        lock = threading.Lock()
        crashes: queue.Queue[threading.Event] = queue.Queue()
        kills: list[dict] = []

        def on_put(_target):
            with lock:
                puts[0] += 1
                hit = puts[0] in kill_at
            if hit:
                # Hold this write until the function is dead, then let it reach the store.
                killed = threading.Event()
                crashes.put(killed)
                killed.wait(timeout=120)

        def killer():
            while len(kills) < KILLS:
                try:
                    killed = crashes.get(timeout=1)
                except queue.Empty:
                    if stop.is_set():
                        return
                    continue
                in_flight = system.trigger.in_flight
                t0 = time.monotonic()
                system.function.kill()
                killed.set()
                system.function.start(ready_timeout=300)
                kills.append({"in_flight_invocations": in_flight, "restart_s": round(time.monotonic() - t0, 1)})

        stop = threading.Event()
        system.proxy.on_request = on_put
        k = threading.Thread(target=killer, daemon=True)
        k.start()
        producer = Producer(system, seed=seed, poison_share=0.03, retry_share=0.1, run_id="crash")
        producer.produce(MESSAGES, max_depth=300)
        deadline = time.monotonic() + 300
        while len(kills) < KILLS and time.monotonic() < deadline:
            time.sleep(0.5)
        assert system.wait_drained(300), f"queue not drained: {system.depth()}"
        stop.set()
        k.join(timeout=10)

        verdict = verify(system, producer.ledger)
        result = {"kills": kills, "trigger": system.trigger.stats.as_dict(), "verdict": verdict.summary()}
        (work_dir / "result.json").write_text(json.dumps(result, indent=2))
        print("\nRESULT " + json.dumps(result))
        assert len(kills) == KILLS, f"only {len(kills)} kills happened: {kills}"
        assert all(k["in_flight_invocations"] >= 1 for k in kills), kills
        assert system.trigger.stats.batch_failures.get("invocation_error", 0) >= KILLS
        # A poison record dead-lettered in a batch whose answer the crash lost comes back and is
        # dead-lettered again: across a crash the dead-letter queue is at-least-once (a standard
        # queue has no deduplication). Each copy carries the same original identity, so a redrive
        # of both still leaves one item; the table itself is exactly once.
        failing = set(producer.ledger.poison) | set(producer.ledger.conflicts)
        assert set(verdict.doubled_in_dlq) <= failing, verdict.doubled_in_dlq
        verdict.doubled_in_dlq = []
        assert verdict.ok, json.dumps(verdict.summary())
        assert verdict.items_in_table == verdict.valid_expected
