"""`make cost`: what keeping events a year costs, from the request counts measured on the local
stack (bench/cost/counts.json, `make cost-measure`) and the dated price table
(bench/cost/prices.json), for each configuration at 1 million, 100 million and 10 billion events
a year, fixed costs apart, CloudTrail Lake's price beside (docs/operations.md "Cost of keeping
the trail" is this output).

How the counts become a year in AWS:

* **per event**: each program's requests per event were measured at a trickle (one event per
  receive and per archive object) and in full batches. A request's count per event is taken as
  ``a + b / k``, ``k`` the events per receive (the receiver's side) or per archive object (the
  archiver's, the sealer's and the witness's side; the records per invocation on the OCSF
  writer's), ``a`` and ``b`` solved from the two measurements; ``k`` in AWS follows from the
  rate (events a second) and the configuration's batching windows;
* **fixed**: an AWS hour is one sealing run and eleven idle runs of the five-minute schedule, one
  witness cosignature, with the requests of each kind of run as measured; Lambda's pollers on the
  two queues; the keys, alarms (a metric-math alarm counted per metric it reads), custom metrics
  and the dashboard of template.yaml evaluated with the configuration's parameters (its indexes
  set the write units an event and the storage too).

    python -m local.cost [--counts bench/cost/counts.json] [--prices bench/cost/prices.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COUNTS = ROOT / "bench" / "cost" / "counts.json"
PRICES = ROOT / "bench" / "cost" / "prices.json"
SECONDS_A_YEAR = 365 * 86400
HOURS_A_YEAR = 8760
VOLUMES = (1_000_000, 100_000_000, 10_000_000_000)
RECEIVER_SIDE = ("producer", "receiver-poller", "receiver")
ARCHIVER_SIDE = ("archiver", "sealer", "witness")
# The OCSF copy's writer (docs/ocsf.md): a second consumer of the stream, its own batches.
OCSF_SIDE = ("ocsf-writer",)

# Configurations: template.yaml's parameters (the others at their defaults) and what each gives
# up. What the model prices (the windows, memory, hot window, indexes, alarms, dashboard) is read
# from the template evaluated with these parameters (``configuration``), never written twice.
# The cheapest stays on demand: provisioned capacity (TableBillingMode) is priced by the hour at
# the peak rate auto scaling must follow, which counts per event do not measure (docs/operations.md).
CONFIGURATIONS = {
    "default": {
        "template_parameters": {},
        "gives_up": "nothing",
    },
    "cheapest": {
        "template_parameters": {"BatchingWindow": "20", "ArchiveBatchingWindow": "300", "MemorySize": "128",
                                "ArchiverMemorySize": "256", "RetentionDays": "7", "LookupIndexes": "none",
                                "Dashboard": "false"},
        "gives_up": "an event reaches the table up to 20 s later and the archive up to 5 minutes later; "
                    "the table keeps 7 days: `auditctl query` and the viewer read an older range from the archive "
                    "(every period received since, through its index: seconds to a minute, not milliseconds), "
                    "SQL through Athena (`make sql` locally); a lookup by actor, action or resource reads every event "
                    "of its range from the time index (no byActor, byAction, byResource); no dashboard "
                    "(the alarms stay); the archiver at 256 MB, whose sealing keeps up with about 4,800 events/s, "
                    "not 18,000 (docs/scaling.md)",
    },
}
TEMPLATE = ROOT / "template.yaml"


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def template_counts(path: Path = TEMPLATE, parameters: dict | None = None) -> dict:
    """What template.yaml creates with ``parameters`` (the others at their defaults), as the model
    prices it: KMS keys, alarms and the metrics they read (one for a plain alarm, each
    ``MetricStat`` of a metric-math alarm), dashboards, the table's indexes (``indexes``, the time
    index included) and billing mode, the functions' memory and batching windows, and the days
    the table keeps an item (None: every item kept)."""
    from local.cfn import Template, load_template

    tpl = Template(load_template(path), parameters or {})
    alarms = [tpl.resources[lid].get("Properties", {}) for lid in tpl.resources_of_type("AWS::CloudWatch::Alarm")]
    metrics = sum(sum(1 for m in a["Metrics"] if "MetricStat" in m) if "Metrics" in a else 1 for a in alarms)
    table = tpl.properties("AuditMessagesTable")
    receiver, archiver = tpl.properties("AuditReceiverFunction"), tpl.properties("AuditArchiverFunction")
    writer = tpl.properties("AuditOcsfWriterFunction")
    writer_batch = {int(e["Properties"]["BatchSize"]) for e in writer["Events"].values() if e["Type"] == "DynamoDB"}

    def window(function: dict, kind: str) -> int:
        windows = {int(e["Properties"].get("MaximumBatchingWindowInSeconds", 0))
                   for e in function["Events"].values() if e["Type"] == kind}
        if len(windows) != 1:
            raise ValueError(f"expected one batching window of the {kind} events, found {windows}")
        return windows.pop()

    days = int(tpl.parameter_values["RetentionDays"])
    return {"kms_keys": len(tpl.resources_of_type("AWS::KMS::Key")), "alarms": len(alarms),
            "alarm_metrics": metrics, "dashboards": len(tpl.resources_of_type("AWS::CloudWatch::Dashboard")),
            "indexes": len(table.get("GlobalSecondaryIndexes", [])), "billing_mode": table["BillingMode"],
            "sqs_window_s": window(receiver, "SQS"), "archive_window_s": window(archiver, "DynamoDB"),
            "receiver_memory_mb": int(receiver["MemorySize"]), "archiver_memory_mb": int(archiver["MemorySize"]),
            "ocsf_window_s": window(writer, "DynamoDB"), "ocsf_memory_mb": int(writer["MemorySize"]),
            "ocsf_batch_size": writer_batch.pop(),
            "table_days": days or None, "parameter_values": tpl.parameter_values}


def configuration(name: str, path: Path = TEMPLATE) -> dict:
    """Configuration ``name`` as the model prices it: its parameters evaluated by template.yaml."""
    config = CONFIGURATIONS[name]
    counts = template_counts(path, config["template_parameters"])
    if counts["billing_mode"] != "PAY_PER_REQUEST":
        raise ValueError(f"{name}: the model prices on-demand capacity only (see CONFIGURATIONS)")
    return {**config, **counts}


def describe(config: dict) -> str:
    """A configuration's values of the parameters any configuration sets, and which are defaults."""
    names = dict.fromkeys(k for c in CONFIGURATIONS.values() for k in c["template_parameters"])
    values = ", ".join(f"{k} {config['parameter_values'][k]}" for k in names)
    given = config["template_parameters"]
    return values + (" (the template's defaults)" if not given else ", the others at their defaults")


def per_event_at(c1: float, k1: float, c2: float, k2: float, k: float) -> float:
    """Requests per event at ``k`` events per batch, from ``c1`` measured at ``k1`` and ``c2`` at
    ``k2``: ``a + b / k`` through both points (a fixed part per event and a part per batch)."""
    if abs(1 / k1 - 1 / k2) < 1e-9:
        return c1
    b = (c1 - c2) / (1 / k1 - 1 / k2)
    a = c1 - b / k1
    return max(a + b / k, 0.0)


def per_event_by_object_and_period(c1: float, k1: float, e1: float, c2: float, k2: float, e2: float,
                                   k: float, e: float) -> float:
    """Requests per event of the sealing and witness runs: ``A / k + P / e``, a part per archive
    object (``k`` events an object) and a part per period with events (``e`` events a period),
    solved from the two measurements (``c1`` at ``k1``, ``e1``; ``c2`` at ``k2``, ``e2``). When the
    two parts cannot both be non-negative, the one that fits the trickle's count is kept."""
    det = (1 / k1) * (1 / e2) - (1 / k2) * (1 / e1)
    if abs(det) > 1e-12:
        a = (c1 / e2 - c2 / e1) / det
        p = (c2 / k1 - c1 / k2) / det
        if a >= 0 and p >= 0:
            return a / k + p / e
    # One part only: the one closer to the second measurement.
    by_object, by_period = c1 * k1 / k, c1 * e1 / e
    at2_object, at2_period = c1 * k1 / k2, c1 * e1 / e2
    return by_object if abs(at2_object - c2) <= abs(at2_period - c2) else by_period


def price_key(api: str) -> str | None:
    """The price line one request is charged on (None: not charged)."""
    service, _, rest = api.partition(" ")
    name = rest.split(" ")[0]
    if service == "sqs":
        return "sqs_request"
    if service == "dynamodb":
        if name in ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"):
            return "dynamodb_write_request_unit"
        if name in ("GetItem", "Query", "Scan", "BatchGetItem"):
            return "dynamodb_read_request_unit"
        return None
    if service == "s3":
        if name.startswith(("Put", "Copy", "List", "Post", "CreateMultipart", "UploadPart", "CompleteMultipart")):
            return "s3_put_class_request"
        if name.startswith("Delete"):
            return None
        return "s3_get_class_request"
    if service == "kms":
        return "kms_asymmetric_request" if name in ("Sign", "Verify", "GetPublicKey") else "kms_symmetric_request"
    return None  # sts, dynamodb streams read by Lambda: not charged


LINE = {
    "sqs_request": "SQS requests",
    "dynamodb_write_request_unit": "DynamoDB writes",
    "dynamodb_read_request_unit": "DynamoDB reads",
    "s3_put_class_request": "S3 PUT/LIST requests",
    "s3_get_class_request": "S3 GET/HEAD requests",
    "kms_asymmetric_request": "KMS requests",
    "kms_symmetric_request": "KMS requests",
}


# What ``fixed`` reads of the template, from the configuration (or, without it, the model's).
TEMPLATE_KEYS = ("kms_keys", "alarm_metrics", "dashboards")


class Model:
    def __init__(self, counts: dict, prices: dict, template: dict | None = None):
        self.counts = counts
        self.template = template
        self.p = {k: v["usd"] for k, v in prices["prices"].items()}
        self.a = {k: v["value"] for k, v in prices["assumptions"].items()}
        trickle, batch = counts["trickle"], counts["batch"]
        self.k_receive = (self._events_per_receive(trickle), self._events_per_receive(batch))
        self.k_object = (trickle["events_per_object"], batch["events_per_object"])
        # Records per OCSF writer invocation in each phase (its batches, as the trigger gave them).
        self.k_ocsf = tuple(p["records_invoked"]["ocsf-writer"] / max(p["invocations"]["ocsf-writer"], 1)
                            for p in (trickle, batch))
        period = counts["local"]["digest_period_s"]
        self.e_period = tuple(p["events"] / max(p["seconds"] / period, 1) for p in (trickle, batch))

    @staticmethod
    def _events_per_receive(phase: dict) -> float:
        receives = phase["counts"].get("receiver-poller", {}).get("sqs ReceiveMessage", {}).get("requests", 0)
        return phase["events"] / max(receives, 1)

    # ------------------------------------------------------------------------------------------
    def batches(self, config: dict, events: int) -> tuple[float, float, float]:
        """Events per receive, per archive object and per OCSF writer batch in AWS at ``events``
        a year (each stream shard batches on its own, within the consumer's window)."""
        rate = events / SECONDS_A_YEAR
        k_receive = min(max(rate * max(config["sqs_window_s"], self.a["sqs_receive_round_trip_seconds"]), 1), 10)
        shards = max(1, math.ceil(rate * (1 + config["indexes"]) / self.a["dynamodb_wcu_per_partition"]))
        k_object = min(max(rate / shards * config["archive_window_s"], 1), 1000)
        k_ocsf = min(max(rate / shards * config["ocsf_window_s"], 1), config["ocsf_batch_size"])
        return k_receive, k_object, k_ocsf

    def _per_event(self, program: str, api: str, field: str, k: float, ks: tuple[float, float],
                   e: float | None = None) -> float:
        t = self.counts["trickle"]["per_event"].get(program, {}).get(api, {}).get(field, 0.0)
        b = self.counts["batch"]["per_event"].get(program, {}).get(api, {}).get(field, 0.0)
        if program in ("sealer", "witness") and e is not None:
            return per_event_by_object_and_period(t, ks[0], self.e_period[0], b, ks[1], self.e_period[1], k, e)
        return per_event_at(t, ks[0], b, ks[1], k)

    def _activity(self, what: str, program: str, k: float, ks: tuple[float, float]) -> float:
        """Invocations or log bytes per event: the phase's, less the idle phase's for as long."""
        idle = self.counts["idle"]

        def per_event(phase: dict) -> float:
            base = idle[what][program] * phase["seconds"] / idle["seconds"]
            return max(phase[what][program] - base, 0) / phase["events"]

        return per_event_at(per_event(self.counts["trickle"]), ks[0], per_event(self.counts["batch"]), ks[1], k)

    def variable(self, config: dict, events: int) -> dict[str, float]:
        """Dollars a year by line for ``events`` a year, without the fixed part."""
        k_receive, k_object, k_ocsf = self.batches(config, events)
        e_period = max(events / HOURS_A_YEAR, 1.0)  # events in an AWS period (an hour)
        lines: dict[str, float] = {}

        def add(line: str, usd: float) -> None:
            lines[line] = lines.get(line, 0.0) + usd

        apis = {(p, api) for phase in ("trickle", "batch") for p in RECEIVER_SIDE + ARCHIVER_SIDE + OCSF_SIDE
                for api in self.counts[phase]["per_event"].get(p, {})}
        put_bytes = s3_bytes = ocsf_bytes = 0.0

        def side(program: str) -> tuple[float, tuple[float, float]]:
            if program in RECEIVER_SIDE:
                return k_receive, self.k_receive
            return (k_ocsf, self.k_ocsf) if program in OCSF_SIDE else (k_object, self.k_object)

        for program, api in sorted(apis):
            k, ks = side(program)
            n = self._per_event(program, api, "requests", k, ks, e_period) * events
            key = price_key(api)
            if key is None:
                continue
            if key == "dynamodb_write_request_unit":
                # A write unit per KB of item, in the table and in each index it is written to.
                n *= self.a["dynamodb_item_kb"] * (1 + config["indexes"])
                if api.endswith("PutItem"):
                    put_bytes += self._per_event(program, api, "bytes", k, ks, e_period)
            if api.startswith("s3 PutObject") and program in OCSF_SIDE:
                ocsf_bytes += self._per_event(program, api, "bytes", k, ks, e_period)
            elif api.startswith("s3 PutObject"):
                s3_bytes += self._per_event(program, api, "bytes", k, ks, e_period)
            add(LINE[key] + (" (OCSF copy)" if program in OCSF_SIDE else ""), n * self.p[key])
        months = self.a["months_kept"]
        table_months = months if config["table_days"] is None else min(config["table_days"] / 30.4, months)
        # The item, its copy in byAuditTime (projection ALL), and a part for each lookup index.
        copies = 2 + self.a["dynamodb_lookup_index_copy"] * (config["indexes"] - 1)
        table_gb = events * put_bytes * copies / 1e9
        add("DynamoDB storage", table_gb * table_months * self.p["dynamodb_storage_gb_month"])
        add("DynamoDB point-in-time recovery",
            events * put_bytes / 1e9 * table_months * self.p["dynamodb_pitr_gb_month"])
        add("S3 storage", events * s3_bytes / 1e9 * months * self.p["s3_storage_gb_month"])
        add("S3 storage (OCSF copy)", events * ocsf_bytes / 1e9 * months * self.p["s3_storage_gb_month"])
        for fn, ks, k, memory in (("receiver", self.k_receive, k_receive, config["receiver_memory_mb"]),
                                  ("archiver", self.k_object, k_object, config["archiver_memory_mb"]),
                                  ("ocsf-writer", self.k_ocsf, k_ocsf, config["ocsf_memory_mb"])):
            invocations = self._activity("invocations", fn, k, ks) * events
            seconds = self.counts["durations_ms"][fn] / 1000
            copy = " (OCSF copy)" if fn in OCSF_SIDE else ""
            add("Lambda" + copy, invocations * (self.p["lambda_request"]
                                                + seconds * memory / 1024 * self.p["lambda_gb_second_arm64"]))
            log_gb = (self._activity("log_bytes", fn, k, ks) * events
                      + invocations * self.a["lambda_own_log_bytes_per_invocation"]) / 1e9
            add("CloudWatch Logs" + copy, log_gb * self.p["cloudwatch_logs_ingest_gb"])
        return lines

    def fixed(self, config: dict, idle: bool = False) -> dict[str, float]:
        """Dollars a year whatever the volume; ``idle``: only what a stack with no events pays."""
        lines: dict[str, float] = {}

        def add(line: str, usd: float) -> None:
            lines[line] = lines.get(line, 0.0) + usd

        sealer, witness = self.counts["idle"]["sealer"], self.counts["idle"]["witness"]
        runs_an_hour = 3600 // 300
        for mean, times in ((sealer["per_sealing_run"], HOURS_A_YEAR),
                            (sealer["per_idle_run"], HOURS_A_YEAR * (runs_an_hour - 1)),
                            (witness["per_cosigning_run"], HOURS_A_YEAR)):
            for api, cell in mean.items():
                key = price_key(api)
                if key:
                    add(f"{LINE[key]} (sealing, witness)", cell["requests"] * times * self.p[key])
        runs = HOURS_A_YEAR * runs_an_hour
        seconds = self.counts["durations_ms"]["sealer"] / 1000
        add("Lambda (sealing)", runs * (self.p["lambda_request"]
                                        + seconds * config["archiver_memory_mb"] / 1024
                                        * self.p["lambda_gb_second_arm64"]))
        idle_run_log = self.counts["idle"]["log_bytes"]["sealer"] / max(self.counts["idle"]["runs"], 1)
        add("CloudWatch Logs (sealing)", runs * (idle_run_log + self.a["lambda_own_log_bytes_per_invocation"])
            / 1e9 * self.p["cloudwatch_logs_ingest_gb"])
        polls = (2 * self.a["sqs_idle_pollers_per_queue"] * SECONDS_A_YEAR / self.a["sqs_idle_receive_seconds"])
        add("SQS polling (Lambda's pollers)", polls * self.p["sqs_request"])
        t = {**(self.template or {}), **{k: config[k] for k in TEMPLATE_KEYS if k in config}}
        add("KMS keys", t["kms_keys"] * 12 * self.p["kms_key_month"])
        add("CloudWatch alarms", t["alarm_metrics"] * 12 * self.p["cloudwatch_alarm_metric_month"])
        emf = self.counts["emf_metrics"]
        # A count of trouble is published only when not zero (docs/operations.md "What operators
        # see"): the run counts what a clean hour publishes. With a hot window, TTL deletes items
        # every hour, and the archiver publishes `Expired` (the local stack has no TTL to show it).
        metrics = emf["sealer"] if idle else emf["all"] + (1 if config.get("table_days") else 0)
        add("CloudWatch custom metrics", metrics * 12 * self.p["cloudwatch_metric_month"])
        add("CloudWatch dashboard", t["dashboards"] * 12 * self.p["cloudwatch_dashboard_month"])
        return lines

    def lake_per_million(self) -> float:
        return 1e6 * self.a["cloudtrail_lake_bytes_per_event"] / 1e9 * self.p["cloudtrail_lake_ingest_gb_1y"]


def per_million(variable: dict, fixed: dict, events: int) -> float:
    """Dollars per million events-year, the fixed cost spread over the events."""
    return (sum(variable.values()) + sum(fixed.values())) / (events / 1e6)


def report(counts: dict, prices: dict, configurations: dict[str, dict] | None = None) -> str:
    """`make cost`'s output; ``configurations``: each configuration as ``configuration`` reads it."""
    configurations = configurations or {name: configuration(name) for name in CONFIGURATIONS}
    model = Model(counts, prices)
    lake = model.lake_per_million()
    out = [f"Counts: {counts['command']} of {counts['date']} (commit {counts['commit']}); prices: "
           f"bench/cost/prices.json, {prices['region']}, read {prices['read']}.", ""]
    table: dict[str, dict[str, float]] = {}
    columns = []
    figures = {}
    for name, config in configurations.items():
        fixed = model.fixed(config)
        for events in VOLUMES:
            variable = model.variable(config, events)
            x = per_million(variable, fixed, events)
            figures[(name, events)] = x
            out.append(f"cost: {name} {events:,} events/year: ${x:,.2f} per million events-year "
                       f"(fixed ${sum(fixed.values()):,.2f}/year); CloudTrail Lake ${lake:,.2f}")
            column = f"{name} {events:,.0e}".replace("+0", "").replace("+", "")
            columns.append(column)
            for line, usd in {**variable, **{f"fixed: {k}": v for k, v in fixed.items()}}.items():
                table.setdefault(line, {})[column] = usd
    if "auditctl" in counts:
        run = counts["auditctl"]
        requests = sum(c["requests"] for c in run["counts"].values())
        usd = sum(c["requests"] * model.p[k] for api, c in run["counts"].items() if (k := price_key(api)))
        by_service: dict[str, int] = {}
        for api, c in run["counts"].items():
            by_service[api.split(" ")[0]] = by_service.get(api.split(" ")[0], 0) + c["requests"]
        out += ["", f"auditctl: {run['command']} over {run['events']:,} events (exit {run['exit']}): "
                f"{requests:,} requests (" + ", ".join(f"{k} {v:,}" for k, v in sorted(by_service.items()))
                + f"), ${usd:,.4f}"]
    out += ["", "Dollars a year by line:", "",
            "| line | " + " | ".join(columns) + " |", "| --- |" + " ---: |" * len(columns)]
    for line in sorted(table, key=lambda s: (s.startswith("fixed"), s)):
        out.append(f"| {line} | " + " | ".join(f"{table[line].get(c, 0):,.2f}" for c in columns) + " |")
    ratio = figures[("cheapest", 100_000_000)] / lake
    idle = sum(model.fixed(configurations["cheapest"], idle=True).values())
    idle_run = sum(c["requests"] for c in counts["idle"]["sealer"]["per_idle_run"].values())
    out += ["",
            f"goal: cheapest at 100,000,000 events/year is {ratio:.1f}x CloudTrail Lake (goal 2x): "
            + ("met" if ratio <= 2 else "NOT met"),
            f"goal: an idle stack's fixed cost ${idle:,.2f}/year (goal $40): " + ("met" if idle <= 40 else "NOT met"),
            f"goal: an idle sealing run makes {idle_run:.1f} requests (goal 2 at most): "
            + ("met" if idle_run <= 2 else "NOT met")]
    for events in VOLUMES:
        config = configurations["default"]
        lines = {**model.variable(config, events), **{f"fixed: {k}": v for k, v in model.fixed(config).items()}}
        top = sorted(lines.items(), key=lambda kv: -kv[1])[:3]
        out.append(f"dominant: default {events:,} events/year: "
                   + "; ".join(f"{k} ${v:,.2f}" for k, v in top))
    for name, config in configurations.items():
        out.append(f"configuration {name}: {describe(config)}; gives up: {config['gives_up']}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--counts", type=Path, default=COUNTS)
    ap.add_argument("--prices", type=Path, default=PRICES)
    a = ap.parse_args(argv)
    sys.stdout.write(report(load(a.counts), load(a.prices)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
