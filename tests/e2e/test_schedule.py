"""The local schedule does what the template's Schedule event (an EventBridge rule) does: it
invokes the archiver with EventBridge's Scheduled Event at the template's rate (scaled down for
the local stack), run after run, whatever the function answers. Driven with test_trigger.py's
stand-in function, so that every answer can be produced on purpose."""

import json
import re
import time

from local.schedule import Scheduler, from_stack, scheduled_event
from local.stack import DEFAULT_TEMPLATE, read_stack
from test_trigger import StandIn, wait_until

RULE = "arn:aws:events:us-east-1:123456789012:rule/audit-receiver-local-AuditArchiverFunctionSealDigests"


def test_the_event_is_eventbridges_scheduled_event():
    event = scheduled_event(1_795_341_900.7, RULE)
    assert set(event) == {"version", "id", "detail-type", "source", "account", "time", "region", "resources",
                          "detail"}
    assert {k: v for k, v in event.items() if k != "id"} == {
        "version": "0", "detail-type": "Scheduled Event", "source": "aws.events", "account": "123456789012",
        "time": "2026-11-22T10:05:00Z", "region": "us-east-1", "resources": [RULE], "detail": {}}
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", event["id"])
    assert scheduled_event(1_795_341_900, RULE)["id"] != event["id"]


def test_the_template_schedule_runs_at_the_scaled_rate_and_logs_each_answer(work_dir):
    stack = read_stack(DEFAULT_TEMPLATE, schedule_interval=0.5)
    fn = StandIn(lambda ev: (200, {"sealed": [], "lagSeconds": 3}))
    scheduler = from_stack(stack, fn.url, log_path=str(work_dir / "schedule.log"))
    try:
        started = time.time()
        scheduler.start()
        wait_until(lambda: len(fn.events) >= 4, 30, "four runs")
    finally:
        scheduler.stop()
        fn.close()
    times = [ev["time"] for ev in fn.events]
    assert all(ev["resources"] == [stack.schedule.rule_arn] and ev["detail-type"] == "Scheduled Event"
               for ev in fn.events)
    assert len({ev["id"] for ev in fn.events}) == len(fn.events)  # each run its own event
    assert times == sorted(times)
    # The first run at once; then one every interval (4 runs need at least 1.5 s).
    assert time.time() - started >= 1.5
    log = [json.loads(line) for line in (work_dir / "schedule.log").read_text().splitlines()]
    assert [e["event"] for e in log] == ["invoked"] * len(log) and len(log) >= 4
    assert log[0]["answer"] == {"sealed": [], "lagSeconds": 3}
    assert scheduler.stats.runs == len(log) and scheduler.stats.errors == 0


def test_a_failed_run_is_logged_and_the_next_run_comes_all_the_same(work_dir):
    answers = [(500, {"errorMessage": "sealing failed"}), (200, {"sealed": ["digest/x"]})]
    fn = StandIn(lambda ev: answers[min(len(fn.events), len(answers)) - 1])
    scheduler = Scheduler(fn.url, 0.3, RULE, log_path=str(work_dir / "schedule.log"))
    try:
        scheduler.start()
        wait_until(lambda: len(fn.events) >= 2, 30, "a second run after the failed one")
    finally:
        scheduler.stop()
        fn.close()
    log = [json.loads(line) for line in (work_dir / "schedule.log").read_text().splitlines()]
    assert log[0]["event"] == "function_error" and "500" in log[0]["error"]
    assert log[1] == {**log[1], "event": "invoked", "answer": {"sealed": ["digest/x"]}}
    assert scheduler.stats.errors == 1


def test_a_run_longer_than_the_interval_skips_the_ticks_it_outlasted(work_dir):
    release, arrived = [], []

    def slow(ev):
        arrived.append(time.monotonic())
        if len(arrived) == 1:
            wait_until(lambda: release, 30, "the test to release the first run")
        return 200, {}

    fn = StandIn(slow)
    scheduler = Scheduler(fn.url, 0.2, RULE)
    try:
        scheduler.start()
        wait_until(lambda: len(arrived) == 1, 30, "the first run")
        time.sleep(1.1)  # the first run held across about five ticks (the stimulus, not the verdict)
        held = time.monotonic() - arrived[0]
        runs_while_held = len(arrived)
        release.append(True)
        wait_until(lambda: len(arrived) >= 2, 30, "the run after the long one")
    finally:
        scheduler.stop()
        fn.close()
    assert runs_while_held == 1  # one run at a time
    # The ticks it outlasted are counted and skipped, not run in a burst to catch up.
    assert scheduler.stats.late >= int(held / 0.2) - 1


def test_a_template_without_a_schedule_has_no_scheduler():
    from pathlib import Path

    sample = read_stack(Path(__file__).parent / "data" / "sample-template.yaml")
    assert sample.schedule is None and from_stack(sample, "http://127.0.0.1:1/") is None


def test_after_each_run_the_witness_runs_and_its_failure_stops_no_run(work_dir):
    """The local witness (local/witness.py) runs after each seal run: after the function answered,
    never beside it; a witness that fails is logged and the schedule goes on."""
    answered, after = [], []
    fn = StandIn(lambda ev: (answered.append(time.monotonic()), (200, {}))[1])
    scheduler = Scheduler(fn.url, 0.2, RULE, log_path=str(work_dir / "schedule.log"))

    def witness():
        after.append((time.monotonic(), len(answered)))
        if len(after) == 1:
            raise RuntimeError("auditctl witness is not there")

    scheduler.after_run = witness
    try:
        scheduler.start()
        wait_until(lambda: len(after) >= 3, 30, "three witness runs")
    finally:
        scheduler.stop()
        fn.close()
    # Each after its own run's answer.
    assert all(n >= i + 1 for i, (_, n) in enumerate(after)), after
    log = [json.loads(line) for line in (work_dir / "schedule.log").read_text().splitlines()]
    errors = [e for e in log if e["event"] == "after_run_error"]
    assert len(errors) == 1 and "not there" in errors[0]["error"]
    assert scheduler.stats.runs >= 3
