"""`auditctl prove` and `check-proof` on the local stack (issue 27): moto's server, the real
receiver and archiver under `cargo lambda watch`, the local stream trigger and the schedule that
seals each period and writes the transparency log (tiles, index, checkpoint signed with the stack's
KMS key). Events are sent in three bursts, each sealed before the next, so that they are leaves of
three periods. For an event of each:

- `auditctl prove` prints a proof, reading at most 20 objects (it says so on stderr);
- `auditctl check-proof` checks it with the digest key's public key alone (PEM, from KMS's
  GetPublicKey) and an empty environment;
- docs/operations.md's Python check, run exactly as printed there with this venv's Python
  (`cryptography`), prints OK, and refuses the same proof with one byte of its line changed.

The same stack keeps items one day (RetentionDays 1, the table's hot window): `auditctl query` reads
a range before the window from the archive (sealed periods through their index, the others by
listing), says so, gives the archived events as the table gave them, in order, filtered, once each,
even once the table no longer holds them, and without ARCHIVE_BUCKET stops naming it.

Every wait is on the stack's own states (drained, caught up, sealed, checkpoint written); none races
the clock."""

import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from local.harness import LocalSystem, _client

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "operations.md"
BURSTS = 3
PER_BURST = 6


@pytest.fixture(scope="module")
def auditctl() -> Path:
    env = dict(os.environ, CARGO_TERM_COLOR="never")
    subprocess.run(["cargo", "build", "--quiet", "--bin", "auditctl"], cwd=ROOT, env=env, check=True)
    return ROOT / "target" / "debug" / "auditctl"


@pytest.fixture(scope="module")
def system():
    work = Path(os.environ.get("E2E_WORK_DIR", ROOT / ".local" / "e2e")) / "test_prove"
    if work.exists():
        import shutil

        shutil.rmtree(work)
    work.mkdir(parents=True)
    with LocalSystem(work, visibility_timeout=2, archiver=True, archive_batching_window=1,
                     parameters={"RetentionDays": "1"}) as s:
        yield s


def iso(seconds: float) -> str:
    at = datetime.fromtimestamp(seconds, timezone.utc)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def run(binary: Path, system: LocalSystem, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`auditctl ARGS` with `.local/stack.env`'s variables (or `env`); kept in auditctl.log."""
    env = {**os.environ, **system.stack_env()} if env is None else env
    done = subprocess.run([str(binary), *args], env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    with open(system.work_dir / "auditctl.log", "a", encoding="utf-8") as log:
        log.write(f"$ auditctl {' '.join(args)}\n{done.stdout}{done.stderr}exit {done.returncode}\n\n")
    return done


def documented_script() -> str:
    text = DOC.read_text()
    m = re.search(r"<!-- proving-the-trail:python -->\n```python\n(.*?)\n```", text, re.S)
    assert m, "docs/operations.md lost its Python check (marker proving-the-trail:python)"
    return m.group(1) + "\n"


def wait_logged(system: LocalSystem, until: float, timeout: float) -> None:
    """Until the period holding ``until`` is sealed and its checkpoint (written after the digest,
    last of the period's log) is in the bucket."""
    assert system.wait_sealed(until, timeout), "the period was not sealed"
    s3 = _client("s3", system.endpoint)
    bucket = system.stack.archive_bucket.name
    period = system.digest_period
    start = int(until) // period * period
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="digest/").get("Contents", [])
            if o["Key"].endswith(f"/p{start}.json")]
    assert keys, f"no digest of the period {start}"
    tree = json.loads(s3.get_object(Bucket=bucket, Key=keys[0])["Body"].read()).get("tree")
    assert tree, "the sealed digest has no tree: the sealer does not write the log"
    end = time.monotonic() + timeout
    while "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix=tree["checkpoint"]):
        assert time.monotonic() < end, f"the checkpoint {tree['checkpoint']} was not written"
        time.sleep(0.5)


def test_events_of_three_periods_are_proven_and_checked_offline_by_auditctl_and_by_the_documented_script(system, auditctl):
    ids = []
    for burst in range(BURSTS):
        batch = [f"proof-{burst}-{i}" for i in range(PER_BURST)]
        for message_id in batch:
            system.sqs.send_message(QueueUrl=system.queue_url, MessageBody=json.dumps(
                {"messageId": message_id, "auditTime": iso(time.time()), "auditText": f"event {message_id} €",
                 "actor": "alice", "action": "invoice.pay"}))
        assert system.wait_drained(120), "the audit queue was not drained"
        assert system.wait_archived(120), "the archiver did not catch up"
        # Sealed after the last write: the next burst's events are archived in a later period.
        wait_logged(system, time.time(), 180)
        ids.append(batch[burst % PER_BURST])

    der = _client("kms", system.endpoint).get_public_key(KeyId=system.stack_env()["DIGEST_KEY_ID"])["PublicKey"]
    pem = serialization.load_der_public_key(der).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    work = system.work_dir
    (work / "key.pem").write_bytes(pem)
    (work / "check_proof.py").write_text(documented_script())

    origin = f"audit-receiver/{system.stack.archive_bucket.name}"
    objects, leaves = set(), set()
    for message_id in ids:
        proved = run(auditctl, system, "prove", message_id)
        assert proved.returncode == 0, proved.stdout + proved.stderr
        proof = json.loads(proved.stdout)
        assert proof["messageId"] == message_id
        assert json.loads(proof["line"])["messageId"] == message_id
        read = re.search(r"read (\d+) objects \((\d+) bytes\)", proved.stderr)
        assert read, proved.stderr
        assert int(read.group(1)) <= 20, proved.stderr
        objects.add(proof["object"])
        leaves.add(proof["leafIndex"])
        path = work / f"{message_id}.json"
        path.write_text(proved.stdout)

        # auditctl, offline: no AWS variable at all.
        checked = run(auditctl, system, "check-proof", str(path), "--public-key", str(work / "key.pem"),
                      "--origin", origin, env={"PATH": os.environ.get("PATH", "")})
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert checked.stdout.startswith(f"OK: messageId {message_id} is leaf {proof['leafIndex']}"), checked.stdout

        # The documented script, as printed.
        script = subprocess.run([sys.executable, str(work / "check_proof.py"), str(path), str(work / "key.pem"),
                                 origin],
                                capture_output=True, text=True, timeout=60)
        assert script.returncode == 0, script.stdout + script.stderr
        assert f"OK: {message_id} is leaf {proof['leafIndex']}" in script.stdout, script.stdout

        # One byte of the line changed: both refuse it.
        changed = dict(proof, line=proof["line"].replace("invoice.pay", "invoice.pax", 1))
        assert changed["line"] != proof["line"]
        bad = work / f"{message_id}.changed.json"
        bad.write_text(json.dumps(changed, indent=2))
        refused = subprocess.run([sys.executable, str(work / "check_proof.py"), str(bad),
                                  str(work / "key.pem"), origin], capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "FAILED: the line is not the proof's leaf" in refused.stderr, refused.stderr
        failed = run(auditctl, system, "check-proof", str(bad), "--public-key", str(work / "key.pem"),
                     "--origin", origin, env={"PATH": os.environ.get("PATH", "")})
        assert failed.returncode == 1 and failed.stdout.startswith("FAILED: "), failed.stdout + failed.stderr

    assert len(objects) == BURSTS, f"the events are not in {BURSTS} periods' objects: {objects}"
    assert len(leaves) == BURSTS


def send(system: LocalSystem, message_id: str, at: float, actor: str) -> None:
    system.sqs.send_message(QueueUrl=system.queue_url, MessageBody=json.dumps(
        {"messageId": message_id, "auditTime": iso(at), "auditText": f"event {message_id}", "actor": actor,
         "action": "user.login"}))


def jsonl(done: subprocess.CompletedProcess) -> list[dict]:
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_range_before_the_tables_hot_window_is_read_from_the_archive(system, auditctl):
    # Three events of three days ago (a producer's late re-send: received now), two of them sealed
    # before the third is sent; and one of now.
    old = time.time() - 3 * 86400
    send(system, "old-0", old, "carol")
    send(system, "old-1", old + 1, "dave")
    assert system.wait_drained(120) and system.wait_archived(120)
    wait_logged(system, time.time(), 180)
    send(system, "old-2", old + 2, "carol")
    send(system, "now-0", time.time(), "carol")
    assert system.wait_drained(120) and system.wait_archived(120)

    # As the table holds them now (auditctl get, which adds whether the receiver attested it), before
    # one is deleted.
    held = {}
    for message_id in ("old-0", "old-1", "old-2"):
        got = run(auditctl, system, "get", message_id, "--format", "jsonl")
        assert got.returncode == 0 and got.stdout.endswith(',"attested":"yes"}\n'), got.stdout + got.stderr
        held[message_id] = got.stdout.removesuffix(',"attested":"yes"}\n') + "}"
    # The table's TTL deletes what is past the window (moto does not run TTL: deleted here).
    _client("dynamodb", system.endpoint).delete_item(
        TableName=system.stack.table_name,
        Key={"messageId": {"S": "old-1"}, "auditTime": {"S": json.loads(held["old-1"])["auditTime"]}})

    old_range = ("--from", iso(old - 60), "--to", iso(old + 60))
    read = run(auditctl, system, "query", *old_range, "--format", "jsonl")
    assert [e["messageId"] for e in jsonl(read)] == ["old-0", "old-1", "old-2"], read.stderr
    # Each as the table gave it, byte for byte (old-1 too, which the table no longer holds).
    assert read.stdout.splitlines() == [held["old-0"], held["old-1"], held["old-2"]]
    said = re.search(r"before (\S+) \(the table's hot window: RetentionDays 1\) events are read from the "
                     r"archive s3://(\S+): the (\d+) period\(s\) received from .* (\d+) event\(s\); "
                     r"from \S+ on, from the table", read.stderr)
    assert said, read.stderr
    assert said.group(2) == system.stack.archive_bucket.name and said.group(4) == "3", read.stderr

    # --hot-days 0: the table alone, which no longer holds old-1.
    table_only = run(auditctl, system, "query", *old_range, "--hot-days", "0", "--format", "jsonl")
    assert [e["messageId"] for e in jsonl(table_only)] == ["old-0", "old-2"], table_only.stderr
    assert "archive" not in table_only.stderr

    # A lookup filters what the archive gives; newest first is newest first.
    carol = run(auditctl, system, "query", *old_range, "--actor", "carol", "--desc", "--format", "jsonl")
    assert [e["messageId"] for e in jsonl(carol)] == ["old-2", "old-0"], carol.stderr

    # A range across the window: the archive's part, then the table's, each event once.
    across = run(auditctl, system, "query", "--from", iso(old - 60), "--actor", "carol", "--format", "jsonl")
    assert [e["messageId"] for e in jsonl(across)] == ["old-0", "old-2", "now-0"], across.stderr
    newest = run(auditctl, system, "query", "--from", iso(old - 60), "--actor", "carol", "--desc",
                 "--limit", "2", "--format", "jsonl")
    assert [e["messageId"] for e in jsonl(newest)] == ["now-0", "old-2"], newest.stderr

    # Newest first, a limit the table's rows fill reads no archive.
    filled = run(auditctl, system, "query", "--from", iso(old - 60), "--actor", "carol", "--desc",
                 "--limit", "1", "--format", "jsonl")
    assert [e["messageId"] for e in jsonl(filled)] == ["now-0"] and "archive" not in filled.stderr, filled.stderr

    # Inside the window the archive is not read.
    recent = run(auditctl, system, "query", "--from", iso(time.time() - 3600), "--actor", "carol",
                 "--format", "jsonl")
    assert [e["messageId"] for e in jsonl(recent)] == ["now-0"] and "archive" not in recent.stderr

    # Without the bucket: exit 2, naming what to set and where the window starts.
    unset = run(auditctl, system, "query", *old_range, env={**os.environ, **system.stack_env(), "ARCHIVE_BUCKET": ""})
    assert unset.returncode == 2, unset.stdout + unset.stderr
    assert "set ARCHIVE_BUCKET or --bucket (stack output AuditArchiveBucketName)" in unset.stderr, unset.stderr
    assert "RetentionDays 1" in unset.stderr, unset.stderr
