"""`auditctl archive repair` on the local stack (issue 24, finding 11): moto's server, the real
receiver and archiver under `cargo lambda watch`, the local stream trigger and schedule, and the
real `auditctl` binary, invoking the archiver through Lambda's Invoke API (its `cargo lambda
watch`, `.local/stack.env`'s AWS_ENDPOINT_URL_LAMBDA and ARCHIVER_FUNCTION).

Events are lost from the archive as the stack loses them: the stream's event source mapping cannot
reach the archiver, gives its batches up after its retries and sends their descriptions to
AuditArchiveFailureQueue. Then:

- `verify --table` reports each lost item as `item not archived`;
- `archive repair` records its access, finds exactly those items, and the archiver archives them
  (reading them from the table itself) in objects of the period open then, marked as repairs,
  naming each item and object;
- the same repair again archives nothing (the archiver finds its earlier repair of each item);
- once the repair's period is sealed, `verify --table` over the same range holds and says how
  many items a repair archived.

Every wait is on the stack's own states (drained, caught up, sealed); none races the clock."""

import gzip
import json
import os
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from local import procs
from local.harness import LocalSystem, _client

ROOT = Path(__file__).resolve().parents[2]

KINDS = ("digest missing", "chain broken", "signature invalid", "object changed", "object missing",
         "object not in digest", "item changed", "item missing", "item not archived", "item not attested",
         "object not attested",
         "event duplicated", "trail not sealed", "item modified")


@pytest.fixture(scope="module")
def auditctl() -> Path:
    env = dict(os.environ, CARGO_TERM_COLOR="never")
    subprocess.run(["cargo", "build", "--quiet", "--bin", "auditctl"], cwd=ROOT, env=env, check=True)
    return ROOT / "target" / "debug" / "auditctl"


@pytest.fixture
def system(work_dir):
    with LocalSystem(work_dir, visibility_timeout=2, archiver=True, archive_batching_window=1) as s:
        yield s


def iso(seconds: float) -> str:
    at = datetime.fromtimestamp(seconds, timezone.utc)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def run(binary: Path, system: LocalSystem, *args: str) -> subprocess.CompletedProcess:
    """`auditctl ARGS` with `.local/stack.env`'s variables; kept in the work dir's auditctl.log."""
    env = {**os.environ, **system.stack_env()}
    done = subprocess.run([str(binary), *args], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    with open(system.work_dir / "auditctl.log", "a", encoding="utf-8") as log:
        log.write(f"$ auditctl {' '.join(args)}\n{done.stdout}{done.stderr}exit {done.returncode}\n\n")
    return done


def problems(output: str) -> list[tuple[str, str]]:
    found = []
    for line in output.splitlines():
        fields = line.split("  ", 2)
        if fields[0] in KINDS:
            found.append((fields[0], fields[1] if len(fields) > 1 else ""))
    return found


def send(system: LocalSystem, ids: list[str]) -> None:
    for message_id in ids:
        system.sqs.send_message(QueueUrl=system.queue_url, MessageBody=json.dumps(
            {"messageId": message_id, "auditTime": iso(time.time()), "auditText": f"event {message_id}",
             "actor": "alice", "action": "user.login"}))
    assert system.wait_drained(120), "the audit queue was not drained"


def test_events_given_up_by_the_stream_are_archived_again_by_the_archiver_and_verify_holds(system, auditctl):
    s3 = _client("s3", system.endpoint)
    bucket = system.stack.archive_bucket.name
    # The chain has started (the schedule sealed a first digest).
    end = time.monotonic() + 60
    while not s3.list_objects_v2(Bucket=bucket, Prefix="digest/").get("Contents"):
        assert time.monotonic() < end, "the schedule sealed no first digest"
        time.sleep(0.5)
    first = min(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="digest/")["Contents"])
    genesis = int(first.rsplit("/p", 1)[1].removesuffix(".json"))

    kept = [f"kept-{i}" for i in range(3)]
    send(system, kept)
    assert system.wait_archived(120), "the first events were not archived"

    # The mapping can no longer reach the archiver: each batch is retried (once here, not
    # ArchiveRetryAttempts times), then given up to AuditArchiveFailureQueue.
    streams = system.streams
    streams.function_url = f"http://127.0.0.1:{procs.free_port()}/2015-03-31/functions/audit-archiver/invocations"
    streams.max_retries, streams.retry_backoff = 1, 0.05
    lost = [f"lost-{i}" for i in range(4)]
    send(system, lost)
    end = time.monotonic() + 120
    while streams.stats.given_up_records < len(lost):
        assert time.monotonic() < end, streams.stats
        time.sleep(0.2)
    assert streams.wait_caught_up(120), "the stream's batches were not given up"
    assert streams.stats.given_up_records == len(lost), streams.stats
    failures = _client("sqs", system.endpoint).receive_message(
        QueueUrl=system.stack.archive_failure_queue.url, MaxNumberOfMessages=10)
    assert failures.get("Messages"), "no description reached AuditArchiveFailureQueue"
    written = time.time()
    assert system.wait_sealed(written, 120), "the period of the lost writes was not sealed"
    frm, to = iso(genesis), iso(written)

    # verify: each lost item, and nothing else.
    before = run(auditctl, system, "verify", "--from", frm, "--to", to, "--table", "--archive-lag", "1",
                 "--no-audit-event")
    assert before.returncode == 1, before.stdout + before.stderr
    assert sorted(problems(before.stdout)) == [("item not archived", i) for i in lost], before.stdout

    # The repair: its access recorded, exactly the lost items archived by the archiver.
    repair = run(auditctl, system, "archive", "repair", "--from", frm, "--to", to, "--archive-lag", "1")
    assert repair.returncode == 0, repair.stdout + repair.stderr
    assert "access not recorded" not in repair.stderr, repair.stderr
    repaired = {}
    for line in repair.stdout.splitlines():
        fields = line.split("  ")
        if fields[0] == "repaired":
            repaired[fields[1]] = fields[3]
    assert sorted(repaired) == lost, repair.stdout
    assert f"{len(lost)} item(s) the archive lacked: {len(lost)} repaired in {len(lost)} object(s), " \
           "0 already repaired, 0 no longer in the table, 0 failed" in repair.stdout, repair.stdout
    table = {item["messageId"]: item for item in system.scan_table()}
    for message_id, key in repaired.items():
        got = s3.get_object(Bucket=bucket, Key=key)
        assert got["Metadata"].get("repair") == "true", got["Metadata"]
        (line,) = gzip.decompress(got["Body"].read()).decode().splitlines()
        assert json.loads(line)["messageId"] == message_id
        assert json.loads(line)["auditText"] == table[message_id]["auditText"]
        # In a period open at the repair, after the lost writes' (sealed) one.
        period = int(key.rsplit("/p", 1)[1].split("-", 1)[0])
        assert period > int(written) // system.digest_period * system.digest_period, key
    repaired_at = time.time()
    assert system.wait_access_drained(60)
    actions = [i.get("action") for i in system.scan_table()]
    assert "auditctl.archive.repair" in actions, actions

    # The same repair again: verify's comparison now finds each item in its repair's object
    # (archived late, within the stream's 24 hours plus retries), so nothing is asked of the
    # archiver and nothing is written. (The archiver's own refusal to write a repaired item twice
    # is crates/archiver/src/repair.rs's a_second_repair_of_the_same_items_writes_nothing.)
    objects = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="trail/").get("Contents", [])}
    again = run(auditctl, system, "archive", "repair", "--from", frm, "--to", to, "--archive-lag", "1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "nothing to repair: every item of the range is archived" in again.stdout, again.stdout
    assert {o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="trail/").get("Contents", [])} == objects

    # Once the repair's period is sealed, verify holds over the same range and names the repair.
    assert system.wait_sealed(repaired_at, 120), "the repair's period was not sealed"
    after = run(auditctl, system, "verify", "--from", frm, "--to", to, "--table", "--no-audit-event")
    assert after.returncode == 0, after.stdout + after.stderr
    assert problems(after.stdout) == [], after.stdout
    assert f"repairs   {len(lost)} of the archived items archived by auditctl archive repair" in after.stdout, \
        after.stdout
    # And a repair now finds nothing to do.
    none = run(auditctl, system, "archive", "repair", "--from", frm, "--to", to, "--no-audit-event")
    assert none.returncode == 0, none.stdout + none.stderr
    assert none.stdout.startswith("nothing to repair"), none.stdout
