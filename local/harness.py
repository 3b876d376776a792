"""The whole local system in one object, for `make demo`, `make local-up` and the end-to-end
tests: moto_server -> stack from template.yaml -> fault proxy -> function (cargo lambda watch) ->
local SQS trigger, and with ``archiver=True`` the table's stream -> local stream trigger ->
audit-archiver (its own cargo lambda watch) -> the archive bucket, and the local schedule ->
audit-archiver -> the digests, signed with the stack's KMS key; plus the producer that sends a
known mix of audit messages and the checkers that prove, after the queue drained, that nothing
was lost or doubled, in the table and in the archive."""

from __future__ import annotations

import gzip
import json
import random
import string
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

from local import procs
from local import schedule as local_schedule
from local import witness as local_witness
from local.faultproxy import FaultConfig, FaultProxy
from local.meter import Meter
from local.stack import DEFAULT_TEMPLATE, Stack, create_stack, read_stack
from local.streams import StreamTrigger, from_stack
from local.trigger import Trigger, queue_depth, wait_drained

# The local stack's digest period (DIGEST_PERIOD_SECONDS; 3600 in the template): short, so that
# periods end, and can be sealed, while one watches. A period can be sealed SEAL_DELAY (30 s,
# crates/model/src/archive.rs) after it ends, so the period holding a demo's last event is sealed
# within 15 + 30 + LOCAL_SEAL_INTERVAL_SECONDS seconds. It must divide a day and be 10 or more.
LOCAL_DIGEST_PERIOD_SECONDS = 15
# The seal schedule's interval (the template's SealDigests: rate(5 minutes)), scaled down as the
# period is: a period is sealed at most this long after it can be.
LOCAL_SEAL_INTERVAL_SECONDS = 5


def _client(service: str, endpoint: str):
    import boto3
    from botocore.config import Config

    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 8, "mode": "standard"}, max_pool_connections=16))


class LocalSystem:
    """Start with ``with LocalSystem(...) as system:``; everything is stopped on exit."""

    def __init__(self, work_dir: Path, *, template: Path = DEFAULT_TEMPLATE,
                 parameters: dict[str, str] | None = None, visibility_timeout: int | None = None,
                 batching_window: float | None = None, faults: FaultConfig | None = None,
                 pollers: int | None = None, function_env: dict[str, str] | None = None,
                 function_mode: str | None = None, archiver: bool = False,
                 archive_batching_window: float | None = None,
                 digest_period: int | None = LOCAL_DIGEST_PERIOD_SECONDS,
                 seal_interval: float | None = LOCAL_SEAL_INTERVAL_SECONDS,
                 witness_dir: Path | None = None, witness: bool = True, meter: Meter | None = None,
                 ocsf_writer: bool = False):
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.stack: Stack = read_stack(template, parameters, visibility_timeout, batching_window,
                                       digest_period=digest_period, schedule_interval=seal_interval)
        # The archiver's window scaled down (the template's is a minute), recorded as the others.
        self.archive_batching_window = archive_batching_window
        self.with_archiver = archiver
        # audit-ocsf-writer beside the archiver (docs/ocsf.md), on a stream trigger of its own
        # with its template window scaled as the archiver's.
        self.with_ocsf_writer = ocsf_writer
        self.ocsf_writer: procs.Function | None = None
        self.ocsf_streams: StreamTrigger | None = None
        self.faults = faults
        self.pollers = pollers or min(self.stack.esm.maximum_concurrency or 2, 2)
        self.function_env_extra = function_env or {}
        self.function_mode = function_mode
        self.moto: procs.Proc | None = None
        self.endpoint = ""
        self.proxy: FaultProxy | None = None
        self.function: procs.Function | None = None
        self.trigger: Trigger | None = None   # AuditQueue's
        self.triggers: list[Trigger] = []     # one per SQS event of the receiver, AuditQueue's first
        self.archiver: procs.Function | None = None
        self.streams: StreamTrigger | None = None
        self.scheduler: local_schedule.Scheduler | None = None
        # The witness (local/witness.py), run after each seal run when there is an archiver: its
        # key and state in witness_dir (the work dir's witness/ by default).
        self.with_witness = witness
        self.witness_dir = Path(witness_dir) if witness_dir else self.work_dir / "witness"
        self.witness: local_witness.LocalWitness | None = None
        self.witness_key = ""
        # With a meter (local/meter.py, `make cost-measure`), each program reaches AWS through an
        # endpoint of its own that counts its requests, and the sealing runs have an archiver
        # instance of their own (as in Lambda, where a scheduled run and a stream batch are
        # separate invocations), so that the sealer's requests are told from the archiver's.
        self.meter = meter
        self.sealer: procs.Function | None = None
        self.redriven_ids: set[str] = set()  # SQS ids of the messages redrive() sent
        self.redriven_keys: set[str] = set()  # item keys redriven by other means (auditctl)

    # lifecycle --------------------------------------------------------------------------------
    def start(self, ready_timeout: float = 1800) -> "LocalSystem":
        try:
            self.moto, self.endpoint = procs.start_moto(self.work_dir)
            create_stack(self.stack, self.endpoint)
            self.sqs = _client("sqs", self.endpoint)
            self.ddb = _client("dynamodb", self.endpoint)
            # The function reaches DynamoDB through the proxy (faults off unless configured).
            self.proxy = FaultProxy(self.endpoint, self.faults or FaultConfig()).start()
            self.proxy.enabled = False  # no faults while the function starts
            # The function runs as its role (its credentials from the stack), as in Lambda.
            env = procs.function_env(self.stack.function.environment, self._endpoint("receiver", self.proxy.url),
                                     {**self.stack.function.credentials, **self.function_env_extra})
            # The other SQS events (AuditAccessQueue's) get one poller each: access events are few.
            extra = len(self.stack.function.events) - 1
            self.function = procs.Function(env, self.work_dir / "function.log",
                                           timeout_s=self.stack.function.timeout_s, mode=self.function_mode,
                                           concurrency=self.pollers + extra)
            self.function.start(ready_timeout)
            self.proxy.enabled = self.faults is not None
            for i, esm in enumerate(self.stack.function.events):
                q = self.stack.queues[esm.queue_logical_id]
                trigger = Trigger(self._endpoint("receiver-poller"), q.url, q.arn, self.function.url,
                                  batch_size=esm.batch_size, batching_window_s=esm.batching_window_s,
                                  pollers=self.pollers if i == 0 else 1,
                                  report_batch_item_failures=esm.report_batch_item_failures,
                                  invoke_timeout_s=self.stack.function.timeout_s + 5,
                                  log_path=str(self.work_dir / ("trigger.log" if i == 0 else
                                                                f"trigger-{q.logical_id}.log")))
                self.triggers.append(trigger.start())
            self.trigger = self.triggers[0]
            if self.with_archiver:
                self._start_archiver(ready_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_archiver(self, ready_timeout: float) -> None:
        """audit-archiver under its own cargo lambda watch (straight to moto: the fault proxy is
        the receiver's), fed by the local stream trigger with the template's settings."""
        spec = self.stack.archiver
        if spec is None:
            raise RuntimeError("the template has no function on the table's stream")
        env = procs.function_env(spec.environment, self._endpoint("archiver"), spec.credentials)
        # Two instances: a scheduled run and a stream batch at once, as Lambda would run them.
        self.archiver = procs.Function(env, self.work_dir / "archiver.log", timeout_s=spec.timeout_s,
                                       binary=spec.binary, mode="watch", concurrency=2)
        self.archiver.start(ready_timeout)
        overrides = {}
        if self.archive_batching_window is not None:
            self.stack.scaled["ArchiveBatchingWindow"] = {"template": self.stack.stream_esm.batching_window_s,
                                                          "local": self.archive_batching_window}
            overrides["batching_window_s"] = self.archive_batching_window
        self.streams = from_stack(self.stack, self._endpoint("stream-poller"), self.archiver.url,
                                  log_path=str(self.work_dir / "streams.log"), **overrides).start()
        if self.with_ocsf_writer:
            self._start_ocsf_writer(ready_timeout, overrides)
        # The template's Schedule event: seals the digests (scaled down, recorded in stack.scaled).
        seal_url = self.archiver.url
        if self.meter is not None:
            env = procs.function_env(spec.environment, self._endpoint("sealer"), spec.credentials)
            self.sealer = procs.Function(env, self.work_dir / "sealer.log", timeout_s=spec.timeout_s,
                                         binary=spec.binary, mode="watch", concurrency=1)
            self.sealer.start(ready_timeout)
            seal_url = self.sealer.url
        self.scheduler = local_schedule.from_stack(self.stack, seal_url,
                                                   log_path=str(self.work_dir / "schedule.log"))
        if self.scheduler and self.with_witness:
            self._start_witness()
        if self.scheduler:
            self.scheduler.start()

    def _start_ocsf_writer(self, ready_timeout: float, overrides: dict) -> None:
        """audit-ocsf-writer under its own cargo lambda watch, fed by a second local stream
        trigger (its own iterators over the same stream, as a second event source mapping)."""
        spec = self.stack.ocsf_writer
        if spec is None:
            raise RuntimeError("the template has no OCSF writer on the table's stream")
        env = procs.function_env(spec.environment, self._endpoint("ocsf-writer"), spec.credentials)
        self.ocsf_writer = procs.Function(env, self.work_dir / "ocsf-writer.log", timeout_s=spec.timeout_s,
                                          binary=spec.binary, mode="watch", concurrency=1)
        self.ocsf_writer.start(ready_timeout)
        self.ocsf_streams = from_stack(self.stack, self._endpoint("ocsf-stream-poller"), self.ocsf_writer.url,
                                       function=spec, log_path=str(self.work_dir / "ocsf-streams.log"),
                                       **overrides).start()

    def wait_ocsf_written(self, timeout: float) -> bool:
        """Until the OCSF writer's stream trigger has handed it every record and has nothing left
        to retry."""
        return self.ocsf_streams is not None and self.ocsf_streams.wait_caught_up(timeout)

    def ocsf_objects(self, into: Path) -> list[str]:
        """Every OCSF object's current version (under ext/), copied under ``into`` by its key
        (the layout DuckDB's hive partitioning reads); their keys, each listed once."""
        s3 = _client("s3", self.endpoint)
        bucket = self.stack.ocsf_bucket.name
        keys, kwargs = [], {"Bucket": bucket, "Prefix": "ext/"}
        while True:
            page = s3.list_objects_v2(**kwargs)
            for obj in page.get("Contents", []):
                keys.append(obj["Key"])
                dest = Path(into) / obj["Key"]
                dest.parent.mkdir(parents=True, exist_ok=True)
                s3.download_file(bucket, obj["Key"], str(dest))
            if not page.get("IsTruncated"):
                return keys
            kwargs["ContinuationToken"] = page["NextContinuationToken"]

    def _start_witness(self) -> None:
        """The witness: its key made once (auditctl witness --init), a new log's state, and a run
        after each seal run, with the stack's settings; its runs logged to witness.log."""
        stack = self.stack_env()
        env = procs.function_env({}, self._endpoint("witness"),
                                 {k: stack[k] for k in ("ARCHIVE_BUCKET", "DIGEST_KEY_ID")})
        self.witness = local_witness.LocalWitness(self.witness_dir, local_witness.build_auditctl(), env,
                                                  self.work_dir / "witness.log")
        self.witness_key = self.witness.init()
        self.witness.start_new_log()
        self.scheduler.after_run = self.witness.run

    def stop(self) -> None:
        for step in (*(t.stop for t in self.triggers), lambda: self.streams and self.streams.stop(),
                     lambda: self.ocsf_streams and self.ocsf_streams.stop(),
                     lambda: self.ocsf_writer and self.ocsf_writer.stop(),
                     lambda: self.scheduler and self.scheduler.stop(),
                     lambda: self.witness and self.witness.close(),
                     lambda: self.function and self.function.stop(), lambda: self.archiver and self.archiver.stop(),
                     lambda: self.sealer and self.sealer.stop(), lambda: self.meter and self.meter.stop(),
                     lambda: self.proxy and self.proxy.stop(), lambda: self.moto and self.moto.stop()):
            try:
                step()
            except Exception:  # noqa: BLE001 - stop the rest regardless
                pass
        self.trigger = self.streams = self.scheduler = self.function = self.archiver = self.proxy = self.moto = None
        self.sealer = self.ocsf_writer = self.ocsf_streams = None
        self.triggers = []

    def _endpoint(self, program: str, upstream: str | None = None) -> str:
        """The AWS endpoint of one program: through the meter when there is one."""
        upstream = upstream or self.endpoint
        if self.meter is None:
            return upstream
        return self.meter.endpoint(program, upstream)

    def stack_env(self) -> dict[str, str]:
        """What a client needs to reach the local stack (`.local/stack.env`)."""
        bucket = self.stack.archive_bucket
        failures = self.stack.archive_failure_queue
        archiver_env = self.stack.archiver.environment if self.stack.archiver else {}
        function_env = self.stack.function.environment if self.stack.function else {}
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": "us-east-1",
            # The AWS CLI (v1) reads the region from this one only.
            "AWS_DEFAULT_REGION": "us-east-1",
            # moto takes any key; these keep a client from looking for real credentials.
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "TABLE_NAME": self.stack.table_name,
            "AUDIT_QUEUE_URL": self.queue_url,
            # Where auditctl sends the audit event of its own access (the stack's AuditAccessQueueUrl).
            "ACCESS_QUEUE_URL": self.access_queue_url,
            "DEAD_LETTER_QUEUE_URL": self.dlq_url,
            "ARCHIVE_BUCKET": bucket.name if bucket else "",
            "ARCHIVE_FAILURE_QUEUE_URL": failures.url if failures else "",
            # The OCSF copy's bucket (the stack's AuditOcsfBucketName): `make sql SOURCE=ocsf`.
            "OCSF_BUCKET": self.stack.ocsf_bucket.name if self.stack.ocsf_bucket else "",
            # The local AuditDigestKey's ARN, as the archiver has it (the stack's AuditDigestKeyArn).
            "DIGEST_KEY_ID": archiver_env.get("DIGEST_KEY_ID", ""),
            "DIGEST_PERIOD_SECONDS": archiver_env.get("DIGEST_PERIOD_SECONDS", ""),
            # The local AuditAttestationKey, as the receiver has it (the stack's
            # AuditAttestationKeyArn): auditctl verify, get and ui check the items' attestations.
            "ATTESTATION_KEY_ID": function_env.get("ATTESTATION_KEY_ID", ""),
            # `auditctl archive repair` invokes the archiver (the stack's AuditArchiverFunctionArn):
            # locally by its binary's name, at its own `cargo lambda watch`, which serves Lambda's
            # Invoke API (AWS_ENDPOINT_URL_LAMBDA, the SDKs' variable for Lambda's endpoint).
            **({"ARCHIVER_FUNCTION": self.archiver.binary_name,
                "AWS_ENDPOINT_URL_LAMBDA": f"http://127.0.0.1:{self.archiver.port}"} if self.archiver else {}),
            # The local witness's public key (auditctl verify and check-proof --witness-key).
            **({"WITNESS_KEY": self.witness_key} if self.witness_key else {}),
        }

    def write_stack_env(self, path: Path) -> Path:
        """Shell KEY=value lines (values quoted for the shell), for `set -a; . .local/stack.env`."""
        import shlex

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = ["# The local stack (make local-up); valid while it runs.",
                 *(f"{k}={shlex.quote(v)}" for k, v in self.stack_env().items())]
        path.write_text("\n".join(lines) + "\n")
        return path

    def __enter__(self) -> "LocalSystem":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # helpers ------------------------------------------------------------------------------------
    @property
    def queue_url(self) -> str:
        return self.stack.source_queue.url

    @property
    def dlq_url(self) -> str:
        return self.stack.dead_letter_queue.url

    @property
    def access_queue_url(self) -> str:
        access = self.stack.access_queue
        return access.url if access else ""

    def depth(self, url: str | None = None) -> dict[str, int]:
        return queue_depth(self.endpoint, url or self.queue_url, self.sqs)

    def wait_drained(self, timeout: float, progress=None) -> bool:
        return wait_drained(self.trigger, self.endpoint, self.queue_url, timeout, progress=progress)

    @property
    def access_trigger(self) -> Trigger | None:
        """The trigger of AuditAccessQueue (auditctl's access events)."""
        access = self.stack.access_queue
        return next((t for t in self.triggers if access is not None and t.queue_arn == access.arn), None)

    def wait_access_drained(self, timeout: float, progress=None) -> bool:
        """Until the access queue is empty and its trigger has nothing in flight (at once when
        the template has no access queue)."""
        trigger = self.access_trigger
        if trigger is None:
            return True
        return wait_drained(trigger, self.endpoint, self.access_queue_url, timeout, progress=progress)

    def scan_table(self) -> list[dict]:
        from boto3.dynamodb.types import TypeDeserializer

        des = TypeDeserializer()
        items, kwargs = [], {"TableName": self.stack.table_name}
        while True:
            page = self.ddb.scan(**kwargs)
            items += [{k: des.deserialize(v) for k, v in it.items()} for it in page["Items"]]
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def archive_objects(self, prefix: str = "trail/") -> list[dict]:
        """Every version of every archive object under ``prefix`` ({"Key", "VersionId", ...,
        "lines": [each JSON line, parsed with exact numbers]}), delete markers as
        {"Key", "VersionId", "DeleteMarker": True}."""
        from decimal import Decimal

        s3 = _client("s3", self.endpoint)
        bucket = self.stack.archive_bucket.name
        out, kwargs = [], {"Bucket": bucket, "Prefix": prefix}
        while True:
            page = s3.list_object_versions(**kwargs)
            for m in page.get("DeleteMarkers", []):
                out.append({"Key": m["Key"], "VersionId": m["VersionId"], "DeleteMarker": True})
            for v in page.get("Versions", []):
                body = s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])["Body"].read()
                text = gzip.decompress(body).decode("utf-8")
                lines = [json.loads(ln, parse_float=Decimal, parse_int=Decimal) for ln in text.splitlines() if ln]
                out.append({**v, "lines": lines})
            if not page.get("IsTruncated"):
                return out
            kwargs.update(KeyMarker=page["NextKeyMarker"], VersionIdMarker=page["NextVersionIdMarker"])

    def wait_archived(self, timeout: float) -> bool:
        """Until the stream trigger has handed every stream record to the archiver and has
        nothing left to retry."""
        return self.streams is not None and self.streams.wait_caught_up(timeout)

    @property
    def digest_period(self) -> int:
        return int(self.stack.archiver.environment["DIGEST_PERIOD_SECONDS"])

    def wait_sealed(self, until: float, timeout: float) -> bool:
        """Until the period holding the instant ``until`` (epoch seconds) is sealed: its digest
        exists (the chain is sealed in period order, so every period before it is sealed too).
        Pass a time taken after ``wait_archived`` returned, so that every archive write is in
        that period or an earlier one. The digest is the sealer's commit point and the log's
        objects follow it, so this also waits for the checkpoint the digest names (its tree's
        size). Polls the bucket; False when ``timeout`` passes first."""
        from botocore.exceptions import ClientError

        s3 = _client("s3", self.endpoint)
        bucket = self.stack.archive_bucket.name
        digest = digest_key(int(until) // self.digest_period * self.digest_period)
        checkpoint = None
        end = time.monotonic() + timeout
        while True:
            try:
                if checkpoint is None:
                    body = s3.get_object(Bucket=bucket, Key=digest)["Body"].read()
                    try:
                        checkpoint = json.loads(body)["tree"]["checkpoint"]
                    except (ValueError, TypeError, KeyError):
                        return True  # no log yet, or a planted object at the digest's name
                s3.head_object(Bucket=bucket, Key=checkpoint)
                return True
            except ClientError as e:
                if e.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
                    raise
            if time.monotonic() >= end:
                return False
            time.sleep(0.5)

    def read_dlq(self, visibility_timeout: int = 600) -> list[dict]:
        """Every message in the dead-letter queue (received with a long visibility timeout, so
        each is seen once, and left there). Each gets ``original_id`` (the SQS message id of the
        original delivery: ``failureContext.sqsMessageId``, or its own id when SQS moved it) and
        ``reason`` (``failureReason``, or ``max_receives`` when SQS moved it)."""
        out: dict[str, dict] = {}
        empty = 0
        while empty < 2:
            msgs = self.sqs.receive_message(QueueUrl=self.dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                            VisibilityTimeout=visibility_timeout,
                                            MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"]
                                            ).get("Messages", [])
            empty = empty + 1 if not msgs else 0
            for m in msgs:
                out[m["MessageId"]] = describe_dead_letter(m)
        return list(out.values())

    def peek_dlq(self) -> list[dict]:
        """The dead-letter queue's messages, each made visible again at once (as `auditctl dlq
        list` leaves the queue)."""
        msgs = self.read_dlq(visibility_timeout=60)
        for m in msgs:
            self.sqs.change_message_visibility(QueueUrl=self.dlq_url, ReceiptHandle=m["ReceiptHandle"],
                                               VisibilityTimeout=0)
        return msgs

    def operator_credentials(self) -> dict[str, str]:
        """Credentials of the stack's AuditOperatorRole (AssumeRole, session ``operator``), the
        role ``auditctl dlq redrive`` runs as: the function takes a redriven message's
        ``failureContext`` only from that role or its own (docs/events.md "Delivery facts are
        not taken from the sender")."""
        role = self.stack.roles["AuditOperatorRole"]
        c = _client("sts", self.endpoint).assume_role(RoleArn=role.arn, RoleSessionName="operator")["Credentials"]
        return {"AWS_ACCESS_KEY_ID": c["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": c["SecretAccessKey"],
                "AWS_SESSION_TOKEN": c["SessionToken"]}

    def redrive(self, reasons: set[str] | None = None) -> int:
        """Moves dead-lettered messages (of these reasons) back to the source queue as
        ``auditctl dlq redrive`` does, as the operator role: body and attributes kept
        (``failureContext`` carries the original identity), sent before it is deleted. Returns
        how many moved."""
        import boto3

        creds = self.operator_credentials()
        operator = boto3.client("sqs", endpoint_url=self.endpoint, region_name="us-east-1",
                                aws_access_key_id=creds["AWS_ACCESS_KEY_ID"],
                                aws_secret_access_key=creds["AWS_SECRET_ACCESS_KEY"],
                                aws_session_token=creds["AWS_SESSION_TOKEN"])
        moved = 0
        for m in self.read_dlq(visibility_timeout=60):
            if reasons is not None and m["reason"] not in reasons:
                self.sqs.change_message_visibility(QueueUrl=self.dlq_url, ReceiptHandle=m["ReceiptHandle"],
                                                   VisibilityTimeout=0)
                continue
            attrs = {k: {kk: vv for kk, vv in v.items() if kk in ("DataType", "StringValue", "BinaryValue")}
                     for k, v in (m.get("MessageAttributes") or {}).items()}
            sent = operator.send_message(QueueUrl=self.queue_url, MessageBody=m["Body"], MessageAttributes=attrs)
            self.redriven_ids.add(sent["MessageId"])
            self.sqs.delete_message(QueueUrl=self.dlq_url, ReceiptHandle=m["ReceiptHandle"])
            moved += 1
        return moved


def digest_key(period_start: int) -> str:
    """The key of the digest of the period starting at ``period_start`` (epoch seconds):
    ``digest/dt=YYYY-MM-DD/hour=HH/p<periodStart>.json``, the UTC hour of its start, as
    crates/model/src/digest.rs names it."""
    start = datetime.fromtimestamp(period_start, timezone.utc)
    return f"digest/dt={start:%Y-%m-%d}/hour={start:%H}/p{period_start}.json"


def describe_dead_letter(m: dict) -> dict:
    """A received dead-letter message with its original id and reason read from its attributes."""
    attrs = m.get("MessageAttributes") or {}
    reason = (attrs.get("failureReason") or {}).get("StringValue") or "max_receives"
    original = m["MessageId"]
    try:
        context = json.loads((attrs.get("failureContext") or {}).get("StringValue") or "null")
        if isinstance(context, dict) and context.get("sqsMessageId"):
            original = context["sqsMessageId"]
    except ValueError:
        context = None
    return {**m, "original_id": original, "reason": reason, "context": context}


# ---- the producer -----------------------------------------------------------------------------

POISON_KINDS = {
    # kind: (expected reason code, body maker)
    "invalid_json": ("invalid_json", lambda r, i: '{"auditText": "unterminated ' + str(i)),
    "not_an_object": ("not_an_object", lambda r, i: json.dumps([{"auditText": f"in an array {i}"}])),
    "missing_audit_text": ("missing_audit_text", lambda r, i: json.dumps({"text": f"wrong field {i}"})),
    "empty_audit_text": ("empty_audit_text", lambda r, i: json.dumps({"auditText": "", "n": i})),
    "audit_text_number": ("invalid_field_type", lambda r, i: json.dumps({"auditText": 42, "n": i})),
    "time_without_offset": ("audit_time_without_offset",
                            lambda r, i: json.dumps({"auditText": f"local time {i}", "auditTime": "2026-11-22T10:00:00"})),
    "unparseable_time": ("invalid_audit_time",
                         lambda r, i: json.dumps({"auditText": f"bad time {i}", "auditTime": "yesterday at noon"})),
    "message_id_too_long": ("invalid_message_id",
                            lambda r, i: json.dumps({"auditText": f"long id {i}", "messageId": "x" * 300})),
    "number_out_of_range": ("invalid_number",
                            lambda r, i: '{"auditText": "ledger %d", "amount": 1e200}' % i),
    # A producer id without auditTime: its key would be (messageId, SentTimestamp), a new item on
    # every re-send. The producer re-sends these (see RESENT_POISON): each copy is dead-lettered.
    "producer_id_without_time": ("message_id_without_audit_time",
                                 lambda r, i: json.dumps({"auditText": f"re-sent {i}", "messageId": f"np-{i}"})),
}
RESENT_POISON = {"producer_id_without_time"}


@dataclass
class Expected:
    """One valid audit message as the table must hold it."""
    text: str
    extra: dict
    producer_id: str | None
    audit_time: str | None           # canonical, or None: from SentTimestamp
    body: str
    sqs_ids: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.producer_id or self.sqs_ids[0]


@dataclass
class Ledger:
    valid: list[Expected] = field(default_factory=list)
    poison: dict[str, str] = field(default_factory=dict)        # sqs id -> poison kind
    conflicts: dict[str, str] = field(default_factory=dict)     # sqs id -> producer id
    sent: int = 0
    producer_retries: int = 0

    def expected_reason(self, sqs_id: str) -> str | None:
        if sqs_id in self.poison:
            return POISON_KINDS[self.poison[sqs_id]][0]
        if sqs_id in self.conflicts:
            return "conflict"
        return None


def canonical(dt: datetime) -> str:
    dt = dt.astimezone(timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def _rfc3339(r: random.Random, base: datetime, spread_s: int = 86400 * 30) -> tuple[str, str]:
    """A random RFC 3339 time in the ``spread_s`` seconds from ``base``, with an offset and 0, 3,
    6 or 9 fractional digits, and its canonical UTC form (truncated to milliseconds)."""
    instant = base + timedelta(seconds=r.randrange(0, max(spread_s, 1)), microseconds=r.randrange(0, 10**6))
    offset = timedelta(minutes=r.choice([0, 0, 60, 120, -300, 330, -600, 545]))
    local = instant.astimezone(timezone(offset))
    digits = r.choice([0, 3, 6, 9])
    frac = ""
    canon_instant = instant.replace(microsecond=0)
    if digits:
        us = f"{instant.microsecond:06d}"
        frac = "." + (us + "".join(r.choice(string.digits) for _ in range(3)))[:digits]
        canon_instant = instant.replace(microsecond=int(us[:3]) * 1000 if digits >= 3 else 0)
    off = "Z" if offset == timedelta(0) and r.random() < 0.7 else \
        ("+" if offset >= timedelta(0) else "-") + f"{abs(int(offset.total_seconds())) // 3600:02d}:" \
        f"{abs(int(offset.total_seconds())) % 3600 // 60:02d}"
    text = local.strftime("%Y-%m-%dT%H:%M:%S") + frac + off
    return text, canonical(canon_instant)


def _extra(r: random.Random, i: int) -> dict:
    kinds = [
        {},
        {"user": {"id": r.randrange(1, 10**6), "roles": r.sample(["admin", "clerk", "auditor", "ops"], 2)}},
        {"amount": f"{r.randrange(0, 10**7)}.{r.randrange(0, 100):02d}", "currency": "EUR"},
        {"amount": Decimal(f"{r.randrange(0, 10**7)}.{r.randrange(1, 100):02d}"), "approved": r.random() < 0.5,
         "note": None},
        {"tags": ["a", "b", str(i)], "nested": {"level": {"deep": [1, 2, {"x": "y"}]}}, "ratio": Decimal("0.125")},
        {"empty_list": [], "empty_map": {}, "flag": False, "big": 12345678901234567890},
    ]
    return r.choice(kinds)


def _dumps_exact(obj: Any) -> str:
    if isinstance(obj, dict):
        return "{" + ",".join(json.dumps(k) + ":" + _dumps_exact(v) for k, v in obj.items()) + "}"
    if isinstance(obj, list):
        return "[" + ",".join(_dumps_exact(v) for v in obj) + "]"
    if isinstance(obj, Decimal):
        return str(obj)
    return json.dumps(obj)


class Producer:
    """Sends a seeded, known mix: valid messages (keyed by the SQS id, or by a producer
    `messageId`; with or without `auditTime`; with `extra` fields of every JSON type), a share
    sent twice by the producer (same body and producer id, a new SQS message), and poison."""

    def __init__(self, system: LocalSystem, seed: int = 7, poison_share: float = 0.05,
                 retry_share: float = 0.1, run_id: str | None = None,
                 audit_times: tuple[datetime, int] | None = None):
        """``audit_times``: the first time and the seconds the auditTimes given are spread over
        (default: 30 days from 2026-11-01, every day a partition of its own)."""
        self.system = system
        self.r = random.Random(seed)
        self.poison_share = poison_share
        self.retry_share = retry_share
        self.run = run_id or f"r{seed}"
        self.ledger = Ledger()
        self.base, self.spread_s = audit_times or (datetime(2026, 11, 1, tzinfo=timezone.utc), 86400 * 30)
        self._n = 0

    def make(self, count: int) -> list[tuple[str, Any]]:
        """`count` logical messages -> [(body, ledger entry or poison kind)] (retries included)."""
        out: list[tuple[str, Any]] = []
        r = self.r
        for _ in range(count):
            i = self._n
            self._n += 1
            if r.random() < self.poison_share:
                kind = r.choice(sorted(POISON_KINDS))
                body = POISON_KINDS[kind][1](r, i)
                out.append((body, kind))
                if kind in RESENT_POISON:
                    out.append((body, kind))  # the producer's re-send: a new SQS message
                    self.ledger.producer_retries += 1
                continue
            body: dict[str, Any] = {"auditText": f"{self.run} event {i}: " + r.choice(
                ["user signed in", "invoice approved", "role granted", "record exported", "password reset",
                 "Zürich office – badge ✓ \"quoted\" \\ back\nslash"])}
            style = r.random()
            producer_id = audit_time = None
            if style < 0.5:
                producer_id = f"{self.run}-p{i}"
                body["messageId"] = producer_id
            if style < 0.5 or r.random() < 0.6:
                text, audit_time = _rfc3339(r, self.base, self.spread_s)
                body["auditTime"] = text
            elif r.random() < 0.3:
                body["auditTime"] = None  # explicit null: SentTimestamp is used
            extra = _extra(r, i)
            body.update(extra)
            text = _dumps_exact(body)
            exp = Expected(body["auditText"], extra, producer_id, audit_time, text)
            out.append((text, exp))
            # A producer retry resends the same body (same producer messageId and auditTime).
            if producer_id and r.random() < self.retry_share:
                out.append((text, exp))
                self.ledger.producer_retries += 1
        return out

    def send(self, items: list[tuple[str, Any]]) -> None:
        sqs, url = self.system.sqs, self.system.queue_url
        for k in range(0, len(items), 10):
            chunk = items[k:k + 10]
            entries = [{"Id": str(j), "MessageBody": body} for j, (body, _) in enumerate(chunk)]
            resp = sqs.send_message_batch(QueueUrl=url, Entries=entries)
            if resp.get("Failed"):
                raise RuntimeError(f"send failed: {resp['Failed']}")
            for ok in resp["Successful"]:
                body, what = chunk[int(ok["Id"])]
                sqs_id = ok["MessageId"]
                if isinstance(what, str):
                    self.ledger.poison[sqs_id] = what
                else:
                    if not what.sqs_ids:
                        self.ledger.valid.append(what)
                    what.sqs_ids.append(sqs_id)
            self.ledger.sent += len(chunk)

    def produce(self, count: int, max_depth: int | None = None, progress=None) -> None:
        """Send `count` logical messages; with `max_depth`, wait while the queue holds more
        than that (a steady producer rather than one burst)."""
        left = count
        while left > 0:
            n = min(left, 100)
            if max_depth:
                while sum(self.system.depth().values()) > max_depth:
                    time.sleep(0.2)
            self.send(self.make(n))
            left -= n
            if progress:
                progress(count - left)

    def send_conflicts(self, written: list[Expected], n: int) -> None:
        """Same producer messageId and auditTime as a stored item, different auditText: a
        conflict, which must fail and end in the dead-letter queue, leaving the item alone."""
        keyed = [e for e in written if e.producer_id and e.audit_time][:n]
        for e in keyed:
            body = json.loads(e.body)
            body["auditText"] = e.text + " (tampered)"
            resp = self.system.sqs.send_message(QueueUrl=self.system.queue_url, MessageBody=json.dumps(body))
            self.ledger.conflicts[resp["MessageId"]] = e.producer_id
            self.ledger.sent += 1


# ---- the checker ------------------------------------------------------------------------------

def _norm(v: Any) -> Any:
    """JSON (numbers as Decimal) and DynamoDB values (deserialised) to one comparable form."""
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, float, Decimal)):
        return Decimal(str(v)).normalize()
    if isinstance(v, (set, frozenset)):
        return sorted(_norm(x) for x in v)
    return v


@dataclass
class Verdict:
    sent: int
    valid_expected: int
    poison_expected: int
    items_in_table: int
    lost: list[str]                 # valid messages not in the table
    duplicated: list[str]           # valid messages with more than one item
    wrong_payload: list[str]        # item present but auditText/extra/auditTime differ
    unexpected_items: list[str]     # items that no valid message explains
    poison_not_in_dlq: list[str]
    valid_in_dlq: list[str]
    dlq_count: int
    unexplained_in_dlq: list[str]
    doubled_in_dlq: list[str] = field(default_factory=list)    # one original id, several messages
    wrong_reason: list[str] = field(default_factory=list)      # dead-lettered with another reason
    dlq_messages: list[dict] = field(default_factory=list)  # as received from the dead-letter queue

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.wrong_payload or self.unexpected_items
                    or self.poison_not_in_dlq or self.valid_in_dlq or self.unexplained_in_dlq
                    or self.doubled_in_dlq or self.wrong_reason)

    def summary(self) -> dict:
        return {k: (len(v) if isinstance(v, list) else v) for k, v in self.__dict__.items() if k != "dlq_messages"}


def verify(system: LocalSystem, ledger: Ledger) -> Verdict:
    items = system.scan_table()
    by_key: dict[str, list[dict]] = defaultdict(list)
    for it in items:
        by_key[it["messageId"]].append(it)
    expected_keys = {}
    for e in ledger.valid:
        expected_keys[e.key] = e
    lost, dup, wrong = [], [], []
    for key, e in expected_keys.items():
        got = by_key.get(key, [])
        if not got:
            lost.append(key)
            continue
        if len(got) > 1:
            dup.append(key)
        it = got[0]
        problems = []
        if it.get("auditText") != e.text:
            problems.append("auditText")
        if _norm(it.get("extra", {})) != _norm(e.extra):
            problems.append(f"extra {it.get('extra')!r} != {e.extra!r}")
        want_time = e.audit_time or it.get("sentAt")
        if it.get("auditTime") != want_time:
            problems.append(f"auditTime {it.get('auditTime')} != {want_time}")
        # Written by one of its deliveries, or by a redrive of it.
        if (it.get("sqsMessageId") not in e.sqs_ids and it.get("sqsMessageId") not in system.redriven_ids
                and key not in system.redriven_keys):
            problems.append("sqsMessageId")
        if it.get("eventSource") != system.stack.source_queue.arn:
            problems.append("eventSource")
        if problems:
            wrong.append(f"{key}: {'; '.join(problems)}")
    unexpected = [k for k in by_key if k not in expected_keys]

    dlq = system.read_dlq()
    per_original = Counter(m["original_id"] for m in dlq)
    dlq_ids = set(per_original)
    valid_ids = {sid for e in ledger.valid for sid in e.sqs_ids}
    failing_ids = set(ledger.poison) | set(ledger.conflicts)
    wrong_reason = [f"{m['original_id']}: {m['reason']} != {ledger.expected_reason(m['original_id'])}"
                    for m in dlq if m["original_id"] in failing_ids
                    and m["reason"] != ledger.expected_reason(m["original_id"])]
    return Verdict(
        sent=ledger.sent, valid_expected=len(expected_keys), poison_expected=len(failing_ids),
        items_in_table=len(items), lost=lost, duplicated=dup, wrong_payload=wrong,
        unexpected_items=unexpected,
        poison_not_in_dlq=sorted(failing_ids - dlq_ids), valid_in_dlq=sorted(dlq_ids & valid_ids),
        dlq_count=len(dlq), unexplained_in_dlq=sorted(dlq_ids - failing_ids - valid_ids),
        doubled_in_dlq=sorted(k for k, n in per_original.items() if n > 1), wrong_reason=wrong_reason,
        dlq_messages=dlq)


@dataclass
class ArchiveVerdict:
    """The table against the archive's trail/ objects: every item archived exactly once, as it
    is stored."""
    items_in_table: int
    events_in_archive: int
    objects: int
    missing: list[str]          # items of the table in no trail/ object
    doubled: list[str]          # items in more than one line of the archive
    unexpected: list[str]       # archived events that are no item of the table
    changed: list[str]          # archived line differs from the stored item
    overwritten: list[str]      # keys with more than one version, or a delete marker

    @property
    def ok(self) -> bool:
        return not (self.missing or self.doubled or self.unexpected or self.changed or self.overwritten)

    def summary(self) -> dict:
        return {k: (len(v) if isinstance(v, list) else v) for k, v in self.__dict__.items()}


def verify_archive(system: LocalSystem) -> ArchiveVerdict:
    items = system.scan_table()
    stored = {(it["messageId"], it["auditTime"]): it for it in items}
    objects = system.archive_objects("trail/")
    versions = Counter(o["Key"] for o in objects)
    archived: dict[tuple, list[dict]] = defaultdict(list)
    for o in objects:
        for line in o.get("lines", []):
            archived[(line.get("messageId"), line.get("auditTime"))].append(line)
    name = lambda k: f"{k[0]} @ {k[1]}"  # noqa: E731
    return ArchiveVerdict(
        items_in_table=len(stored), events_in_archive=sum(len(v) for v in archived.values()),
        objects=len(versions),
        missing=sorted(name(k) for k in stored if k not in archived),
        doubled=sorted(name(k) for k, v in archived.items() if len(v) > 1),
        unexpected=sorted(name(k) for k in archived if k not in stored),
        changed=sorted(name(k) for k, v in archived.items() if k in stored and _norm(v[0]) != _norm(stored[k])),
        overwritten=sorted(k for k, n in versions.items() if n > 1
                           or any(o.get("DeleteMarker") and o["Key"] == k for o in objects)))


# ---- the function's logs ----------------------------------------------------------------------

def log_events(path: Path) -> list[dict]:
    """The function's JSON log lines (tracing JSON: fields under "fields" or at the top)."""
    out = []
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        start = line.find("{")
        if start < 0:
            continue
        try:
            doc = json.loads(line[start:])
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        flat = dict(doc)
        if isinstance(doc.get("fields"), dict):
            flat.update(doc["fields"])
        out.append(flat)
    return out


def failure_reasons(path: Path) -> dict[str, list[str]]:
    """sqs message id -> the reasons the function logged for it (failed or dead-lettered), in order."""
    reasons: dict[str, list[str]] = defaultdict(list)
    for ev in log_events(path):
        if ev.get("message") in ("record failed", "record dead-lettered") and ev.get("sqs_message_id"):
            reasons[ev["sqs_message_id"]].append(str(ev.get("reason")))
    return reasons


def batch_totals(path: Path) -> Counter:
    """Sums of the per-invocation summary lines ("batch processed")."""
    c: Counter = Counter()
    for ev in log_events(path):
        if ev.get("message") == "batch processed":
            c["invocations"] += 1
            for k in ("batch_size", "written", "duplicates", "dead_lettered", "failed"):
                try:
                    c[k] += int(ev.get(k) or 0)
                except (TypeError, ValueError):
                    pass
            for kind in ("failed", "dead_lettered"):
                for part in str(ev.get(f"{kind}_by_reason") or "").split(","):
                    if "=" in part:
                        code, n = part.split("=", 1)
                        c[f"{kind}.{code}"] += int(n)
    return c


def emf_documents(path: Path) -> list[dict]:
    return [ev for ev in log_events(path) if "_aws" in ev]
