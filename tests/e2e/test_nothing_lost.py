"""The central promise, end to end and under faults: every message ends either in the table
exactly once or in the dead-letter queue.

The real function runs under `cargo lambda watch` and reaches DynamoDB through the fault proxy
(HTTP 500, throttling, latency spikes, connections dropped before the store and after it wrote);
the local trigger feeds it from the queue created from template.yaml, and the function
dead-letters failures itself (DEAD_LETTER_QUEUE_URL from the template). The producer sends valid
messages, poison (producer ids without auditTime among it, re-sent), and producer retries (same
producer messageId, a new SQS message). After the queue drains, a second phase sends conflicting
payloads for stored ids, and a third throttles every write until records reach their last
receive and are dead-lettered, then redrives them.

The archive too: the table's stream reaches the real archiver (its own `cargo lambda watch`)
through the local stream trigger, and at the end every item of the table is in the archive's
trail/ objects exactly once, as stored, and no archive object was written twice.
"""

import json
import os
import time
from collections import Counter

from conftest import env_float, env_int
from local.faultproxy import FAULTS, FaultConfig
from local.harness import (LocalSystem, Producer, batch_totals, emf_documents, failure_reasons, verify,
                           verify_archive)

TRANSIENT = {"throttled", "store_unavailable", "deadline", "table_not_found", "group_stopped"}

# Visibility timeout scaled down from the template's (180 s) so that a failed record returns,
# and poison reaches the dead-letter queue (maxReceiveCount receives), within seconds. It stays
# well above the slowest invocation (latency spikes and retries included), as Lambda's guidance
# asks, so that a valid message is not received again while it is being written.
VISIBILITY_TIMEOUT = env_int("E2E_VISIBILITY_TIMEOUT", 4)
MAX_DEPTH = 300
# The archiver's batching window, scaled down from the template's minute.
ARCHIVE_BATCHING_WINDOW = 1


def fault_config(scale: float, seed: int) -> FaultConfig:
    return FaultConfig(error500=0.03 * scale, throttle=0.03 * scale, latency=0.02 * scale,
                       drop_before=0.02 * scale, drop_after=0.02 * scale, latency_s=(0.2, 1.5), seed=seed)


def test_nothing_lost_nothing_doubled_under_faults(work_dir):
    messages = env_int("E2E_MESSAGES", 1000)
    scale = env_float("E2E_FAULT_SCALE", 1.0)
    seed = env_int("E2E_SEED", 7)
    drain_timeout = env_float("E2E_DRAIN_TIMEOUT", 600)
    started = time.monotonic()
    faults = fault_config(scale, seed)
    pollers = env_int("E2E_POLLERS", 4)
    with LocalSystem(work_dir, visibility_timeout=VISIBILITY_TIMEOUT, faults=faults, pollers=pollers,
                     archiver=True, archive_batching_window=ARCHIVE_BATCHING_WINDOW) as system:
        ready = time.monotonic()
        producer = Producer(system, seed=seed, poison_share=0.05, retry_share=0.1)
        last = [0.0]

        def progress(done):
            if time.monotonic() - last[0] > 30:
                last[0] = time.monotonic()
                print(f"  sent {done}/{messages}  trigger={system.trigger.stats.as_dict()}", flush=True)

        # A steady producer, at most MAX_DEPTH messages waiting (moto's SQS costs grow with the
        # queue's length; the function's work does not).
        producer.produce(messages, max_depth=MAX_DEPTH, progress=progress)
        assert system.wait_drained(drain_timeout), f"queue not drained: {system.depth()}"
        # Phase 2: conflicting payloads for stored producer ids must fail and be dead-lettered.
        producer.send_conflicts(producer.ledger.valid, 5)
        assert system.wait_drained(120), f"queue not drained: {system.depth()}"
        # Phase 3: the table throttles every write. Records come back until their last receive,
        # when the function dead-letters them (reason throttled); once the table is back, a
        # redrive (what `auditctl dlq redrive --reason throttled` does) writes each exactly once,
        # keyed by the identity its failureContext carries.
        saved = system.proxy.config
        system.proxy.config = FaultConfig(throttle=1.0, seed=seed)
        transient = Producer(system, seed=seed + 1, poison_share=0.0, retry_share=0.0, run_id=f"t{seed}")
        transient.send(transient.make(20))
        assert system.wait_drained(300), f"queue not drained: {system.depth()}"
        throttled = [m for m in system.peek_dlq() if m["reason"] == "throttled"]
        system.proxy.config = saved
        # Any transient failure that reached its last receive in phase 1 goes back too.
        redriven = system.redrive(reasons=TRANSIENT)
        assert system.wait_drained(300), f"queue not drained: {system.depth()}"
        ledger = producer.ledger
        ledger.valid += transient.ledger.valid
        ledger.sent += transient.ledger.sent
        drained = time.monotonic()

        verdict = verify(system, ledger)
        archived = system.wait_archived(drain_timeout)
        archive = verify_archive(system)
        log = system.work_dir / "function.log"
        reasons = failure_reasons(log)
        totals = batch_totals(log)
        proxy = system.proxy.stats.as_dict()
        receives = system.trigger.stats.receives
        result = {
            "pollers": pollers, "visibility_timeout_s": VISIBILITY_TIMEOUT, "fault_scale": scale,
            "messages_sent": ledger.sent, "logical_messages": messages, "producer_retries": ledger.producer_retries,
            "poison": len(ledger.poison), "conflicts": len(ledger.conflicts),
            "faults_injected": proxy["faults"], "faults_total": proxy["faults_total"],
            "put_item_requests": proxy["targeted"],
            "trigger": {k: v for k, v in system.trigger.stats.as_dict().items() if k != "receives"},
            "function_totals": dict(totals),
            "throttled_dead_lettered": len(throttled), "redriven": redriven,
            "receives_per_poison": dict(sorted(Counter(receives[sid] for sid in ledger.poison).items())),
            "verdict": verdict.summary(),
            "lost": len(verdict.lost), "duplicated": len(verdict.duplicated),
            "archive": archive.summary(), "stream_trigger": system.streams.stats.as_dict(),
            "startup_s": round(ready - started, 1), "run_s": round(drained - ready, 1),
        }
        (work_dir / "result.json").write_text(json.dumps(result, indent=2))
        print("\nRESULT " + json.dumps(result))

        assert verdict.ok, json.dumps({"summary": verdict.summary(), "lost": verdict.lost[:10],
                                       "duplicated": verdict.duplicated[:10], "wrong": verdict.wrong_payload[:10],
                                       "unexpected": verdict.unexpected_items[:10],
                                       "poison_not_in_dlq": verdict.poison_not_in_dlq[:10],
                                       "valid_in_dlq": verdict.valid_in_dlq[:10]}, indent=1)
        assert verdict.items_in_table == verdict.valid_expected
        # Every kind of fault was injected, and the retries absorbed them.
        for kind in FAULTS:
            assert proxy["faults"].get(kind, 0) > 0, f"no {kind} fault was injected: {proxy}"
        # Every poison message is in the dead-letter queue once, with its reason in its own
        # attributes (verify: wrong_reason, doubled_in_dlq), and was received once, not
        # maxReceiveCount times: the function dead-letters it at the first receive.
        assert all(receives[sid] == 1 for sid in ledger.poison), result["receives_per_poison"]
        for sqs_id in list(ledger.poison) + list(ledger.conflicts):
            want = ledger.expected_reason(sqs_id)
            assert want in reasons.get(sqs_id, []), f"{sqs_id}: expected reason {want}, logged {reasons.get(sqs_id)}"
        # Every write throttled to its last receive was dead-lettered with its reason, then
        # written once by the redrive (verify: lost, duplicated).
        assert len(throttled) == len(transient.ledger.valid), (len(throttled), len(transient.ledger.valid))
        assert all(m["context"]["receiveCount"] == system.stack.source_queue.max_receive_count for m in throttled)
        # Producer retries were absorbed as duplicates, and so were lost answers (drop_after).
        assert totals["duplicates"] >= 1
        # The function's EMF metrics agree with its summary lines.
        docs = emf_documents(log)
        assert sum(int(d.get("Written", 0)) for d in docs) == totals["written"]
        assert sum(int(d.get("DeadLettered", 0)) for d in docs) == totals["dead_lettered"]
        # Every item of the table is in the archive exactly once, as stored; nothing was given up.
        assert archived, f"the archiver did not catch up: {system.streams.stats.as_dict()}"
        assert archive.ok, json.dumps({"summary": archive.summary(), "missing": archive.missing[:10],
                                       "doubled": archive.doubled[:10], "changed": archive.changed[:10],
                                       "unexpected": archive.unexpected[:10],
                                       "overwritten": archive.overwritten[:10]}, indent=1)
        assert archive.items_in_table == archive.events_in_archive == verdict.items_in_table
        assert system.streams.stats.given_up_records == 0
        archiver_docs = emf_documents(system.work_dir / "archiver.log")
        assert sum(int(d.get("TrailModified", 0)) for d in archiver_docs) == 0, "the writer only inserts"
