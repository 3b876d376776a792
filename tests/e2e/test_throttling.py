"""A fully throttled table: how many requests one batch of 100 sends. Each record may be retried
up to 5 attempts, but all records draw their retries from one budget per invocation (as the
AWS SDK's retry quota does), so the table gets 100 first attempts and 100 / 5 retries, not
100 x 5 requests; what is left is reported for SQS to deliver again."""

import json
import time

from local.faultproxy import FaultConfig
from local.harness import LocalSystem, Producer

RECORDS = 100
# src/batch.rs: RetryPolicy::default().retry_budget / RETRY_COST.
BUDGETED_RETRIES = 100 // 5


def wait_for(condition, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_fully_throttled_batch_of_100_sends_a_bounded_number_of_requests(work_dir):
    # One invocation of 100 records: BatchSize 100 gathered within a 5 s window, and a
    # visibility timeout long enough that nothing comes back while we count.
    with LocalSystem(work_dir, parameters={"BatchSize": str(RECORDS), "BatchingWindow": "5"},
                     visibility_timeout=120, faults=FaultConfig(throttle=1.0, seed=5), pollers=1) as system:
        producer = Producer(system, seed=11, poison_share=0.0, retry_share=0.0, run_id="throttled")
        producer.send(producer.make(RECORDS))
        stats = system.trigger.stats
        wait_for(lambda: stats.item_failures + stats.records_deleted + stats.records_in_failed_batches >= RECORDS,
                 120, "the first invocation's answer")
        requests = system.proxy.stats.targeted
        result = {"records": stats.records_invoked, "invocations": stats.invocations,
                  "put_item_requests": requests, "reported_failed": stats.item_failures,
                  "without_a_shared_budget": RECORDS * 5}
        (work_dir / "result.json").write_text(json.dumps(result, indent=2))
        print("\nRESULT " + json.dumps(result))
        assert stats.invocations == 1 and stats.records_invoked == RECORDS, result
        assert requests == RECORDS + BUDGETED_RETRIES, result
        assert stats.item_failures == RECORDS, "every record is reported for SQS to deliver again"
