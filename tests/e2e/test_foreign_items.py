"""Items put in the audit table behind the receiver (issue 34, finding 2; docs/archive.md "Items
attested at birth"), on the local stack: moto's server with the stack from template.yaml, the real
receiver (which attests each item it writes, its run key certified by the stack's
AuditAttestationKey) and the real archiver (which reads that key's public half at start-up, as its
template environment says) under `cargo lambda watch`, the local SQS and stream triggers.

Someone with `dynamodb:PutItem` copies a real item's every field, its `attestation` included,
into a new item. What a user sees: the archive holds all three items; the copy's line carries
`notAttested` with why, the receiver's lines do not; the archiver's log carries the ERROR line
"item not attested" naming the copy and the `ForeignItem` metric (what ForeignItemAlarm watches).
The OCSF writer (audit-ocsf-writer, docs/ocsf.md "The stream-fed writer") runs beside the archiver
on a stream trigger of its own: every item of the table is in its Parquet copy exactly once, with
its class (a sign-in is Authentication, the rest API Activity), the foreign copy too (the writer
checks no attestation); a batch it was given, given again as Lambda retries it, answers no failure
and leaves the objects as they were, each record still once.

Every wait is on the stack's own states (drained, caught up); none races the clock."""

import json
import time
from pathlib import Path
from datetime import datetime, timezone

import pytest

import duckdb

from local import procs
from local.harness import LocalSystem, emf_documents, log_events

SIGNATURE = "its attestation's batch signature does not hold"


@pytest.fixture
def system(work_dir):
    with LocalSystem(work_dir, visibility_timeout=2, archiver=True, archive_batching_window=1,
                     ocsf_writer=True) as s:
        batches = s.ocsf_batches = []
        s.ocsf_streams.on_invoke = batches.append
        yield s


def iso(seconds: float) -> str:
    at = datetime.fromtimestamp(seconds, timezone.utc)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def archived_lines(system: LocalSystem) -> dict[str, dict]:
    return {line["messageId"]: line for o in system.archive_objects("trail/") if not o.get("DeleteMarker")
            for line in o["lines"]}


def test_an_item_put_behind_the_receiver_is_archived_marked_and_alarmed(system):
    for message_id in ("real-1", "real-2"):
        system.sqs.send_message(QueueUrl=system.queue_url, MessageBody=json.dumps(
            {"messageId": message_id, "auditTime": iso(time.time()), "auditText": f"event {message_id}",
             "actor": "alice", "action": "user.login" if message_id == "real-1" else "invoice.create"}))
    assert system.wait_drained(120), "the audit queue was not drained"

    # The insider: a copy of a real item, attestation included, under a new messageId.
    items = system.ddb.scan(TableName=system.stack.table_name)["Items"]
    model = next(item for item in items if item["messageId"]["S"] == "real-1")
    assert "attestation" in model, "the receiver attests what it writes"
    forged = {**model, "messageId": {"S": "forged-1"}}
    system.ddb.put_item(TableName=system.stack.table_name, Item=forged)

    end = time.monotonic() + 180
    while len(archived_lines(system)) < 3:
        assert time.monotonic() < end, f"archived: {sorted(archived_lines(system))}"
        system.wait_archived(10)
    assert system.wait_archived(60), "the stream trigger did not catch up"

    lines = archived_lines(system)
    assert sorted(lines) == ["forged-1", "real-1", "real-2"], "nothing is lost: the foreign item is archived too"
    for message_id in ("real-1", "real-2"):
        assert "notAttested" not in lines[message_id], lines[message_id]
    foreign = dict(lines["forged-1"])
    assert foreign.pop("notAttested") == SIGNATURE
    # Apart from the mark, archived as it was put.
    assert foreign == {**lines["real-1"], "messageId": "forged-1"}

    log = system.work_dir / "archiver.log"
    counted = sum(int(doc.get("ForeignItem", 0)) for doc in emf_documents(log)
                  if doc["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "AuditArchiver")
    assert counted == 1, "one ForeignItem in the archiver's EMF documents"
    errors = [ev for ev in log_events(log) if str(ev.get("message", "")).startswith("item not attested")]
    assert len(errors) == 1, errors
    assert "forged-1" in errors[0]["keys"] and errors[0]["reason"] == SIGNATURE

    check_the_ocsf_copy(system, lines)


def ocsf_records(system: LocalSystem, into: Path) -> tuple[list[str], list[tuple]]:
    """The OCSF objects' keys, and every record's (messageId, class_uid, actor name, trail)."""
    keys = system.ocsf_objects(into)
    if not keys:
        return [], []
    pattern = str(into / "ext" / "**" / "*.parquet")
    rows = duckdb.connect().execute(
        "SELECT metadata.uid, class_uid, actor.\"user\".name, "
        "json_extract_string(unmapped, '$.trail') FROM read_parquet(?, hive_partitioning = true) ORDER BY 1",
        [pattern]).fetchall()
    return keys, rows


def check_the_ocsf_copy(system: LocalSystem, archived: dict[str, dict]) -> None:
    assert system.wait_ocsf_written(60), "the OCSF writer's stream trigger did not catch up"
    keys, records = ocsf_records(system, system.work_dir / "lake")
    assert [r[0] for r in records] == sorted(archived), "every item once in the OCSF copy"
    classes = {r[0]: r[1] for r in records}
    assert classes == {"real-1": 3002, "real-2": 6003, "forged-1": 3002}, "a sign-in is Authentication"
    for message_id, _, actor, trail in records:
        assert actor == "alice"
        assert json.loads(trail) == {"messageId": message_id, "auditTime": archived[message_id]["auditTime"]}
    for key in keys:
        cls = key.rsplit("/", 1)[1].split("-", 1)[0]
        assert key.startswith("ext/audit-receiver/region=us-east-1/accountId=") and "/eventDay=" in key, key
        assert cls in ("3002", "6003"), key

    # Lambda retries a batch from its first record: the same batch, given to the writer again.
    assert system.ocsf_batches, "the writer was invoked"
    inserts = [b for b in system.ocsf_batches if any(r["eventName"] == "INSERT" for r in b["Records"])]
    for batch in inserts:
        answer = procs.invoke(system.ocsf_writer.url, batch, timeout=60)
        assert answer == {"batchItemFailures": []}, answer
    again, records_again = ocsf_records(system, system.work_dir / "lake-again")
    assert again == keys, "a retried batch writes no object of its own"
    assert records_again == records, "nor a second record"
