"""Create the table, the queues, the buckets and the functions' roles of template.yaml on a local
AWS endpoint (moto_server).

    python -m local.stack --endpoint http://127.0.0.1:5000 [--param Name=Value ...]
                          [--visibility-timeout SECONDS] [--batching-window SECONDS]
                          [--digest-period SECONDS]

Everything comes from the template: table key schema, billing mode, table class, TTL, SSE,
point-in-time recovery, stream and tags (the access queue's ARN, the receiver role's RoleId);
queue names, FIFO, visibility timeout, retention, redrive policy (dead-letter queue and
maxReceiveCount) and redrive-allow policy; buckets with their versioning, Object Lock default
retention, encryption, public access block, ownership, lifecycle rules and bucket policies; the
functions' IAM roles (name and trust policy; their permissions are not created: moto enforces
none locally, and the IAM tests in tests/e2e grant them on a moto of their own), each function
given its role's credentials as Lambda gives them (AssumeRole, session name = the function's
name), so that what a function sends to SQS carries the SenderId AWS would attest; the
receiver's SQS events, AuditQueue's and AuditAccessQueue's (BatchSize,
MaximumBatchingWindowInSeconds, ScalingConfig.MaximumConcurrency, FunctionResponseTypes) and the
archiver's DynamoDB stream event
(StartingPosition, BatchSize, window, ReportBatchItemFailures, BisectBatchOnFunctionError,
MaximumRetryAttempts, MaximumRecordAgeInSeconds, the on-failure queue) and its Schedule event
(the rate, run by local/schedule.py); KMS keys with their key spec, usage, description, key
policy (moto keeps it but does not enforce it) and aliases, the key's real ARN put wherever the
template refers to it (DIGEST_KEY_ID); each function's binary, Timeout and environment variables.
(Glue, Athena, CloudWatch, IAM and EventBridge's CloudTrail rules have no local twin: `make sql` runs the same SQL in DuckDB,
local/sql.py; the IAM tests in tests/e2e grant the template's policies on a moto of their own.)

Four flags scale timings down for tests, and only when given: ``--visibility-timeout`` (of
every queue the receiver reads, so that a failed record returns, and a poison one reaches the
dead-letter queue, in seconds rather than minutes), ``--batching-window`` (of each of its SQS
events), ``--digest-period`` (the archiver's
DIGEST_PERIOD_SECONDS) and ``--schedule-interval`` (the seconds between two runs of a Schedule
event). Without them every value is the template's.
Prints the resolved stack as JSON (queue URLs, table name, event source mapping settings).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from local.cfn import Template, TemplateError, key_id_placeholder, load_template, role_id_placeholder, truthy

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TEMPLATE = ROOT / "template.yaml"

# CloudFormation AWS::SQS::Queue properties -> SQS queue attributes.
_QUEUE_ATTRS = {
    "DelaySeconds": "DelaySeconds",
    "MaximumMessageSize": "MaximumMessageSize",
    "MessageRetentionPeriod": "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds": "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout": "VisibilityTimeout",
    "FifoQueue": "FifoQueue",
    "ContentBasedDeduplication": "ContentBasedDeduplication",
    "DeduplicationScope": "DeduplicationScope",
    "FifoThroughputLimit": "FifoThroughputLimit",
    "SqsManagedSseEnabled": "SqsManagedSseEnabled",
    "KmsMasterKeyId": "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds": "KmsDataKeyReusePeriodSeconds",
}


@dataclass
class QueueSpec:
    logical_id: str
    name: str
    arn: str
    attributes: dict[str, str]
    url: str = ""

    @property
    def fifo(self) -> bool:
        return self.attributes.get("FifoQueue") == "true"

    @property
    def visibility_timeout(self) -> int:
        return int(self.attributes.get("VisibilityTimeout", "30"))

    @property
    def max_receive_count(self) -> int | None:
        rp = self.attributes.get("RedrivePolicy")
        return int(json.loads(rp)["maxReceiveCount"]) if rp else None


@dataclass
class EventSourceMapping:
    """The function's SQS event, as Lambda's event source mapping would run it."""
    queue_logical_id: str
    batch_size: int
    batching_window_s: float
    maximum_concurrency: int | None
    report_batch_item_failures: bool
    enabled: bool = True


@dataclass
class StreamEventMapping:
    """The archiver's DynamoDB stream event, as Lambda's event source mapping would run it."""
    table_logical_id: str
    starting_position: str
    batch_size: int
    batching_window_s: float
    parallelization_factor: int
    report_batch_item_failures: bool
    bisect_batch_on_function_error: bool
    maximum_retry_attempts: int    # -1: until the record leaves the stream
    maximum_record_age_s: int      # -1: the stream's retention
    on_failure_queue_logical_id: str | None
    enabled: bool = True


@dataclass
class ScheduleEvent:
    """A function's Schedule event (an EventBridge rule), as local/schedule.py runs it."""
    name: str            # the event's name in the template (SealDigests)
    expression: str      # as the template writes it: rate(5 minutes)
    interval_s: float    # seconds between two runs: the expression's, or scaled down
    rule_name: str       # SAM's rule, <stack>-<function><event> (CloudFormation adds a suffix)
    rule_arn: str
    enabled: bool = True


@dataclass
class KmsKeySpec:
    """An AWS::KMS::Key of the template, with its aliases; ``key_id`` and ``arn`` once created."""
    logical_id: str
    properties: dict     # resolved: KeySpec, KeyUsage, Description, KeyPolicy, ...
    aliases: list[str]
    key_id: str = ""
    arn: str = ""


@dataclass
class RoleSpec:
    """An AWS::IAM::Role of the template; ``role_id`` once created."""
    logical_id: str
    name: str
    arn: str
    trust: dict      # AssumeRolePolicyDocument, resolved
    role_id: str = ""


@dataclass
class FunctionSpec:
    logical_id: str
    name: str
    binary: str      # Metadata.BuildProperties.Binary: what `cargo lambda watch` runs
    timeout_s: int
    memory_mb: int
    environment: dict[str, str]
    events: list[EventSourceMapping] = field(default_factory=list)
    stream_events: list[StreamEventMapping] = field(default_factory=list)
    schedule_events: list[ScheduleEvent] = field(default_factory=list)
    role_logical_id: str | None = None   # the role it runs as (its Role: Fn::GetAtt [R, Arn])
    # Its role's temporary credentials once created (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    # AWS_SESSION_TOKEN), as Lambda puts them in the function's environment.
    credentials: dict[str, str] = field(default_factory=dict)


@dataclass
class BucketSpec:
    logical_id: str
    name: str
    properties: dict          # resolved AWS::S3::Bucket properties
    policies: list[dict]      # resolved policy documents of its AWS::S3::BucketPolicy resources


@dataclass
class Stack:
    template_path: str
    parameters: dict[str, Any]
    table_logical_id: str
    table_name: str
    table_ttl_attribute: str | None
    queues: dict[str, QueueSpec]
    function: FunctionSpec              # the receiver: the function with the SQS event
    scaled: dict[str, Any]  # timings changed by flags (empty when none)
    archiver: FunctionSpec | None = None  # the function with the table's stream event (ARCHIVE_BUCKET)
    buckets: dict[str, BucketSpec] = field(default_factory=dict)
    stream_arn: str = ""                # the table's latest stream, once created
    keys: dict[str, KmsKeySpec] = field(default_factory=dict)
    roles: dict[str, RoleSpec] = field(default_factory=dict)
    # The second function on the table's stream, the one with OCSF_BUCKET (docs/ocsf.md).
    ocsf_writer: FunctionSpec | None = None

    @property
    def functions(self) -> tuple[FunctionSpec, ...]:
        """Every function of the stack: the receiver, then the stream's consumers."""
        return tuple(fn for fn in (self.function, self.archiver, self.ocsf_writer) if fn)

    @property
    def ocsf_bucket(self) -> BucketSpec | None:
        """The bucket the OCSF writer writes to (its OCSF_BUCKET)."""
        name = self.ocsf_writer.environment.get("OCSF_BUCKET") if self.ocsf_writer else None
        return next((b for b in self.buckets.values() if b.name == name), None)

    def failure_queue(self, fn: FunctionSpec) -> QueueSpec | None:
        """The on-failure destination of a function's stream event."""
        esm = fn.stream_events[0] if fn.stream_events else None
        return self.queues[esm.on_failure_queue_logical_id] if esm and esm.on_failure_queue_logical_id else None

    @property
    def source_queue(self) -> QueueSpec:
        """The queue of the receiver's first SQS event (AuditQueue)."""
        return self.queues[self.function.events[0].queue_logical_id]

    @property
    def event_queues(self) -> list[QueueSpec]:
        """Every queue the receiver reads, in the order of its SQS events."""
        return [self.queues[ev.queue_logical_id] for ev in self.function.events]

    @property
    def access_queue(self) -> QueueSpec | None:
        """The queue whose ARN the receiver has as ACCESS_QUEUE_ARN (AuditAccessQueue)."""
        arn = self.function.environment.get("ACCESS_QUEUE_ARN")
        return next((q for q in self.queues.values() if arn and q.arn == arn), None)

    @property
    def dead_letter_queue(self) -> QueueSpec | None:
        rp = self.source_queue.attributes.get("RedrivePolicy")
        if not rp:
            return None
        arn = json.loads(rp)["deadLetterTargetArn"]
        return next(q for q in self.queues.values() if q.arn == arn)

    @property
    def esm(self) -> EventSourceMapping:
        return self.function.events[0]

    @property
    def stream_esm(self) -> StreamEventMapping | None:
        return self.archiver.stream_events[0] if self.archiver else None

    @property
    def archive_failure_queue(self) -> QueueSpec | None:
        esm = self.stream_esm
        return self.queues[esm.on_failure_queue_logical_id] if esm and esm.on_failure_queue_logical_id else None

    @property
    def schedule(self) -> ScheduleEvent | None:
        """The archiver's Schedule event (what seals the digests)."""
        return self.archiver.schedule_events[0] if self.archiver and self.archiver.schedule_events else None

    @property
    def digest_key(self) -> KmsKeySpec | None:
        """The key the archiver signs with (its DIGEST_KEY_ID)."""
        ref = self.archiver.environment.get("DIGEST_KEY_ID") if self.archiver else None
        if not ref:
            return None
        return next((k for k in self.keys.values()
                     if ref in (k.arn, k.key_id) or key_id_placeholder(k.logical_id) in ref), None)

    @property
    def archive_bucket(self) -> BucketSpec | None:
        """The bucket the archiver writes to (its ARCHIVE_BUCKET)."""
        name = self.archiver.environment.get("ARCHIVE_BUCKET") if self.archiver else None
        return next((b for b in self.buckets.values() if b.name == name), None)

    def to_json(self) -> dict:
        d = asdict(self)
        d["source_queue_url"] = self.source_queue.url
        dlq = self.dead_letter_queue
        d["dead_letter_queue_url"] = dlq.url if dlq else None
        failures = self.archive_failure_queue
        d["archive_failure_queue_url"] = failures.url if failures else None
        access = self.access_queue
        d["access_queue_url"] = access.url if access else None
        return d


def _function_spec(tpl: Template, fid: str) -> FunctionSpec:
    fprops = tpl.properties(fid)
    env = {k: str(v) for k, v in ((fprops.get("Environment") or {}).get("Variables") or {}).items()}
    # Lambda turns LoggingConfig into the runtime's environment; do the same locally.
    logging_config = fprops.get("LoggingConfig") or {}
    if "LogFormat" in logging_config:
        env.setdefault("AWS_LAMBDA_LOG_FORMAT", str(logging_config["LogFormat"]))
    if "ApplicationLogLevel" in logging_config and logging_config.get("LogFormat") == "JSON":
        env.setdefault("AWS_LAMBDA_LOG_LEVEL", str(logging_config["ApplicationLogLevel"]))
    build = (tpl.resources[fid].get("Metadata") or {}).get("BuildProperties") or {}
    role = next((rid for rid in tpl.resources_of_type("AWS::IAM::Role") if tpl.arn(rid) == fprops.get("Role")), None)
    return FunctionSpec(fid, tpl.physical_name(fid), str(build.get("Binary") or "audit-receiver"),
                        int(fprops.get("Timeout", 3)), int(fprops.get("MemorySize", 128)), env,
                        role_logical_id=role)


def _roles(tpl: Template) -> dict[str, RoleSpec]:
    return {rid: RoleSpec(rid, tpl.physical_name(rid), tpl.arn(rid),
                          tpl.resolve((tpl.resources[rid].get("Properties") or {}).get("AssumeRolePolicyDocument") or {},
                                      f"Resources.{rid}.Properties.AssumeRolePolicyDocument"))
            for rid in tpl.resources_of_type("AWS::IAM::Role")}


def _stream_events(tpl: Template, fid: str, table_id: str, queues: dict[str, QueueSpec]) -> list[StreamEventMapping]:
    out = []
    for ename, ev in (tpl.properties(fid).get("Events") or {}).items():
        if ev.get("Type") != "DynamoDB":
            continue
        p = ev.get("Properties") or {}
        if p.get("Stream") != tpl.get_att(table_id, "StreamArn"):
            raise TemplateError(f"{fid}.Events.{ename}: the stream is not {table_id}'s")
        on_failure = ((p.get("DestinationConfig") or {}).get("OnFailure") or {})
        failure_qid = None
        if on_failure:
            if on_failure.get("Type", "SQS") != "SQS":
                raise TemplateError(f"{fid}.Events.{ename}: only an SQS on-failure destination runs locally")
            failure_qid = next((q.logical_id for q in queues.values() if q.arn == on_failure.get("Destination")), None)
            if failure_qid is None:
                raise TemplateError(f"{fid}.Events.{ename}: on-failure queue {on_failure.get('Destination')} "
                                    "is not in the template")
        out.append(StreamEventMapping(
            table_logical_id=table_id,
            starting_position=str(p.get("StartingPosition", "TRIM_HORIZON")),
            batch_size=int(p.get("BatchSize", 100)),
            batching_window_s=float(p.get("MaximumBatchingWindowInSeconds", 0)),
            parallelization_factor=int(p.get("ParallelizationFactor", 1)),
            report_batch_item_failures="ReportBatchItemFailures" in (p.get("FunctionResponseTypes") or []),
            bisect_batch_on_function_error=truthy(p.get("BisectBatchOnFunctionError", False)),
            maximum_retry_attempts=int(p.get("MaximumRetryAttempts", -1)),
            maximum_record_age_s=int(p.get("MaximumRecordAgeInSeconds", -1)),
            on_failure_queue_logical_id=failure_qid,
            enabled=truthy(p.get("Enabled", True)),
        ))
    return out


_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_RATE_UNITS = {"minute": 60, "hour": 3600, "day": 86_400}


def rate_seconds(expression: str) -> int:
    """Seconds between two runs of an EventBridge ``rate(N unit)`` expression (1 takes the
    singular, more the plural, as EventBridge insists). ``cron(...)`` has no local twin."""
    m = _RATE.match(str(expression).strip())
    n = int(m.group(1)) if m else 0
    if not m or n < 1 or (n == 1) != (not m.group(2).endswith("s")):
        raise TemplateError(f"schedule {expression!r}: only rate(N unit) expressions run locally, "
                            "and EventBridge refuses this one")
    return n * _RATE_UNITS[m.group(2).rstrip("s")]


def _schedule_events(tpl: Template, fid: str) -> list[ScheduleEvent]:
    out = []
    for ename, ev in (tpl.properties(fid).get("Events") or {}).items():
        if ev.get("Type") != "Schedule":
            continue
        p = ev.get("Properties") or {}
        expression = str(p.get("Schedule", ""))
        rule = f"{tpl.stack_name}-{fid}{ename}"
        out.append(ScheduleEvent(ename, expression, float(rate_seconds(expression)), rule,
                                 f"arn:aws:events:{tpl.region}:{tpl.account_id}:rule/{rule}",
                                 enabled=truthy(p.get("Enabled", True))))
    return out


def _keys(tpl: Template) -> dict[str, KmsKeySpec]:
    keys = {kid: KmsKeySpec(kid, tpl.properties(kid), []) for kid in tpl.resources_of_type("AWS::KMS::Key")}
    for aid in tpl.resources_of_type("AWS::KMS::Alias"):
        props = tpl.properties(aid)
        target = str(props.get("TargetKeyId", ""))
        key = next((k for k in keys.values() if key_id_placeholder(k.logical_id) in target), None)
        if key is None:
            raise TemplateError(f"{aid}: target key {target} is not in the template")
        key.aliases.append(str(props["AliasName"]))
    return keys


def _buckets(tpl: Template) -> dict[str, BucketSpec]:
    buckets = {bid: BucketSpec(bid, tpl.physical_name(bid), tpl.properties(bid), [])
               for bid in tpl.resources_of_type("AWS::S3::Bucket")}
    for pid in tpl.resources_of_type("AWS::S3::BucketPolicy"):
        props = tpl.properties(pid)
        bucket = next((b for b in buckets.values() if b.name == props.get("Bucket")), None)
        if bucket is None:
            raise TemplateError(f"{pid}: bucket {props.get('Bucket')} is not in the template")
        bucket.policies.append(props["PolicyDocument"])
    return buckets


def read_stack(template_path: str | Path = DEFAULT_TEMPLATE, parameters: dict[str, str] | None = None,
               visibility_timeout: int | None = None, batching_window: float | None = None,
               stack_name: str = "audit-receiver-local", digest_period: int | None = None,
               schedule_interval: float | None = None) -> Stack:
    """Evaluate the template; no endpoint is contacted."""
    tpl = Template(load_template(template_path), parameters=dict(parameters or {}), stack_name=stack_name)

    tables = tpl.resources_of_type("AWS::DynamoDB::Table")
    if len(tables) != 1:
        raise TemplateError(f"expected one AWS::DynamoDB::Table, found {tables}")
    table_id = tables[0]
    tprops = tpl.properties(table_id)
    ttl = tprops.get("TimeToLiveSpecification") or {}
    ttl_attr = ttl.get("AttributeName") if truthy(ttl.get("Enabled", False)) else None

    queues: dict[str, QueueSpec] = {}
    for qid in tpl.resources_of_type("AWS::SQS::Queue"):
        props = tpl.properties(qid)
        attrs = {}
        for prop, attr in _QUEUE_ATTRS.items():
            if prop in props:
                v = props[prop]
                attrs[attr] = ("true" if truthy(v) else "false") if isinstance(v, bool) or prop in (
                    "FifoQueue", "ContentBasedDeduplication", "SqsManagedSseEnabled") else str(v)
        if "RedrivePolicy" in props:
            rp = props["RedrivePolicy"]
            rp = json.loads(rp) if isinstance(rp, str) else rp
            attrs["RedrivePolicy"] = json.dumps({"deadLetterTargetArn": rp["deadLetterTargetArn"],
                                                 "maxReceiveCount": int(rp["maxReceiveCount"])})
        if "RedriveAllowPolicy" in props:
            rap = props["RedriveAllowPolicy"]
            attrs["RedriveAllowPolicy"] = rap if isinstance(rap, str) else json.dumps(rap)
        if attrs.get("FifoQueue") == "false":
            del attrs["FifoQueue"]  # SQS rejects FifoQueue=false on create
        queues[qid] = QueueSpec(qid, tpl.physical_name(qid), tpl.arn(qid), attrs)

    # The receiver is the function with an SQS event; the archiver, the one with the table's
    # stream event (a template may have none).
    funcs = tpl.resources_of_type("AWS::Serverless::Function")
    kinds = {fid: {ev.get("Type") for ev in ((tpl.resources[fid].get("Properties") or {}).get("Events") or {}).values()}
             for fid in funcs}
    receivers = [fid for fid in funcs if "SQS" in kinds[fid]]
    consumers = [fid for fid in funcs if "DynamoDB" in kinds[fid]]
    # The stream's consumers told apart by what they write: the archiver ARCHIVE_BUCKET, the
    # OCSF writer OCSF_BUCKET (a template with one consumer: that one is the archiver).
    def writes(fid: str, variable: str) -> bool:
        env = ((tpl.properties(fid).get("Environment") or {}).get("Variables") or {})
        return variable in env
    writers = [fid for fid in consumers if len(consumers) > 1 and writes(fid, "OCSF_BUCKET")]
    archivers = [fid for fid in consumers if fid not in writers]
    if len(receivers) != 1 or len(archivers) > 1 or len(writers) > 1:
        raise TemplateError(f"expected one AWS::Serverless::Function with an SQS event and at most one with a "
                            f"DynamoDB stream event beside the OCSF writer, found {kinds}")
    fid = receivers[0]
    fprops = tpl.properties(fid)
    fn = _function_spec(tpl, fid)
    for ename, ev in (fprops.get("Events") or {}).items():
        if ev.get("Type") != "SQS":
            continue
        p = ev.get("Properties") or {}
        q_arn = p.get("Queue")
        qid = next((q.logical_id for q in queues.values() if q.arn == q_arn), None)
        if qid is None:
            raise TemplateError(f"{fid}.Events.{ename}: queue {q_arn} is not in the template")
        scaling = p.get("ScalingConfig") or {}
        fn.events.append(EventSourceMapping(
            queue_logical_id=qid,
            batch_size=int(p.get("BatchSize", 10)),
            batching_window_s=float(p.get("MaximumBatchingWindowInSeconds", 0)),
            maximum_concurrency=int(scaling["MaximumConcurrency"]) if "MaximumConcurrency" in scaling else None,
            report_batch_item_failures="ReportBatchItemFailures" in (p.get("FunctionResponseTypes") or []),
            enabled=truthy(p.get("Enabled", True)),
        ))
    if not fn.events:
        raise TemplateError(f"{fid} has no SQS event")

    archiver = None
    if archivers:
        archiver = _function_spec(tpl, archivers[0])
        archiver.stream_events = _stream_events(tpl, archivers[0], table_id, queues)
        archiver.schedule_events = _schedule_events(tpl, archivers[0])
    ocsf_writer = None
    if writers:
        ocsf_writer = _function_spec(tpl, writers[0])
        ocsf_writer.stream_events = _stream_events(tpl, writers[0], table_id, queues)
    stack = Stack(str(template_path), tpl.parameter_values, table_id, tpl.physical_name(table_id),
                  ttl_attr, queues, fn, {}, archiver, _buckets(tpl), keys=_keys(tpl), roles=_roles(tpl),
                  ocsf_writer=ocsf_writer)
    src = stack.source_queue
    if visibility_timeout is not None:
        stack.scaled["VisibilityTimeout"] = {"template": src.visibility_timeout, "local": visibility_timeout}
        for q in stack.event_queues:
            q.attributes["VisibilityTimeout"] = str(visibility_timeout)
    if batching_window is not None:
        stack.scaled["MaximumBatchingWindowInSeconds"] = {"template": stack.esm.batching_window_s,
                                                          "local": batching_window}
        for ev in fn.events:
            ev.batching_window_s = float(batching_window)
    if digest_period is not None and archiver is not None:
        stack.scaled["DIGEST_PERIOD_SECONDS"] = {"template": archiver.environment.get("DIGEST_PERIOD_SECONDS"),
                                                 "local": digest_period}
        archiver.environment["DIGEST_PERIOD_SECONDS"] = str(digest_period)
    if schedule_interval is not None and archiver is not None:
        for ev in archiver.schedule_events:
            stack.scaled[ev.name] = {"template": ev.expression, "local": f"every {schedule_interval:g} s"}
            ev.interval_s = float(schedule_interval)
    stack._tpl = tpl  # type: ignore[attr-defined]  # for create_stack
    stack._table_props = tprops  # type: ignore[attr-defined]
    return stack


def _client(service: str, endpoint: str):
    import boto3
    from botocore.config import Config

    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test",
                        config=Config(retries={"max_attempts": 5, "mode": "standard"},
                                      max_pool_connections=32))


def _replace(value: Any, old: str, new: str) -> Any:
    """``value`` with ``old`` replaced by ``new`` in every string it holds."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replace(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _replace(v, old, new) for k, v in value.items()}
    return value


def create_roles(stack: Stack, endpoint: str) -> None:
    """The template's IAM roles (name and trust policy; no permissions: moto enforces none
    locally), their RoleIds put wherever the template refers to them (the table's tag
    audit:receiver-role-id), and each function given its role's credentials as Lambda does:
    AssumeRole with the function's name as the session name. An existing role of the same name
    is taken as it is (a test may have made it)."""
    iam, sts = _client("iam", endpoint), _client("sts", endpoint)
    tpl = stack._tpl  # type: ignore[attr-defined]
    for role in stack.roles.values():
        try:
            role.role_id = iam.create_role(RoleName=role.name,
                                           AssumeRolePolicyDocument=json.dumps(role.trust))["Role"]["RoleId"]
        except iam.exceptions.EntityAlreadyExistsException:
            role.role_id = iam.get_role(RoleName=role.name)["Role"]["RoleId"]
        tpl.created[role.logical_id] = role.role_id
        placeholder = role_id_placeholder(role.logical_id)
        stack._table_props = _replace(stack._table_props, placeholder, role.role_id)  # type: ignore[attr-defined]
        for fn in stack.functions:
            if fn:
                fn.environment = _replace(fn.environment, placeholder, role.role_id)
    for fn in stack.functions:
        if fn and fn.role_logical_id:
            c = sts.assume_role(RoleArn=stack.roles[fn.role_logical_id].arn, RoleSessionName=fn.name)["Credentials"]
            fn.credentials = {"AWS_ACCESS_KEY_ID": c["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": c["SecretAccessKey"],
                              "AWS_SESSION_TOKEN": c["SessionToken"]}


def create_stack(stack: Stack, endpoint: str) -> Stack:
    """Create the roles, the table, the queues, the buckets and the keys on the endpoint; fills
    in the role ids and the functions' credentials, the queue URLs, the stream's ARN and the
    keys' ids and ARNs."""
    create_roles(stack, endpoint)
    ddb = _client("dynamodb", endpoint)
    props = stack._table_props  # type: ignore[attr-defined]
    args: dict[str, Any] = {
        "TableName": stack.table_name,
        "KeySchema": props["KeySchema"],
        "AttributeDefinitions": props["AttributeDefinitions"],
        "BillingMode": props.get("BillingMode", "PROVISIONED"),
    }
    if "StreamSpecification" in props:
        # CloudFormation's StreamSpecification has the view type only; the API's says enabled.
        args["StreamSpecification"] = {"StreamEnabled": True,
                                       "StreamViewType": props["StreamSpecification"]["StreamViewType"]}
    if args["BillingMode"] == "PROVISIONED":
        pt = props.get("ProvisionedThroughput") or {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
        args["ProvisionedThroughput"] = {k: int(v) for k, v in pt.items()}
    sse = props.get("SSESpecification")
    if sse:
        args["SSESpecification"] = {"Enabled": truthy(sse.get("SSEEnabled", False)),
                                    **({"SSEType": sse["SSEType"]} if "SSEType" in sse else {})}
    for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes", "DeletionProtectionEnabled", "TableClass", "Tags"):
        if key in props:
            args[key] = props[key]
    for index in args.get("GlobalSecondaryIndexes", []):
        if "ProvisionedThroughput" in index:  # TableBillingMode PROVISIONED: numbers, not strings
            index["ProvisionedThroughput"] = {k: int(v) for k, v in index["ProvisionedThroughput"].items()}
    ddb.create_table(**args)
    ddb.get_waiter("table_exists").wait(TableName=stack.table_name,
                                        WaiterConfig={"Delay": 0.2, "MaxAttempts": 50})
    stack.stream_arn = ddb.describe_table(TableName=stack.table_name)["Table"].get("LatestStreamArn", "")
    if stack.table_ttl_attribute:
        ddb.update_time_to_live(TableName=stack.table_name, TimeToLiveSpecification={
            "Enabled": True, "AttributeName": stack.table_ttl_attribute})
    pitr = props.get("PointInTimeRecoverySpecification") or {}
    if truthy(pitr.get("PointInTimeRecoveryEnabled", False)):
        ddb.update_continuous_backups(TableName=stack.table_name, PointInTimeRecoverySpecification={
            "PointInTimeRecoveryEnabled": True})

    sqs = _client("sqs", endpoint)
    # Dead-letter queues first: a redrive policy names its target by ARN.
    order = sorted(stack.queues.values(), key=lambda q: "RedrivePolicy" in q.attributes)
    for q in order:
        q.url = sqs.create_queue(QueueName=q.name, Attributes=q.attributes)["QueueUrl"]
    # The functions' environments name queues by their AWS URL ({Ref: AuditDeadLetterQueue});
    # locally the same queue has the endpoint's URL.
    tpl = stack._tpl  # type: ignore[attr-defined]
    aws_urls = {tpl.queue_url(q.name): q.url for q in stack.queues.values()}
    for fn in stack.functions:
        for name, value in list((fn.environment if fn else {}).items()):
            if value in aws_urls:
                fn.environment[name] = aws_urls[value]

    s3 = _client("s3", endpoint)
    for bucket in stack.buckets.values():
        create_bucket(s3, bucket)

    # KMS keys: the service picks the id, so the template's references to a key (DIGEST_KEY_ID)
    # hold a placeholder until now (local/cfn.py).
    kms = _client("kms", endpoint)
    for key in stack.keys.values():
        create_key(kms, key)
        tpl.created[key.logical_id] = key.key_id
        for fn in stack.functions:
            for name, value in list((fn.environment if fn else {}).items()):
                fn.environment[name] = value.replace(key_id_placeholder(key.logical_id), key.key_id)
    return stack


def create_key(kms, key: KmsKeySpec) -> None:
    """One AWS::KMS::Key as the template defines it: key spec, usage, description and key policy
    (moto stores the policy; it enforces none of it, see docs/local.md), its aliases, disabled
    when ``Enabled`` is false. ``PendingWindowInDays`` only matters on a deletion: nothing to
    create."""
    p = key.properties
    args: dict[str, Any] = {"KeyUsage": p.get("KeyUsage", "ENCRYPT_DECRYPT"),
                            "KeySpec": p.get("KeySpec", "SYMMETRIC_DEFAULT")}
    if "Description" in p:
        args["Description"] = str(p["Description"])
    if "KeyPolicy" in p:
        policy = p["KeyPolicy"]
        args["Policy"] = policy if isinstance(policy, str) else json.dumps(policy)
    meta = kms.create_key(**args)["KeyMetadata"]
    key.key_id, key.arn = meta["KeyId"], meta["Arn"]
    if not truthy(p.get("Enabled", True)):
        kms.disable_key(KeyId=key.key_id)
    for alias in key.aliases:
        kms.create_alias(AliasName=alias, TargetKeyId=key.key_id)


def create_bucket(s3, bucket: BucketSpec) -> None:
    """One AWS::S3::Bucket with the settings the template gives it (moto keeps every one of them,
    and enforces Object Lock: a locked version cannot be deleted)."""
    p = bucket.properties
    locked = truthy(p.get("ObjectLockEnabled", False))
    s3.create_bucket(Bucket=bucket.name, **({"ObjectLockEnabledForBucket": True} if locked else {}))
    if "VersioningConfiguration" in p:
        s3.put_bucket_versioning(Bucket=bucket.name,
                                 VersioningConfiguration={"Status": p["VersioningConfiguration"]["Status"]})
    lock = p.get("ObjectLockConfiguration")
    if lock:
        conf: dict[str, Any] = {"ObjectLockEnabled": lock.get("ObjectLockEnabled", "Enabled")}
        retention = (lock.get("Rule") or {}).get("DefaultRetention")
        if retention:
            conf["Rule"] = {"DefaultRetention": {"Mode": retention["Mode"], **{
                k: int(retention[k]) for k in ("Days", "Years") if k in retention}}}
        s3.put_object_lock_configuration(Bucket=bucket.name, ObjectLockConfiguration=conf)
    sse = (p.get("BucketEncryption") or {}).get("ServerSideEncryptionConfiguration")
    if sse:
        s3.put_bucket_encryption(Bucket=bucket.name, ServerSideEncryptionConfiguration={"Rules": [
            {"ApplyServerSideEncryptionByDefault": r["ServerSideEncryptionByDefault"],
             **({"BucketKeyEnabled": truthy(r["BucketKeyEnabled"])} if "BucketKeyEnabled" in r else {})}
            for r in sse]})
    if "PublicAccessBlockConfiguration" in p:
        s3.put_public_access_block(Bucket=bucket.name, PublicAccessBlockConfiguration={
            k: truthy(v) for k, v in p["PublicAccessBlockConfiguration"].items()})
    if "OwnershipControls" in p:
        s3.put_bucket_ownership_controls(Bucket=bucket.name, OwnershipControls=p["OwnershipControls"])
    lifecycle = p.get("LifecycleConfiguration")
    if lifecycle:
        extra = {}
        if "TransitionDefaultMinimumObjectSize" in lifecycle:
            extra["TransitionDefaultMinimumObjectSize"] = lifecycle["TransitionDefaultMinimumObjectSize"]
        s3.put_bucket_lifecycle_configuration(Bucket=bucket.name, LifecycleConfiguration={
            "Rules": [_lifecycle_rule(r) for r in lifecycle["Rules"]]}, **extra)
    # The bucket policies, less their TLS-only statements: local/motoserver.py evaluates bucket
    # policies as S3 does (who asks, the conditions, the exact action: only the archiver's role
    # writes the archive), and the local endpoint is plain HTTP on loopback (the queue policies
    # are not created locally at all).
    statements = [st for policy in bucket.policies for st in _as_list(policy.get("Statement"))
                  if "aws:SecureTransport" not in json.dumps(st.get("Condition") or {})]
    if statements:
        s3.put_bucket_policy(Bucket=bucket.name, Policy=json.dumps({"Version": "2012-10-17",
                                                                    "Statement": statements}))


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value] if value else []


def _lifecycle_rule(rule: dict) -> dict:
    """CloudFormation's lifecycle rule in the S3 API's shape."""
    out: dict[str, Any] = {"ID": rule.get("Id", ""), "Status": rule["Status"],
                           "Filter": {"Prefix": rule.get("Prefix", "")}}
    if "Transitions" in rule:
        out["Transitions"] = [{"Days": int(t["TransitionInDays"]), "StorageClass": t["StorageClass"]}
                              for t in rule["Transitions"]]
    if "NoncurrentVersionTransitions" in rule:
        out["NoncurrentVersionTransitions"] = [
            {"NoncurrentDays": int(t["TransitionInDays"]), "StorageClass": t["StorageClass"]}
            for t in rule["NoncurrentVersionTransitions"]]
    if "ExpirationInDays" in rule:
        out["Expiration"] = {"Days": int(rule["ExpirationInDays"])}
    if "ExpiredObjectDeleteMarker" in rule:
        out["Expiration"] = {"ExpiredObjectDeleteMarker": truthy(rule["ExpiredObjectDeleteMarker"])}
    if "NoncurrentVersionExpiration" in rule:
        out["NoncurrentVersionExpiration"] = {
            "NoncurrentDays": int(rule["NoncurrentVersionExpiration"]["NoncurrentDays"])}
    if "AbortIncompleteMultipartUpload" in rule:
        out["AbortIncompleteMultipartUpload"] = {
            "DaysAfterInitiation": int(rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"])}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoint", default=os.environ.get("AWS_ENDPOINT_URL"),
                    help="local AWS endpoint (moto_server); without it the resolved stack is only printed")
    ap.add_argument("--template", default=str(DEFAULT_TEMPLATE))
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="template parameter override (default: the template's Default)")
    ap.add_argument("--visibility-timeout", type=int, metavar="SECONDS",
                    help="TEST SCALING: override the source queue's VisibilityTimeout")
    ap.add_argument("--batching-window", type=float, metavar="SECONDS",
                    help="TEST SCALING: override MaximumBatchingWindowInSeconds")
    ap.add_argument("--digest-period", type=int, metavar="SECONDS",
                    help="TEST SCALING: override the archiver's DIGEST_PERIOD_SECONDS")
    ap.add_argument("--schedule-interval", type=float, metavar="SECONDS",
                    help="TEST SCALING: run the archiver's Schedule event every SECONDS")
    args = ap.parse_args(argv)
    params = dict(p.split("=", 1) for p in args.param)
    try:
        stack = read_stack(args.template, params, args.visibility_timeout, args.batching_window,
                           digest_period=args.digest_period, schedule_interval=args.schedule_interval)
        if args.endpoint:
            create_stack(stack, args.endpoint)
    except TemplateError as e:
        print(f"template error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(stack.to_json(), indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
