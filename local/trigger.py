"""A local SQS trigger that behaves like Lambda's SQS event source mapping.

Each poller (one per concurrent invocation allowed) does what the event source mapping does:

* long-polls the queue (ReceiveMessage with all system and message attributes, the queue's own
  visibility timeout; receiving is what counts ``ApproximateReceiveCount``, so redrive to the
  dead-letter queue happens in the queue exactly as in AWS);
* gathers up to ``BatchSize`` records, for at most ``MaximumBatchingWindowInSeconds`` after
  the first one (with a window of 0 it invokes with what one receive returned), and never more
  than Lambda's 6 MB synchronous payload;
* builds the event as Lambda does: ``Records[]`` with ``messageId``, ``receiptHandle``, ``body``,
  ``attributes`` (``ApproximateReceiveCount``, ``SentTimestamp``, ``SenderId``,
  ``ApproximateFirstReceiveTimestamp``; for FIFO also ``SequenceNumber``, ``MessageGroupId``,
  ``MessageDeduplicationId``), ``messageAttributes`` (``stringValue``/``binaryValue`` in
  base64, ``stringListValues``, ``binaryListValues``, ``dataType``), ``md5OfBody``,
  ``md5OfMessageAttributes`` when there are attributes, ``eventSource`` "aws:sqs",
  ``eventSourceARN`` and ``awsRegion``;
* invokes the function synchronously (``cargo lambda watch``'s invoke endpoint);
* with ``ReportBatchItemFailures``: deletes the records not listed in ``batchItemFailures`` and
  leaves the listed ones, which return after the visibility timeout. A missing/null/empty
  response or list means all succeeded. The whole batch fails (nothing deleted, every record
  returns after the visibility timeout) on an invocation error (function error, HTTP error,
  connection refused or reset, time-out), on a malformed response, and on an item identifier
  that is null, empty, not a string or not the id of a record of this batch;
* after a failed invocation it backs off before polling again, as Lambda scales pollers down.

The trigger never retries a record itself: the queue does (visibility timeout, receive count,
redrive policy).
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import random
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from local import procs

LAMBDA_SYSTEM_ATTRIBUTES = (
    "ApproximateReceiveCount", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp",
    "SequenceNumber", "MessageGroupId", "MessageDeduplicationId", "AWSTraceHeader",
    "DeadLetterQueueSourceArn",
)
MAX_PAYLOAD = 6 * 1024 * 1024  # Lambda's synchronous invocation payload limit


@dataclass
class TriggerStats:
    invocations: int = 0
    records_invoked: int = 0
    records_deleted: int = 0
    item_failures: int = 0           # records reported in batchItemFailures
    batch_failures: Counter = field(default_factory=Counter)  # whole batch failed, by cause
    records_in_failed_batches: int = 0
    delete_errors: int = 0
    max_batch: int = 0
    receives: Counter = field(default_factory=Counter)  # SQS message id -> times handed to the function

    def as_dict(self) -> dict:
        return {"invocations": self.invocations, "records_invoked": self.records_invoked,
                "records_deleted": self.records_deleted, "item_failures": self.item_failures,
                "batch_failures": dict(self.batch_failures),
                "records_in_failed_batches": self.records_in_failed_batches,
                "delete_errors": self.delete_errors, "max_batch": self.max_batch}


def lambda_record(msg: dict, queue_arn: str, region: str = "us-east-1") -> dict:
    """One SQS message as Lambda's event source mapping puts it in the event."""
    attrs = {k: v for k, v in (msg.get("Attributes") or {}).items() if k in LAMBDA_SYSTEM_ATTRIBUTES}
    mattrs = {}
    for name, a in (msg.get("MessageAttributes") or {}).items():
        v = {"stringListValues": [], "binaryListValues": [], "dataType": a.get("DataType", "String")}
        if "StringValue" in a:
            v["stringValue"] = a["StringValue"]
        if "BinaryValue" in a:
            v["binaryValue"] = base64.b64encode(a["BinaryValue"]).decode()
        mattrs[name] = v
    rec = {
        "messageId": msg["MessageId"],
        "receiptHandle": msg["ReceiptHandle"],
        "body": msg.get("Body", ""),
        "attributes": attrs,
        "messageAttributes": mattrs,
        "md5OfBody": msg.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if msg.get("MD5OfMessageAttributes"):
        rec["md5OfMessageAttributes"] = msg["MD5OfMessageAttributes"]
    return rec


class WholeBatchFailure(Exception):
    pass


def failed_ids(response: object, batch_ids: set[str], report_batch_item_failures: bool = True) -> set[str]:
    """The ids to leave in the queue, per Lambda's rules; raises WholeBatchFailure when Lambda
    would treat the answer as a failure of the whole batch."""
    if not report_batch_item_failures:
        return set()
    if response is None or response == {} or response == "":
        return set()
    if not isinstance(response, dict):
        raise WholeBatchFailure("malformed_response")
    items = response.get("batchItemFailures")
    if items is None:
        return set()
    if not isinstance(items, list):
        raise WholeBatchFailure("malformed_response")
    out = set()
    for it in items:
        ident = it.get("itemIdentifier") if isinstance(it, dict) else None
        if not isinstance(ident, str) or not ident:
            raise WholeBatchFailure("bad_item_identifier")
        if ident not in batch_ids:
            raise WholeBatchFailure("unknown_item_identifier")
        out.add(ident)
    return out


class Trigger:
    def __init__(self, endpoint: str, queue_url: str, queue_arn: str, function_url: str, *,
                 batch_size: int = 10, batching_window_s: float = 0.0, pollers: int = 1,
                 report_batch_item_failures: bool = True, invoke_timeout_s: float = 60.0,
                 poll_wait_s: int = 2, log_path: str | None = None):
        if not 1 <= batch_size <= 10000:
            raise ValueError("BatchSize must be 1..10000")
        if batch_size > 10 and batching_window_s < 1:
            raise ValueError("a BatchSize above 10 needs MaximumBatchingWindowInSeconds >= 1 (as in Lambda)")
        self.endpoint = endpoint
        self.queue_url = queue_url
        self.queue_arn = queue_arn
        self.function_url = function_url
        self.batch_size = batch_size
        self.window = batching_window_s
        self.pollers = pollers
        self.report = report_batch_item_failures
        self.invoke_timeout = invoke_timeout_s
        self.poll_wait = poll_wait_s
        self.stats = TriggerStats()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._in_flight = 0
        self._log = open(log_path, "a", encoding="utf-8") if log_path else None
        self.on_invoke = None  # test hook: called with the event before each invocation

    # lifecycle ------------------------------------------------------------------------------
    def start(self) -> "Trigger":
        for i in range(self.pollers):
            t = threading.Thread(target=self._poller, name=f"poller-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=self.invoke_timeout + self.poll_wait + 5)
        self._threads.clear()
        if self._log:
            self._log.close()
            self._log = None

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def __enter__(self) -> "Trigger":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # the poller -------------------------------------------------------------------------------
    def _poller(self) -> None:
        sqs = _sqs(self.endpoint)
        backoff = 0.0
        while not self._stop.is_set():
            try:
                t0 = time.monotonic()
                batch = self._gather(sqs)
                self._local_gather = threading.local() if not hasattr(self, "_local_gather") else self._local_gather
                self._local_gather.ms = int((time.monotonic() - t0) * 1000)
            except Exception as e:  # noqa: BLE001 - the endpoint may be going away
                self._note({"event": "receive_error", "error": str(e)})
                self._stop.wait(0.5)
                continue
            if not batch:
                continue
            ok = self._process(sqs, batch)
            if ok:
                backoff = 0.0
            else:
                backoff = min(max(backoff * 2, 0.25), 5.0)
                self._stop.wait(backoff * (0.5 + random.random() / 2))

    def _gather(self, sqs) -> list[dict]:
        batch: list[dict] = []
        size = 0
        first_at = None
        while not self._stop.is_set() and len(batch) < self.batch_size:
            if not batch:
                wait = self.poll_wait
            else:
                left = self.window - (time.monotonic() - first_at)
                if left <= 0:
                    break
                wait = int(left) if left >= 1 else 0
            resp = sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=min(10, self.batch_size - len(batch)),
                WaitTimeSeconds=wait, MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"])
            msgs = resp.get("Messages", [])
            for m in msgs:
                batch.append(m)
                size += len(m.get("Body", "").encode())
            if batch and first_at is None:
                first_at = time.monotonic()
            if batch and (self.window <= 0 or size >= MAX_PAYLOAD - 256 * 1024):
                break
            if batch and not msgs:
                left = self.window - (time.monotonic() - first_at)
                if left > 0 and wait == 0:
                    self._stop.wait(min(0.05, left))
        return batch

    def _process(self, sqs, batch: list[dict]) -> bool:
        records = [lambda_record(m, self.queue_arn) for m in batch]
        event = {"Records": records}
        ids = {r["messageId"] for r in records}
        with self._lock:
            self._in_flight += 1
            self.stats.invocations += 1
            self.stats.records_invoked += len(records)
            self.stats.max_batch = max(self.stats.max_batch, len(records))
            self.stats.receives.update(ids)
        started = time.monotonic()
        cause = None
        failed: set[str] = set()
        try:
            if self.on_invoke:
                self.on_invoke(event)
            response = procs.invoke(self.function_url, event, timeout=self.invoke_timeout)
            failed = failed_ids(response, ids, self.report)
        except procs.InvokeError as e:
            cause, detail = "invocation_error", str(e)
        except WholeBatchFailure as e:
            cause, detail = str(e), repr(response)[:300]
        finally:
            with self._lock:
                self._in_flight -= 1
        if cause:
            with self._lock:
                self.stats.batch_failures[cause] += 1
                self.stats.records_in_failed_batches += len(records)
            self._note({"event": "batch_failed", "cause": cause, "detail": detail, "size": len(records),
                        "ms": int((time.monotonic() - started) * 1000)})
            return False
        to_delete = [m for m in batch if m["MessageId"] not in failed]
        deleted = self._delete(sqs, to_delete)
        with self._lock:
            self.stats.item_failures += len(failed)
            self.stats.records_deleted += deleted
        self._note({"event": "invoked", "size": len(records), "failed": sorted(failed), "deleted": deleted,
                    "ms": int((time.monotonic() - started) * 1000), "gather_ms": getattr(getattr(self, "_local_gather", None), "ms", None),
                    "poller": threading.current_thread().name})
        return True

    def _delete(self, sqs, msgs: list[dict]) -> int:
        deleted = 0
        for i in range(0, len(msgs), 10):
            chunk = msgs[i:i + 10]
            entries = [{"Id": str(j), "ReceiptHandle": m["ReceiptHandle"]} for j, m in enumerate(chunk)]
            for attempt in range(5):
                try:
                    resp = sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=entries)
                    deleted += len(resp.get("Successful", []))
                    if resp.get("Failed"):
                        with self._lock:
                            self.stats.delete_errors += len(resp["Failed"])
                        self._note({"event": "delete_failed", "failed": resp["Failed"]})
                    break
                except Exception as e:  # noqa: BLE001
                    self._note({"event": "delete_error", "error": str(e), "attempt": attempt})
                    time.sleep(0.2 * (attempt + 1))
        return deleted

    def _note(self, entry: dict) -> None:
        if self._log:
            entry["t"] = round(time.time(), 3)
            with self._lock:
                self._log.write(json.dumps(entry) + "\n")
                self._log.flush()


def _sqs(endpoint: str):
    import boto3
    from botocore.config import Config

    return boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 3, "mode": "standard"}, read_timeout=60))


def queue_depth(endpoint: str, queue_url: str, sqs=None) -> dict[str, int]:
    sqs = sqs or _sqs(endpoint)
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
             "ApproximateNumberOfMessagesDelayed"]
    a = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=names)["Attributes"]
    return {n: int(a.get(n, 0)) for n in names}


def wait_drained(trigger: Trigger, endpoint: str, queue_url: str, timeout: float,
                 settle_s: float = 1.0, progress=None) -> bool:
    """Wait until the source queue holds nothing (visible, in flight or delayed) and no
    invocation is running, twice in a row `settle_s` apart."""
    sqs = _sqs(endpoint)
    end = time.monotonic() + timeout
    quiet_since = None
    while time.monotonic() < end:
        depth = queue_depth(endpoint, queue_url, sqs)
        if progress:
            progress(depth)
        if sum(depth.values()) == 0 and trigger.in_flight == 0:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= settle_s:
                return True
        else:
            quiet_since = None
        time.sleep(0.25)
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoint", default=os.environ.get("AWS_ENDPOINT_URL"), required=False)
    ap.add_argument("--function-url", required=True,
                    help="e.g. http://127.0.0.1:9000/2015-03-31/functions/audit-receiver/invocations")
    ap.add_argument("--template", default=None)
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--batching-window", type=float, help="TEST SCALING: override the template's window")
    ap.add_argument("--pollers", type=int, help="concurrent invocations (default: ScalingConfig, at most 2)")
    ap.add_argument("--until-drained", action="store_true", help="stop once the queue is empty")
    args = ap.parse_args(argv)
    from local.stack import DEFAULT_TEMPLATE, read_stack

    stack = read_stack(args.template or DEFAULT_TEMPLATE, dict(p.split("=", 1) for p in args.param),
                       batching_window=args.batching_window)
    q = stack.source_queue
    url = f"{args.endpoint.rstrip('/')}/123456789012/{q.name}"
    pollers = args.pollers or min(stack.esm.maximum_concurrency or 2, 2)
    t = Trigger(args.endpoint, url, q.arn, args.function_url, batch_size=stack.esm.batch_size,
                batching_window_s=stack.esm.batching_window_s, pollers=pollers,
                report_batch_item_failures=stack.esm.report_batch_item_failures,
                invoke_timeout_s=stack.function.timeout_s + 5)
    t.start()
    try:
        if args.until_drained:
            wait_drained(t, args.endpoint, url, timeout=math.inf)
        else:
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        t.stop()
        print(json.dumps(t.stats.as_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
