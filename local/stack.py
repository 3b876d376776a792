"""Create the table and the queues of template.yaml on a local AWS endpoint (moto_server).

    python -m local.stack --endpoint http://127.0.0.1:5000 [--param Name=Value ...]
                          [--visibility-timeout SECONDS] [--batching-window SECONDS]

Everything comes from the template: table key schema, billing mode, TTL, SSE and point-in-time
recovery; queue names, FIFO, visibility timeout, retention, redrive policy (dead-letter queue and
maxReceiveCount) and redrive-allow policy; the function's SQS event (BatchSize,
MaximumBatchingWindowInSeconds, ScalingConfig.MaximumConcurrency, FunctionResponseTypes),
its Timeout and its environment variables.

Two flags scale timings down for tests, and only when given: ``--visibility-timeout`` (so
that a failed record returns, and a poison one reaches the dead-letter queue, in seconds rather
than minutes) and ``--batching-window``. Without them every value is the template's.
Prints the resolved stack as JSON (queue URLs, table name, event source mapping settings).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from local.cfn import Template, TemplateError, load_template, truthy

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
class FunctionSpec:
    logical_id: str
    name: str
    timeout_s: int
    memory_mb: int
    environment: dict[str, str]
    events: list[EventSourceMapping] = field(default_factory=list)


@dataclass
class Stack:
    template_path: str
    parameters: dict[str, Any]
    table_logical_id: str
    table_name: str
    table_ttl_attribute: str | None
    queues: dict[str, QueueSpec]
    function: FunctionSpec
    scaled: dict[str, Any]  # timings changed by flags (empty when none)

    @property
    def source_queue(self) -> QueueSpec:
        return self.queues[self.function.events[0].queue_logical_id]

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

    def to_json(self) -> dict:
        d = asdict(self)
        d["source_queue_url"] = self.source_queue.url
        dlq = self.dead_letter_queue
        d["dead_letter_queue_url"] = dlq.url if dlq else None
        return d


def read_stack(template_path: str | Path = DEFAULT_TEMPLATE, parameters: dict[str, str] | None = None,
               visibility_timeout: int | None = None, batching_window: float | None = None,
               stack_name: str = "audit-receiver-local") -> Stack:
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

    funcs = tpl.resources_of_type("AWS::Serverless::Function")
    if len(funcs) != 1:
        raise TemplateError(f"expected one AWS::Serverless::Function, found {funcs}")
    fid = funcs[0]
    fprops = tpl.properties(fid)
    env = {k: str(v) for k, v in ((fprops.get("Environment") or {}).get("Variables") or {}).items()}
    # Lambda turns LoggingConfig into the runtime's environment; do the same locally.
    logging_config = fprops.get("LoggingConfig") or {}
    if "LogFormat" in logging_config:
        env.setdefault("AWS_LAMBDA_LOG_FORMAT", str(logging_config["LogFormat"]))
    if "ApplicationLogLevel" in logging_config and logging_config.get("LogFormat") == "JSON":
        env.setdefault("AWS_LAMBDA_LOG_LEVEL", str(logging_config["ApplicationLogLevel"]))
    fn = FunctionSpec(fid, tpl.physical_name(fid), int(fprops.get("Timeout", 3)),
                      int(fprops.get("MemorySize", 128)), env)
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

    stack = Stack(str(template_path), tpl.parameter_values, table_id, tpl.physical_name(table_id),
                  ttl_attr, queues, fn, {})
    src = stack.source_queue
    if visibility_timeout is not None:
        stack.scaled["VisibilityTimeout"] = {"template": src.visibility_timeout, "local": visibility_timeout}
        src.attributes["VisibilityTimeout"] = str(visibility_timeout)
    if batching_window is not None:
        stack.scaled["MaximumBatchingWindowInSeconds"] = {"template": stack.esm.batching_window_s,
                                                          "local": batching_window}
        stack.esm.batching_window_s = float(batching_window)
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


def create_stack(stack: Stack, endpoint: str) -> Stack:
    """Create the table and the queues on the endpoint; fills in the queue URLs."""
    ddb = _client("dynamodb", endpoint)
    props = stack._table_props  # type: ignore[attr-defined]
    args: dict[str, Any] = {
        "TableName": stack.table_name,
        "KeySchema": props["KeySchema"],
        "AttributeDefinitions": props["AttributeDefinitions"],
        "BillingMode": props.get("BillingMode", "PROVISIONED"),
    }
    if args["BillingMode"] == "PROVISIONED":
        pt = props.get("ProvisionedThroughput") or {"ReadCapacityUnits": 5, "WriteCapacityUnits": 5}
        args["ProvisionedThroughput"] = {k: int(v) for k, v in pt.items()}
    sse = props.get("SSESpecification")
    if sse:
        args["SSESpecification"] = {"Enabled": truthy(sse.get("SSEEnabled", False)),
                                    **({"SSEType": sse["SSEType"]} if "SSEType" in sse else {})}
    for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes", "StreamSpecification",
                "DeletionProtectionEnabled"):
        if key in props:
            args[key] = props[key]
    ddb.create_table(**args)
    ddb.get_waiter("table_exists").wait(TableName=stack.table_name,
                                        WaiterConfig={"Delay": 0.2, "MaxAttempts": 50})
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
    # The function's environment names queues by their AWS URL ({Ref: AuditDeadLetterQueue});
    # locally the same queue has the endpoint's URL.
    tpl = stack._tpl  # type: ignore[attr-defined]
    aws_urls = {tpl.queue_url(q.name): q.url for q in stack.queues.values()}
    for name, value in list(stack.function.environment.items()):
        if value in aws_urls:
            stack.function.environment[name] = aws_urls[value]
    return stack


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
    args = ap.parse_args(argv)
    params = dict(p.split("=", 1) for p in args.param)
    try:
        stack = read_stack(args.template, params, args.visibility_timeout, args.batching_window)
        if args.endpoint:
            create_stack(stack, args.endpoint)
    except TemplateError as e:
        print(f"template error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(stack.to_json(), indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
