"""A local DynamoDB stream trigger that behaves like Lambda's event source mapping for a table's
stream (the archiver's event in template.yaml), next to local/trigger.py's for SQS.

One poller per shard (ParallelizationFactor 1: one batch per shard at a time, stream order):

* finds the stream's shards (DescribeStream) and reads each from ``StartingPosition``
  (TRIM_HORIZON or LATEST) with GetShardIterator and GetRecords, a child shard only after its
  parent is done; after a checkpoint it goes on with the records after it;
* gathers up to ``BatchSize`` records, for at most ``MaximumBatchingWindowInSeconds`` after the
  first one, and never more than Lambda's 6 MB synchronous payload;
* builds the event as Lambda does: ``Records[]`` with ``eventID``, ``eventName``,
  ``eventVersion`` "1.1", ``eventSource`` "aws:dynamodb", ``awsRegion``, ``dynamodb``
  (``ApproximateCreationDateTime`` in epoch seconds, ``Keys``, ``NewImage``, ``OldImage``,
  ``SequenceNumber``, ``SizeBytes``, ``StreamViewType``), ``eventSourceARN``, and for a deletion
  by DynamoDB's own TTL ``userIdentity`` {"type": "Service", "principalId":
  "dynamodb.amazonaws.com"} (moto has no TTL: ``delete_expired`` plays it, see below);
* invokes the function synchronously (its own ``cargo lambda watch``);
* with ``ReportBatchItemFailures``: a missing/null/empty answer or list is success; otherwise the
  lowest failed ``SequenceNumber`` is the checkpoint: the records before it are done, and the
  batch is retried from it. An identifier that is null, empty, not a string or not a sequence
  number of the batch fails the whole batch, as Lambda does;
* on a function error (error answer, HTTP error, broken connection, time-out) with
  ``BisectBatchOnFunctionError``: splits the batch in two and runs the halves in order (a split
  is not a retry); a batch of one is retried;
* after ``MaximumRetryAttempts`` retries of a batch (or once its oldest record is older than
  ``MaximumRecordAgeInSeconds``) gives it up: sends Lambda's on-failure record (a description:
  shard, first and last sequence numbers, arrival times, batch size, stream ARN; not the
  records) to the on-failure queue, and goes on after it. Until the send succeeds it keeps
  trying: nothing is skipped without its description in the queue.

Lambda's exact retry timing and how it counts retries across splits are not documented; here a
retry waits ``retry_backoff_s`` (doubling, at most 2 s), and the halves of a split start with
their batch's retry count, so a record that cannot be archived is given up after at most
``MaximumRetryAttempts`` retries of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

from local import procs
from local.stack import _client

EVENT_VERSION = "1.1"
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
MAX_PAYLOAD = 6 * 1024 * 1024  # Lambda's synchronous invocation payload limit


@dataclass
class StreamStats:
    invocations: int = 0
    records_invoked: int = 0
    records_done: int = 0            # checkpointed: succeeded, or given up with a description sent
    item_failures: int = 0           # partial batch responses that named a failed record
    function_errors: int = 0
    whole_batch_failures: int = 0    # answers Lambda treats as a failure of the whole batch
    bisections: int = 0
    retries: int = 0
    given_up_batches: int = 0
    given_up_records: int = 0
    max_batch: int = 0
    ttl_deletions: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _epoch_seconds(value) -> int:
    if isinstance(value, datetime):
        return int(value.timestamp())
    return int(float(value))


def lambda_record(rec: dict, stream_arn: str, region: str = "us-east-1", ttl_deletion: bool = False) -> dict:
    """One GetRecords record as Lambda's event source mapping puts it in the event."""
    d = rec["dynamodb"]
    dyn = {"ApproximateCreationDateTime": _epoch_seconds(d["ApproximateCreationDateTime"]), "Keys": d["Keys"]}
    for k in ("NewImage", "OldImage"):
        if k in d:
            dyn[k] = d[k]
    dyn.update({"SequenceNumber": d["SequenceNumber"], "SizeBytes": d["SizeBytes"],
                "StreamViewType": d["StreamViewType"]})
    out = {"eventID": rec["eventID"], "eventName": rec["eventName"], "eventVersion": EVENT_VERSION,
           "eventSource": "aws:dynamodb", "awsRegion": rec.get("awsRegion", region), "dynamodb": dyn,
           "eventSourceARN": stream_arn}
    if ttl_deletion:
        out["userIdentity"] = dict(TTL_IDENTITY)
    return out


def key_of(keys: dict) -> str:
    """A record's (or an item's) key attributes as one comparable string."""
    return json.dumps(keys, sort_keys=True)


class WholeBatchFailure(Exception):
    pass


def failed_from(response: object, batch: list[dict], report_batch_item_failures: bool = True) -> int | None:
    """The index in ``batch`` to retry from (its lowest failed sequence number), or None when the
    batch succeeded; raises WholeBatchFailure where Lambda would fail the whole batch."""
    if not report_batch_item_failures or response is None or response == {} or response == "":
        return None
    if not isinstance(response, dict):
        raise WholeBatchFailure("malformed_response")
    items = response.get("batchItemFailures")
    if items is None or items == []:
        return None
    if not isinstance(items, list):
        raise WholeBatchFailure("malformed_response")
    index = {r["dynamodb"]["SequenceNumber"]: i for i, r in enumerate(batch)}
    lowest = None
    for it in items:
        ident = it.get("itemIdentifier") if isinstance(it, dict) else None
        if not isinstance(ident, str) or not ident:
            raise WholeBatchFailure("bad_item_identifier")
        if ident not in index:
            raise WholeBatchFailure("unknown_item_identifier")
        lowest = index[ident] if lowest is None else min(lowest, index[ident])
    return lowest


class StreamTrigger:
    def __init__(self, endpoint: str, stream_arn: str, function_url: str, *, function_arn: str = "",
                 failure_queue_url: str | None = None, batch_size: int = 100, batching_window_s: float = 0.0,
                 report_batch_item_failures: bool = True, bisect: bool = False, max_retries: int = -1,
                 max_record_age_s: int = -1, starting_position: str = "TRIM_HORIZON",
                 invoke_timeout_s: float = 60.0, poll_interval_s: float = 0.25, retry_backoff_s: float = 0.2,
                 region: str = "us-east-1", log_path: str | None = None):
        if not 1 <= batch_size <= 10000:
            raise ValueError("BatchSize must be 1..10000")
        if starting_position not in ("TRIM_HORIZON", "LATEST"):
            raise ValueError("StartingPosition must be TRIM_HORIZON or LATEST for a DynamoDB stream")
        self.endpoint = endpoint
        self.stream_arn = stream_arn
        self.function_url = function_url
        self.function_arn = function_arn
        self.failure_queue_url = failure_queue_url
        self.batch_size = batch_size
        self.window = batching_window_s
        self.report = report_batch_item_failures
        self.bisect = bisect
        self.max_retries = max_retries
        self.max_record_age_s = max_record_age_s
        self.starting_position = starting_position
        self.invoke_timeout = invoke_timeout_s
        self.poll_interval = poll_interval_s
        self.retry_backoff = retry_backoff_s
        self.region = region
        self.stats = StreamStats()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: dict[str, threading.Thread] = {}
        self._done_shards: set[str] = set()
        self._busy: dict[str, bool] = {}          # shard -> holds records not yet checkpointed
        self._ttl_keys: set[str] = set()          # keys being deleted by delete_expired()
        self._log = open(log_path, "a", encoding="utf-8") if log_path else None
        self._discoverer: threading.Thread | None = None
        self.on_invoke = None  # test hook: called with the event before each invocation

    # lifecycle ------------------------------------------------------------------------------
    def start(self) -> "StreamTrigger":
        self._discoverer = threading.Thread(target=self._discover, name="stream-shards", daemon=True)
        self._discoverer.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._discoverer:
            self._discoverer.join(timeout=10)
        for t in list(self._threads.values()):
            t.join(timeout=self.invoke_timeout + 10)
        if self._log:
            self._log.close()
            self._log = None

    def __enter__(self) -> "StreamTrigger":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def caught_up(self) -> bool:
        """Every shard found has been read to its end and every record read is checkpointed."""
        with self._lock:
            return bool(self._busy) and not any(self._busy.values())

    def wait_caught_up(self, timeout: float, settle_s: float = 0.5) -> bool:
        end = time.monotonic() + timeout
        quiet_since = None
        while time.monotonic() < end:
            if self.caught_up():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= settle_s:
                    return True
            else:
                quiet_since = None
            time.sleep(0.1)
        return False

    # DynamoDB's TTL, played locally ------------------------------------------------------------
    def delete_expired(self, ddb, table_name: str, attribute: str, now: float | None = None) -> int:
        """Deletes the items whose TTL attribute (epoch seconds) has passed, as DynamoDB's TTL
        does, so that their REMOVE records carry DynamoDB's service identity. Returns how many."""
        now = time.time() if now is None else now
        key_names = [k["AttributeName"] for k in ddb.describe_table(TableName=table_name)["Table"]["KeySchema"]]
        deleted, kwargs = 0, {"TableName": table_name, "FilterExpression": "#t <= :now",
                              "ExpressionAttributeNames": {"#t": attribute},
                              "ExpressionAttributeValues": {":now": {"N": str(int(now))}}}
        while True:
            page = ddb.scan(**kwargs)
            for item in page["Items"]:
                keys = {k: item[k] for k in key_names}
                with self._lock:
                    self._ttl_keys.add(key_of(keys))
                ddb.delete_item(TableName=table_name, Key=keys)
                deleted += 1
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        with self._lock:
            self.stats.ttl_deletions += deleted
        return deleted

    def _is_ttl_deletion(self, rec: dict) -> bool:
        if rec.get("eventName") != "REMOVE":
            return False
        key = key_of(rec["dynamodb"]["Keys"])
        with self._lock:
            if key in self._ttl_keys:
                self._ttl_keys.discard(key)
                return True
        return False

    # shards -----------------------------------------------------------------------------------
    def _discover(self) -> None:
        streams = _client("dynamodbstreams", self.endpoint)
        while not self._stop.is_set():
            try:
                shards, start = [], None
                while True:
                    kw = {"StreamArn": self.stream_arn, **({"ExclusiveStartShardId": start} if start else {})}
                    desc = streams.describe_stream(**kw)["StreamDescription"]
                    shards += desc["Shards"]
                    start = desc.get("LastEvaluatedShardId")
                    if not start:
                        break
                known = {s["ShardId"] for s in shards}
                for s in shards:
                    sid, parent = s["ShardId"], s.get("ParentShardId")
                    with self._lock:
                        if sid in self._threads:
                            continue
                        ready = parent is None or parent not in known or parent in self._done_shards
                        if not ready:
                            continue
                        self._busy[sid] = True
                    t = threading.Thread(target=self._shard, args=(sid,), name=f"shard-{sid[-8:]}", daemon=True)
                    self._threads[sid] = t
                    t.start()
            except Exception as e:  # noqa: BLE001 - the endpoint may be going away
                self._note({"event": "describe_error", "error": str(e)})
            self._stop.wait(1.0)

    def _shard(self, shard_id: str) -> None:
        streams = _client("dynamodbstreams", self.endpoint)
        iterator = None
        checkpoint: str | None = None
        pending: list[dict] = []
        first_seen: float | None = None
        closed = False
        while not self._stop.is_set():
            try:
                if iterator is None and not closed:
                    kw = {"StreamArn": self.stream_arn, "ShardId": shard_id}
                    if checkpoint:
                        kw.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=checkpoint)
                    else:
                        kw.update(ShardIteratorType=self.starting_position)
                    iterator = streams.get_shard_iterator(**kw)["ShardIterator"]
                got = []
                if not closed and len(pending) < self.batch_size:
                    resp = streams.get_records(ShardIterator=iterator, Limit=min(1000, self.batch_size - len(pending)))
                    got = resp.get("Records", [])
                    iterator = resp.get("NextShardIterator")
                    closed = iterator is None
            except Exception as e:  # noqa: BLE001
                self._note({"event": "get_records_error", "shard": shard_id, "error": str(e)})
                iterator = None
                self._stop.wait(0.5)
                continue
            if got:
                pending += got
                first_seen = first_seen or time.monotonic()
            if not pending:
                with self._lock:
                    self._busy[shard_id] = False
                if closed:
                    with self._lock:
                        self._done_shards.add(shard_id)
                    return
                self._stop.wait(self.poll_interval)
                continue
            with self._lock:
                self._busy[shard_id] = True
            gathering = first_seen is not None and time.monotonic() - first_seen < self.window
            if len(pending) < self.batch_size and gathering and not closed:
                self._stop.wait(min(self.poll_interval, self.window))
                continue
            batch, size = [], 0
            for rec in pending[: self.batch_size]:
                n = len(json.dumps(rec, default=str))
                if batch and size + n > MAX_PAYLOAD - 256 * 1024:
                    break
                batch.append(rec)
                size += n
            if not self._run(shard_id, batch):
                return  # stopping
            checkpoint = batch[-1]["dynamodb"]["SequenceNumber"]
            pending = pending[len(batch):]
            first_seen = time.monotonic() if pending else None

    # one batch, with Lambda's retries -------------------------------------------------------------
    def _run(self, shard_id: str, records: list[dict]) -> bool:
        """Runs a batch until every record is done or given up; False if stopped first."""
        ttl = {r["dynamodb"]["SequenceNumber"] for r in records if self._is_ttl_deletion(r)}
        todo: list[tuple[list[dict], int]] = [(records, 0)]  # (sub-batch, retries so far), in order
        backoff = self.retry_backoff
        while todo:
            if self._stop.is_set():
                return False
            batch, retries = todo[0]
            outcome, retry_from = self._invoke(shard_id, batch, ttl)
            if outcome == "ok":
                todo.pop(0)
                self._done(len(batch))
                backoff = self.retry_backoff
                continue
            if outcome == "partial":
                self._done(retry_from)
                batch = batch[retry_from:]
            elif outcome == "function_error" and self.bisect and len(batch) > 1:
                half = len(batch) // 2
                todo[0:1] = [(batch[:half], retries), (batch[half:], retries)]
                with self._lock:
                    self.stats.bisections += 1
                self._note({"event": "bisected", "shard": shard_id, "sizes": [half, len(batch) - half]})
                continue
            retries += 1
            oldest = _epoch_seconds(batch[0]["dynamodb"]["ApproximateCreationDateTime"])
            too_old = self.max_record_age_s >= 0 and time.time() - oldest > self.max_record_age_s
            if (self.max_retries >= 0 and retries > self.max_retries) or too_old:
                if not self._give_up(shard_id, batch, retries,
                                     "RecordAgeExceeded" if too_old else "RetryAttemptsExhausted", outcome):
                    return False
                todo.pop(0)
                self._done(len(batch))
                continue
            todo[0] = (batch, retries)
            with self._lock:
                self.stats.retries += 1
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 2.0)
        return True

    def _invoke(self, shard_id: str, batch: list[dict], ttl: set[str]) -> tuple[str, int]:
        event = {"Records": [lambda_record(r, self.stream_arn, self.region,
                                           r["dynamodb"]["SequenceNumber"] in ttl) for r in batch]}
        with self._lock:
            self.stats.invocations += 1
            self.stats.records_invoked += len(batch)
            self.stats.max_batch = max(self.stats.max_batch, len(batch))
        started = time.monotonic()
        try:
            if self.on_invoke:
                self.on_invoke(event)
            response = procs.invoke(self.function_url, event, timeout=self.invoke_timeout)
            retry_from = failed_from(response, batch, self.report)
        except procs.InvokeError as e:
            with self._lock:
                self.stats.function_errors += 1
            self._note({"event": "function_error", "shard": shard_id, "size": len(batch), "error": str(e)[:300]})
            return "function_error", 0
        except WholeBatchFailure as e:
            with self._lock:
                self.stats.whole_batch_failures += 1
            self._note({"event": "batch_failed", "shard": shard_id, "cause": str(e), "size": len(batch),
                        "response": repr(response)[:300]})
            return "whole_batch_failure", 0
        ms = int((time.monotonic() - started) * 1000)
        if retry_from is None:
            self._note({"event": "invoked", "shard": shard_id, "size": len(batch), "ms": ms})
            return "ok", 0
        with self._lock:
            self.stats.item_failures += 1
        self._note({"event": "partial", "shard": shard_id, "size": len(batch), "retry_from": retry_from, "ms": ms})
        return "partial", retry_from

    def _give_up(self, shard_id: str, batch: list[dict], invokes: int, condition: str, outcome: str) -> bool:
        """Lambda's on-failure record for a batch given up, sent until the send succeeds."""
        arrivals = [datetime.fromtimestamp(_epoch_seconds(r["dynamodb"]["ApproximateCreationDateTime"]),
                                           timezone.utc) for r in (batch[0], batch[-1])]
        record = {
            "requestContext": {"requestId": str(uuid.uuid4()), "functionArn": self.function_arn,
                               "condition": condition, "approximateInvokeCount": invokes},
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST",
                                **({"functionError": "Unhandled"} if outcome == "function_error" else {})},
            "version": "1.0",
            "timestamp": datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "DDBStreamBatchInfo": {
                "shardId": shard_id,
                "startSequenceNumber": batch[0]["dynamodb"]["SequenceNumber"],
                "endSequenceNumber": batch[-1]["dynamodb"]["SequenceNumber"],
                "approximateArrivalOfFirstRecord": arrivals[0].isoformat().replace("+00:00", "Z"),
                "approximateArrivalOfLastRecord": arrivals[1].isoformat().replace("+00:00", "Z"),
                "batchSize": len(batch),
                "streamArn": self.stream_arn,
            },
        }
        sqs = _client("sqs", self.endpoint) if self.failure_queue_url else None
        while not self._stop.is_set():
            try:
                if sqs:
                    sqs.send_message(QueueUrl=self.failure_queue_url, MessageBody=json.dumps(record))
                break
            except Exception as e:  # noqa: BLE001 - keep trying: nothing is skipped undescribed
                self._note({"event": "failure_send_error", "error": str(e)})
                self._stop.wait(1.0)
        else:
            return False
        with self._lock:
            self.stats.given_up_batches += 1
            self.stats.given_up_records += len(batch)
        self._note({"event": "given_up", "shard": shard_id, "condition": condition, "size": len(batch),
                    "first": record["DDBStreamBatchInfo"]["startSequenceNumber"],
                    "last": record["DDBStreamBatchInfo"]["endSequenceNumber"]})
        return True

    def _done(self, n: int) -> None:
        with self._lock:
            self.stats.records_done += n

    def _note(self, entry: dict) -> None:
        if self._log:
            entry["t"] = round(time.time(), 3)
            with self._lock:
                if self._log:
                    self._log.write(json.dumps(entry) + "\n")
                    self._log.flush()


def from_stack(stack, endpoint: str, function_url: str, function=None, **overrides) -> StreamTrigger:
    """The trigger of a function's stream event (local/stack.py's Stack, created): the
    archiver's, or ``function``'s (the OCSF writer's)."""
    function = function or stack.archiver
    esm = function.stream_events[0]
    failures = stack.failure_queue(function)
    kwargs = dict(function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:{function.name}",
                  failure_queue_url=failures.url if failures else None, batch_size=esm.batch_size,
                  batching_window_s=esm.batching_window_s, report_batch_item_failures=esm.report_batch_item_failures,
                  bisect=esm.bisect_batch_on_function_error, max_retries=esm.maximum_retry_attempts,
                  max_record_age_s=esm.maximum_record_age_s, starting_position=esm.starting_position,
                  invoke_timeout_s=function.timeout_s + 5)
    kwargs.update(overrides)
    return StreamTrigger(endpoint, stack.stream_arn, function_url, **kwargs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoint", default=os.environ.get("AWS_ENDPOINT_URL"))
    ap.add_argument("--function-url", required=True,
                    help="e.g. http://127.0.0.1:9001/2015-03-31/functions/audit-archiver/invocations")
    ap.add_argument("--stream-arn", required=True, help="the table's LatestStreamArn")
    ap.add_argument("--failure-queue-url", help="the on-failure destination")
    ap.add_argument("--template", default=None)
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--batching-window", type=float, help="TEST SCALING: override the template's window")
    args = ap.parse_args(argv)
    from local.stack import DEFAULT_TEMPLATE, read_stack

    stack = read_stack(args.template or DEFAULT_TEMPLATE, dict(p.split("=", 1) for p in args.param))
    stack.stream_arn = args.stream_arn
    overrides = {"failure_queue_url": args.failure_queue_url}
    if args.batching_window is not None:
        overrides["batching_window_s"] = args.batching_window
    t = from_stack(stack, args.endpoint, args.function_url, **overrides).start()
    try:
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
