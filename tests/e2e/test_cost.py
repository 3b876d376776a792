"""`make cost` (local/cost.py): the price arithmetic, and docs/operations.md's cost section is
exactly what `make cost` prints from the committed counts and prices."""

import json
import re
from pathlib import Path

import pytest

from local import cost

ROOT = Path(__file__).resolve().parents[2]


def _prices(**usd):
    doc = json.loads((ROOT / "bench" / "cost" / "prices.json").read_text())
    for k in doc["prices"]:
        doc["prices"][k]["usd"] = usd.get(k, 0.0)
    return doc


def _phase(events, per_event, invocations=1.0, log_bytes=0.0, receives=None, objects=None, ocsf_batch=1):
    return {"events": events, "seconds": 15.0, "events_per_object": objects or 1.0,
            "counts": {"receiver-poller": {"sqs ReceiveMessage": {"requests": receives or events, "bytes": 0}}},
            "per_event": per_event,
            "invocations": {"receiver": invocations * events, "archiver": invocations * events,
                            "ocsf-writer": events / ocsf_batch},
            "records_invoked": {"archiver": events, "ocsf-writer": events},
            "log_bytes": {"receiver": log_bytes * events, "archiver": log_bytes * events, "ocsf-writer": 0}}


def _counts(trickle, batch, sealing=None, idle_run=None):
    return {"trickle": trickle, "batch": batch, "local": {"digest_period_s": 15}, "durations_ms": {"receiver": 0, "archiver": 0, "sealer": 0, "ocsf-writer": 0},
            "emf_metrics": {"all": 0, "sealer": 0},
            "idle": {"runs": 1, "seconds": 15.0, "log_bytes": {"sealer": 0, "receiver": 0, "archiver": 0,
                                                                "ocsf-writer": 0},
                     "invocations": {"receiver": 0, "archiver": 0, "ocsf-writer": 0},
                     "sealer": {"per_sealing_run": sealing or {}, "per_idle_run": idle_run or {}},
                     "witness": {"per_cosigning_run": {}}}}


NO_TEMPLATE = {"kms_keys": 0, "alarm_metrics": 0, "dashboards": 0}


def test_a_count_per_event_is_interpolated_through_both_measurements():
    # 3 requests an event at 1 event a batch, 1.2 at 10: 1 per event and 2 per batch.
    assert cost.per_event_at(3.0, 1, 1.2, 10, 1) == pytest.approx(3.0)
    assert cost.per_event_at(3.0, 1, 1.2, 10, 10) == pytest.approx(1.2)
    assert cost.per_event_at(3.0, 1, 1.2, 10, 2) == pytest.approx(2.0)
    assert cost.per_event_at(3.0, 1, 1.2, 10, 1000) == pytest.approx(1.002)
    assert cost.per_event_at(5.0, 4, 7.0, 4, 100) == 5.0  # one batch size measured: as measured


def test_each_request_is_charged_on_its_price_line():
    assert cost.price_key("sqs SendMessageBatch") == "sqs_request"
    assert cost.price_key("sqs ReceiveMessage empty") == "sqs_request"
    assert cost.price_key("dynamodb PutItem") == "dynamodb_write_request_unit"
    assert cost.price_key("dynamodb Query") == "dynamodb_read_request_unit"
    assert cost.price_key("dynamodb DescribeTable") is None
    assert cost.price_key("s3 PutObject trail/") == "s3_put_class_request"
    assert cost.price_key("s3 ListObjectVersions digest/") == "s3_put_class_request"
    assert cost.price_key("s3 PutObjectRetention trail/") == "s3_put_class_request"
    assert cost.price_key("s3 GetObject trail/") == "s3_get_class_request"
    assert cost.price_key("s3 HeadObject state/") == "s3_get_class_request"
    assert cost.price_key("kms Sign") == "kms_asymmetric_request"
    assert cost.price_key("sts AssumeRole") is None


def test_requests_writes_and_storage_become_dollars():
    per_event = {"producer": {"sqs SendMessage": {"requests": 1.0, "bytes": 0}},
                 "receiver": {"dynamodb PutItem": {"requests": 1.0, "bytes": 500.0}},
                 "archiver": {"s3 PutObject trail/": {"requests": 1.0, "bytes": 1000.0}}}
    counts = _counts(_phase(10, per_event), _phase(10, per_event))
    prices = _prices(sqs_request=0.4e-6, dynamodb_write_request_unit=1e-6, s3_put_class_request=5e-6,
                     s3_storage_gb_month=0.02, dynamodb_storage_gb_month=0.25)
    model = cost.Model(counts, prices, NO_TEMPLATE)
    config = {**cost.configuration("default"), "indexes": 4, "table_days": None}
    lines = model.variable(config, 1_000_000)
    assert lines["SQS requests"] == pytest.approx(0.40)
    # An item of 500 bytes: 1 write unit, and one more for each of the 4 indexes.
    assert lines["DynamoDB writes"] == pytest.approx(5.00)
    assert lines["S3 PUT/LIST requests"] == pytest.approx(5.00)
    # 1 GB of objects kept 12 months at $0.02.
    assert lines["S3 storage"] == pytest.approx(0.24)
    # 0.5 GB of items, 2.6 copies with the indexes, 12 months at $0.25; 30 days with a hot window.
    assert lines["DynamoDB storage"] == pytest.approx(0.5 * 2.6 * 12 * 0.25)
    hot = model.variable({**config, "table_days": 30.4}, 1_000_000)
    assert hot["DynamoDB storage"] == pytest.approx(0.5 * 2.6 * 1 * 0.25)


def test_the_ocsf_copy_is_priced_on_lines_of_its_own_from_its_own_batches():
    # Measured: 2 PUTs an event when each batch held one event (a class each, both present), 0.02
    # when batches held 100; the objects' bytes likewise. The writer's window (300 s by default)
    # sets its batches in AWS, not the archiver's.
    trickle = {"ocsf-writer": {"s3 PutObject ext/": {"requests": 2.0, "bytes": 400.0}}}
    batch = {"ocsf-writer": {"s3 PutObject ext/": {"requests": 0.02, "bytes": 50.0}}}
    counts = _counts(_phase(10, trickle), _phase(1000, batch, ocsf_batch=100))
    prices = _prices(s3_put_class_request=5e-6, s3_storage_gb_month=0.02, lambda_request=0.2e-6)
    model = cost.Model(counts, prices, NO_TEMPLATE)
    config = cost.configuration("default")
    assert config["ocsf_window_s"] == 300 and config["ocsf_batch_size"] == 1000
    events = 1_000_000
    k = events / cost.SECONDS_A_YEAR * 300  # one shard at this rate
    assert model.batches(config, events)[2] == pytest.approx(k)
    lines = model.variable(config, events)
    puts = cost.per_event_at(2.0, 1, 0.02, 100, k) * events
    assert lines["S3 PUT/LIST requests (OCSF copy)"] == pytest.approx(puts * 5e-6)
    assert lines.get("S3 PUT/LIST requests", 0) == 0, "the archive's PUTs are not the copy's"
    stored = cost.per_event_at(400.0, 1, 50.0, 100, k) * events / 1e9
    assert lines["S3 storage (OCSF copy)"] == pytest.approx(stored * 12 * 0.02)
    # One invocation a batch.
    assert lines["Lambda (OCSF copy)"] == pytest.approx(cost.per_event_at(1.0, 1, 0.01, 100, k) * events * 0.2e-6)
    # A longer window gives larger batches, up to the batch size.
    assert model.batches({**config, "ocsf_window_s": 10**9}, events)[2] == 1000


def test_the_fixed_cost_is_an_aws_hour_of_runs_and_the_templates_monthly_items():
    counts = _counts(_phase(1, {}), _phase(1, {}),
                     sealing={"s3 PutObject digest/": {"requests": 2, "bytes": 0}},
                     idle_run={"s3 GetObject state/": {"requests": 1, "bytes": 0}})
    prices = _prices(s3_put_class_request=5e-6, s3_get_class_request=0.4e-6, sqs_request=0.4e-6,
                     kms_key_month=1.0, cloudwatch_alarm_metric_month=0.1, cloudwatch_dashboard_month=3.0)
    template = {"kms_keys": 2, "alarm_metrics": 10, "dashboards": 1}
    model = cost.Model(counts, prices)
    fixed = model.fixed({**cost.configuration("default"), **template})
    # One sealing run an hour (2 PUTs) and eleven idle runs (1 GET each), 8,760 hours.
    assert fixed["S3 PUT/LIST requests (sealing, witness)"] == pytest.approx(2 * 8760 * 5e-6)
    assert fixed["S3 GET/HEAD requests (sealing, witness)"] == pytest.approx(11 * 8760 * 0.4e-6)
    # Two queues, 5 pollers each, a receive every 20 s.
    assert fixed["SQS polling (Lambda's pollers)"] == pytest.approx(2 * 5 * 365 * 86400 / 20 * 0.4e-6)
    assert fixed["KMS keys"] == 24.0
    assert fixed["CloudWatch alarms"] == pytest.approx(12.0)
    assert fixed["CloudWatch dashboard"] == 36.0


def test_the_metrics_a_clean_hour_publishes_and_expired_with_a_hot_window():
    # The run counts what a clean hour publishes (the counts of trouble only when not zero);
    # with a hot window TTL deletes items every hour, and the archiver publishes Expired too.
    counts = {**_counts(_phase(1, {}), _phase(1, {})), "emf_metrics": {"all": 11, "sealer": 3}}
    model = cost.Model(counts, _prices(cloudwatch_metric_month=0.3))
    kept = model.fixed({**cost.configuration("default"), "table_days": None})
    hot = model.fixed({**cost.configuration("default"), "table_days": 7})
    idle = model.fixed({**cost.configuration("default"), "table_days": 7}, idle=True)
    assert kept["CloudWatch custom metrics"] == pytest.approx(11 * 12 * 0.3)
    assert hot["CloudWatch custom metrics"] == pytest.approx(12 * 12 * 0.3)
    assert idle["CloudWatch custom metrics"] == pytest.approx(3 * 12 * 0.3)


def test_the_fixed_cost_is_spread_over_the_events():
    assert cost.per_million({"a": 3.0}, {"f": 100.0}, 1_000_000) == 103.0
    assert cost.per_million({"a": 300.0}, {"f": 100.0}, 100_000_000) == 4.0


def test_the_docs_cost_section_is_what_make_cost_prints():
    docs = (ROOT / "docs" / "operations.md").read_text()
    m = re.search(r"<!-- make cost: begin -->\n```\n(.*?)```\n<!-- make cost: end -->", docs, re.S)
    assert m, "docs/operations.md has no `make cost` block"
    printed = cost.report(cost.load(cost.COUNTS), cost.load(cost.PRICES))
    assert m.group(1) == printed, "docs/operations.md differs from `make cost`: paste its output"


def test_sealing_requests_are_split_into_a_part_per_object_and_a_part_per_period():
    # 2 requests an object and 30 a period with events: measured at (1 event an object, 6 a
    # period) and (100 an object, 300 a period); in AWS at (2 an object, 114 a period).
    def c(k, e):
        return 2 / k + 30 / e

    got = cost.per_event_by_object_and_period(c(1, 6), 1, 6, c(100, 300), 100, 300, 2, 114)
    assert got == pytest.approx(c(2, 114))
    # Only a part per object: no part per period is made up.
    got = cost.per_event_by_object_and_period(1.0, 1, 6, 0.01, 100, 300, 10, 1000)
    assert got == pytest.approx(0.1)


def test_each_configuration_is_read_from_the_template_with_its_parameters():
    default, cheapest = cost.configuration("default"), cost.configuration("cheapest")
    # The template's defaults: every index, the dashboard, no window on the receiver.
    assert (default["indexes"], default["dashboards"], default["billing_mode"]) == (4, 1, "PAY_PER_REQUEST")
    assert (default["sqs_window_s"], default["archive_window_s"], default["table_days"]) == (0, 60, None)
    assert (default["receiver_memory_mb"], default["archiver_memory_mb"]) == (256, 1769)
    # LookupIndexes none and Dashboard false: the time index alone, no dashboard; the alarms
    # and keys stay.
    assert (cheapest["indexes"], cheapest["dashboards"]) == (1, 0)
    assert (cheapest["sqs_window_s"], cheapest["archive_window_s"], cheapest["table_days"]) == (20, 300, 7)
    assert (cheapest["receiver_memory_mb"], cheapest["archiver_memory_mb"]) == (128, 256)
    assert (cheapest["kms_keys"], cheapest["alarm_metrics"]) == (default["kms_keys"], default["alarm_metrics"])
    assert cost.template_counts(parameters={"LookupIndexes": "actor,resource"})["indexes"] == 3


def test_writes_storage_and_the_dashboard_follow_the_configurations_indexes_and_dashboard(monkeypatch):
    per_event = {"receiver": {"dynamodb PutItem": {"requests": 1.0, "bytes": 500.0}}}
    counts = _counts(_phase(10, per_event), _phase(10, per_event))
    prices = _prices(dynamodb_write_request_unit=1e-6, dynamodb_storage_gb_month=0.25,
                     cloudwatch_dashboard_month=3.0)
    model = cost.Model(counts, prices)
    lines = {name: model.variable(cost.configuration(name), 1_000_000) for name in ("default", "cheapest")}
    # A write unit in the table and one in each index: 5 with every index, 2 with byAuditTime alone.
    assert lines["default"]["DynamoDB writes"] == pytest.approx(5.00)
    assert lines["cheapest"]["DynamoDB writes"] == pytest.approx(2.00)
    # 0.5 GB of items: the item and byAuditTime's copy, 0.2 for each lookup index; 30 days kept.
    assert lines["default"]["DynamoDB storage"] == pytest.approx(0.5 * 2.6 * 12 * 0.25)
    assert lines["cheapest"]["DynamoDB storage"] == pytest.approx(0.5 * 2.0 * 7 / 30.4 * 0.25)
    assert model.fixed(cost.configuration("default"))["CloudWatch dashboard"] == 36.0
    assert model.fixed(cost.configuration("cheapest"))["CloudWatch dashboard"] == 0.0
    # Provisioned capacity is not priced: the model says so rather than price it as on demand.
    monkeypatch.setitem(cost.CONFIGURATIONS, "provisioned", {"template_parameters": {"TableBillingMode": "PROVISIONED"}})
    with pytest.raises(ValueError, match="on-demand"):
        cost.configuration("provisioned")
