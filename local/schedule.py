"""A local EventBridge schedule that behaves like a function's Schedule event in template.yaml
(audit-archiver's SealDigests, which seals the digests), next to local/trigger.py's SQS and
local/streams.py's stream triggers.

* fires every ``interval_s`` seconds: the template's ``rate(...)`` (local/stack.py reads it), or
  the local stack's scaled-down interval (recorded in ``Stack.scaled`` like the other scaled
  values); the first run at once, as a new rule's first event comes soon after it is created;
* sends the event exactly as EventBridge sends a scheduled rule's: ``version`` "0", a new
  ``id``, ``detail-type`` "Scheduled Event", ``source`` "aws.events", ``account``, ``time`` (the
  scheduled time, UTC, whole seconds), ``region``, ``resources`` [the rule's ARN] and an empty
  ``detail``;
* invokes the function (its own ``cargo lambda watch``) and logs each run and its answer, one
  JSON line each, to ``log_path``;
* then calls ``after_run`` when set: the local stack's witness (local/witness.py), which checks
  and cosigns the checkpoints that run sealed, as a witness's own schedule would.

Where AWS has more than this: EventBridge invokes asynchronously, and Lambda retries a failed
asynchronous run twice (about 1 and 2 minutes later). Here a run is a synchronous invocation, one
at a time, and a failed run is not retried: the next tick is the retry, which is also what makes
up for a failed run in AWS. A tick that comes while a run is still going is skipped and counted
(``late``), where EventBridge would start a second run beside the first.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

from local import procs
from local.cfn import ACCOUNT_ID, REGION


def scheduled_event(when: float, rule_arn: str, account: str = ACCOUNT_ID, region: str = REGION) -> dict:
    """The event EventBridge sends for a scheduled rule's run at ``when`` (epoch seconds)."""
    at = datetime.fromtimestamp(int(when), timezone.utc)
    return {"version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event", "source": "aws.events",
            "account": account, "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "region": region,
            "resources": [rule_arn], "detail": {}}


@dataclass
class ScheduleStats:
    runs: int = 0
    errors: int = 0          # function errors, HTTP errors, time-outs
    late: int = 0            # ticks skipped because the run before was still going
    last_answer: object = None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class Scheduler:
    def __init__(self, function_url: str, interval_s: float, rule_arn: str, *, account: str = ACCOUNT_ID,
                 region: str = REGION, invoke_timeout_s: float = 60.0, log_path: str | None = None):
        if interval_s <= 0:
            raise ValueError("the interval must be positive")
        self.function_url = function_url
        self.interval = float(interval_s)
        self.rule_arn = rule_arn
        self.account = account
        self.region = region
        self.invoke_timeout = invoke_timeout_s
        self.stats = ScheduleStats()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._log = open(log_path, "a", encoding="utf-8") if log_path else None
        self.on_answer = None  # test hook: called with (event, answer or exception) after each run
        self.after_run = None  # called with no argument after each run (the local witness)

    def start(self) -> "Scheduler":
        self._thread = threading.Thread(target=self._loop, name="schedule", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=self.invoke_timeout + 10)
        with self._lock:
            if self._log:
                self._log.close()
                self._log = None

    def _loop(self) -> None:
        tick = time.time()
        while not self._stop.is_set():
            self.run(tick)
            tick += self.interval
            now = time.time()
            if now > tick:  # the run outlasted one or more ticks: skip them, as noted above
                missed = int((now - tick) // self.interval) + 1
                with self._lock:
                    self.stats.late += missed
                tick += missed * self.interval
            self._stop.wait(max(0.0, tick - time.time()))

    def run(self, when: float | None = None) -> object:
        """One run (the scheduled time ``when``, now if not given): invoke, log, return the answer
        (or the error)."""
        event = scheduled_event(time.time() if when is None else when, self.rule_arn, self.account, self.region)
        started = time.monotonic()
        try:
            answer: object = procs.invoke(self.function_url, event, timeout=self.invoke_timeout)
            entry = {"event": "invoked", "time": event["time"], "answer": answer}
        except procs.InvokeError as e:
            answer = e
            entry = {"event": "function_error", "time": event["time"], "error": str(e)[:500]}
        entry["ms"] = int((time.monotonic() - started) * 1000)
        with self._lock:
            self.stats.runs += 1
            if isinstance(answer, Exception):
                self.stats.errors += 1
            else:
                self.stats.last_answer = answer
        self._note(entry)
        if self.on_answer:
            self.on_answer(event, answer)
        if self.after_run:
            try:
                self.after_run()
            except Exception as e:  # noqa: BLE001 - logged; the schedule goes on
                self._note({"event": "after_run_error", "error": str(e)[:500]})
        return answer

    def _note(self, entry: dict) -> None:
        with self._lock:
            if self._log:
                entry["t"] = round(time.time(), 3)
                self._log.write(json.dumps(entry, default=str) + "\n")
                self._log.flush()


def from_stack(stack, function_url: str, **overrides) -> Scheduler | None:
    """The scheduler of the archiver's Schedule event (local/stack.py's Stack), or None when the
    template has none or it is disabled."""
    ev = stack.schedule
    if ev is None or not ev.enabled:
        return None
    kwargs = dict(invoke_timeout_s=stack.archiver.timeout_s + 5)
    kwargs.update(overrides)
    return Scheduler(function_url, ev.interval_s, ev.rule_arn, **kwargs)
