"""`auditctl verify` against the local stack with the real parts (issue 20): moto's server, the
real receiver and archiver under `cargo lambda watch`, the local stream trigger, the local
schedule (which invokes the real archiver's sealer: it signs with the stack's KMS key), and the
real `auditctl` binary. Nothing here writes an archive object or a digest the way the archiver
would: the trail is the stack's own.

First the clean case: bursts of events in different periods, with empty periods before and
between them, all sealed; `verify --table` over the whole chain exits 0 and counts exactly what
the archive holds. Then every attack the stack lets someone make, each reported by one run with
its kind and key, and nothing else reported:

- the table: an item updated (`item changed`) and one deleted (`item missing`) behind the
  function's back;
- the archive: a sealed object overwritten with a newer version (`object changed`), one hidden by
  a delete marker (`object missing`: the bucket policy and Object Lock refuse every delete, so the
  attacker removes the bucket policy first; Object Lock still refuses deleting the version), and
  an object slipped into a sealed period's place (`object not in digest`);
- the digests: one hidden by a delete marker (`digest missing`, and the next period's link to its
  sealed version still holds: no `chain broken`), one written over with a body that no longer
  lists the hidden object and the old signature kept, one re-signed with another KMS key that
  names itself, and one signed by that other key in the name of the digest key (each a
  `signature invalid`);
- a period's digest missing from the chain as the stack can leave it: the schedule stops, so a
  due period is never sealed. Within `--grace` it is "not sealed yet" (counted, not a problem);
  past it, `digest missing`;
- the table's attacks are tampering too: the archiver archived the update and the delete as
  tamper records, each an `item modified`;
- the transparency log the sealer wrote: one hash of a tile changed (`leaf missing` on the
  tile's key, at its leaf).

Then the insider's attacks of issue 24 (docs/operations.md "Threat model"), each on a stack of its
own: tampering that is undone (an item changed and changed back: `item modified`, not a pass), a
digest key planted before the chain's first (reported, never the chain's start), an item the
stream delivered late (archived late, counted, not a problem), and a trail whose sealing never
worked (`trail not sealed`, exit 1).

Every verdict comes from what `verify` prints after the waits on the stack's own states
(`wait_drained`, `wait_archived`, `wait_sealed`, a digest listed or absent); the only waits on
the clock produce data (an empty period between bursts) or let a period become due."""

import gzip
import hashlib
import json
import os
import subprocess
import time
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from local.harness import LocalSystem, _client, digest_key

ROOT = Path(__file__).resolve().parents[2]

KINDS = ("digest missing", "chain broken", "signature invalid", "object changed", "object missing",
         "object not in digest", "object not attested", "event duplicated", "trail not sealed",
         "item changed", "item modified", "item missing", "item not archived", "item not attested",
         "checkpoint inconsistent", "leaf missing", "cosignature missing")

# Events per burst: each burst lands in its own period(s).
BURSTS = (6, 6, 8)


@pytest.fixture(scope="module")
def auditctl() -> Path:
    """The operator's CLI, built as local/demo.py builds it (the same debug build)."""
    env = dict(os.environ, CARGO_TERM_COLOR="never")
    subprocess.run(["cargo", "build", "--quiet", "--bin", "auditctl"], cwd=ROOT, env=env, check=True)
    return ROOT / "target" / "debug" / "auditctl"


@pytest.fixture
def system(work_dir):
    with LocalSystem(work_dir, visibility_timeout=2, archiver=True, archive_batching_window=2) as s:
        yield s


def problems(output: str) -> list[tuple[str, str]]:
    """The (kind, subject) of each problem line: `KIND  SUBJECT  DETAIL`, two spaces apart."""
    found = []
    for line in output.splitlines():
        fields = line.split("  ", 2)
        if fields[0] in KINDS:
            found.append((fields[0], fields[1] if len(fields) > 1 else ""))
    return found


def line_of(output: str, kind: str, subject: str) -> str:
    return next(line for line in output.splitlines() if line.startswith(f"{kind}  {subject}  "))


def iso(seconds: float) -> str:
    """RFC 3339, UTC, milliseconds."""
    at = datetime.fromtimestamp(seconds, timezone.utc)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def period_of_key(key: str) -> int:
    """The period start an archive object's or a digest's key names (`.../p<start>-...` or
    `.../p<start>.json`)."""
    return int(key.rsplit("/p", 1)[1].split("-", 1)[0].removesuffix(".json"))


def verify(binary: Path, system: LocalSystem, *args: str, attestations: bool = True) -> subprocess.CompletedProcess:
    """`auditctl verify ARGS` with the stack's variables (without its attestation key when not
    `attestations`); its output kept in the test's work dir (verify.log) for a look after a
    failure."""
    env = {**os.environ, **system.stack_env(), **({} if attestations else {"ATTESTATION_KEY_ID": ""})}
    argv = [str(binary), "verify", *args, "--no-audit-event"]
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    with open(system.work_dir / "verify.log", "a", encoding="utf-8") as log:
        log.write(f"$ auditctl {' '.join(argv[1:])}\n{run.stdout}{run.stderr}exit {run.returncode}\n\n")
    return run


def digest_periods(s3, bucket: str) -> list[int]:
    """The periods whose digest a plain listing shows (a delete marker hides one)."""
    return sorted(period_of_key(o["Key"]) for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix="digest/") for o in page.get("Contents", []))


def wait_until(instant: float) -> None:
    time.sleep(max(0.0, instant - time.time()))


def send_burst(system: LocalSystem, n: int, tag: str) -> float:
    """`n` events with no auditTime (the function takes SQS's SentTimestamp), drained and archived;
    returns a time after the last archive write."""
    for i in range(n):
        system.sqs.send_message(QueueUrl=system.queue_url, MessageBody=json.dumps(
            {"auditText": f"verified event {tag}{i}", "actor": "alice", "action": "user.login"}))
    assert system.wait_drained(120), f"burst {tag} was not drained"
    assert system.wait_archived(120), f"burst {tag} was not archived"
    return time.time()


def test_verify_passes_on_the_stacks_trail_then_reports_each_attack_with_its_kind_and_key(system, auditctl):
    s3 = _client("s3", system.endpoint)
    kms = _client("kms", system.endpoint)
    ddb = system.ddb
    bucket = system.stack.archive_bucket.name
    table = system.stack.table_name
    P = system.digest_period
    start_of = lambda t: int(t) // P * P  # noqa: E731

    # The chain starts when the schedule first runs: the newest sealable period of the empty
    # archive, a few (empty) periods before the first burst.
    end = time.monotonic() + 60
    while not digest_periods(s3, bucket):
        assert time.monotonic() < end, "the schedule sealed no first digest"
        time.sleep(0.5)
    genesis = digest_periods(s3, bucket)[0]
    wait_until(genesis + 3 * P)  # at least 3 periods of the chain before the first event

    # Three bursts: the second after a whole period with no write, the third in a later period.
    t = send_burst(system, BURSTS[0], "a")
    wait_until(start_of(t) + 2 * P + 0.3)
    t = send_burst(system, BURSTS[1], "b")
    wait_until(start_of(t) + P + 0.3)
    t = send_burst(system, BURSTS[2], "c")
    last = start_of(t)  # every archive write is in this period or an earlier one
    assert system.wait_sealed(t, 120), "the period of the last archive write was not sealed"

    # What the archive holds, by period.
    objects = system.archive_objects("trail/")
    assert all(not o.get("DeleteMarker") for o in objects) and not system.archive_objects("tamper/")
    by_period: dict[int, list[dict]] = defaultdict(list)
    for o in sorted(objects, key=lambda o: o["Key"]):
        by_period[period_of_key(o["Key"])].append(o)
    events = sum(len(o["lines"]) for o in objects)
    assert events == len(system.scan_table()) == sum(BURSTS)
    periods = list(range(genesis, last + P, P))
    full = sorted(by_period)
    empty = [p for p in periods if p not in by_period]
    assert set(full) <= set(periods) and len(full) >= 3, full
    assert any(full[0] < p < full[-1] for p in empty), "no empty period between two with events"
    assert len([p for p in empty if p < full[0]]) >= 3, (genesis, full)

    # 1. The clean case: the whole chain, sealed; --table.
    frm, to = iso(genesis), iso(last + P - 0.001)
    clean = verify(auditctl, system, "--from", frm, "--to", to, "--table")
    out = clean.stdout
    assert clean.returncode == 0, out + clean.stderr
    assert problems(out) == [], out
    n, k = len(periods), len(objects)
    assert f"periods   {n} checked: {n} sealed ({len(empty)} empty), 0 not sealed yet, " \
           f"0 without a usable digest\n" in out, out
    assert "\ntrail     " not in out, out
    assert f"objects   {k} checked ({k} trail, 0 tamper); 0 not covered by a digest" in out, out
    assert f"events    {events} checked ({events} trail, 0 tamper)" in out, out
    assert f"items     {events} archived events looked up in the table, {events} found as archived\n" in out, out
    assert f"items     {events} items of the table in the range looked up in the archive, {events} archived;" \
        in out, out
    # The transparency log the sealer wrote from the chain's first digest: every line a leaf.
    assert f"log       the log begins at {digest_key(genesis)}; tree sizes 0 to {events}: {events} leaves " \
           f"appended" in out, out
    assert out.endswith("problems  none: the trail is as sealed\n"), out

    # 2. The attacks. Every digest attacked is older than the chain's head (the digest of `last`
    # exists), so the sealer goes on chaining from a digest nobody touched.
    first, second, third = full[0], full[1], full[-1]
    overwritten = by_period[first][0]
    hidden = by_period[second][0]
    # The table: two events of objects left as they are, changed and deleted behind the
    # function's back.
    victims = [line for o in objects if o not in (overwritten, hidden) for line in o["lines"]][:2]
    changed_id, deleted_id = victims[0]["messageId"], victims[1]["messageId"]
    ddb.update_item(TableName=table, Key={"messageId": {"S": changed_id}, "auditTime": {"S": victims[0]["auditTime"]}},
                    UpdateExpression="SET actor = :a", ExpressionAttributeValues={":a": {"S": "mallory"}})
    ddb.delete_item(TableName=table, Key={"messageId": {"S": deleted_id}, "auditTime": {"S": victims[1]["auditTime"]}})
    # The archiver archives both as tamper events (a MODIFY, a REMOVE), in periods after the range
    # checked so far; they are sealed below and checked like any archive object.
    assert system.wait_archived(120), "the tamper records were not archived"
    tampered_at = time.time()

    # The archive. Deleting is refused by the bucket policy (a delete marker) and by Object Lock
    # (a locked version, even once the policy is gone): the attacker removes the policy, and
    # then a delete marker is all they can add.
    for key, version in ((hidden["Key"], None), (hidden["Key"], hidden["VersionId"])):
        with pytest.raises(ClientError):
            s3.delete_object(Bucket=bucket, Key=key, **({"VersionId": version} if version else {}))
    s3.delete_bucket_policy(Bucket=bucket)
    with pytest.raises(ClientError):
        s3.delete_object(Bucket=bucket, Key=hidden["Key"], VersionId=hidden["VersionId"])
    original = gzip.decompress(s3.get_object(Bucket=bucket, Key=overwritten["Key"])["Body"].read()).decode()
    rewritten = [json.loads(line) for line in original.splitlines()]
    rewritten[0]["actor"] = "mallory"
    s3.put_object(Bucket=bucket, Key=overwritten["Key"], ChecksumAlgorithm="SHA256",
                  Body=gzip.compress("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rewritten).encode()))
    s3.delete_object(Bucket=bucket, Key=hidden["Key"])
    # A key in a sealed period's place, as the archiver would name it, with another sequence.
    model = by_period[third][0]["Key"]
    head, seq, tail = model.rsplit("-", 2)
    slipped = f"{head}-{'9' * len(seq)}-{tail}"
    assert slipped not in {o["Key"] for o in objects}
    forged_line = dict(victims[0], messageId="forged", auditText="never happened")
    s3.put_object(Bucket=bucket, Key=slipped, ChecksumAlgorithm="SHA256",
                  Body=gzip.compress((json.dumps(forged_line, default=str, separators=(",", ":")) + "\n").encode()))

    # The transparency log: one hash of the partial tile the first period's leaves left changed
    # (a new version of the tile; every proof read from it would fail).
    first_size = sum(len(o["lines"]) for o in by_period[first])
    tile = f"log/tile/0/000.p/{first_size}"
    hashes = bytearray(s3.get_object(Bucket=bucket, Key=tile)["Body"].read())
    assert len(hashes) == 32 * first_size
    hashes[0] ^= 1
    s3.put_object(Bucket=bucket, Key=tile, Body=bytes(hashes), ChecksumAlgorithm="SHA256")

    # The digests.
    def sealed(period: int) -> tuple[str, dict, dict]:
        key = digest_key(period)
        got = s3.get_object(Bucket=bucket, Key=key)
        return key, json.loads(got["Body"].read()), got["Metadata"]

    def signing_string(body: dict, key: str, data: bytes) -> bytes:
        previous = body["previous"]["signature"] if body["previous"] else "null"
        return "\n".join(["audit-receiver-digest/1", body["periodEnd"], f"{bucket}/{key}",
                          hashlib.sha256(data).hexdigest(), previous]).encode()

    def compact(body: dict) -> bytes:
        return json.dumps(body, separators=(",", ":")).encode()

    # Hidden by a delete marker (its locked version cannot be deleted): the next period's digest
    # still links to the sealed version under the marker.
    deleted_digest = digest_key(first)
    [version] = s3.list_object_versions(Bucket=bucket, Prefix=deleted_digest)["Versions"]
    with pytest.raises(ClientError):
        s3.delete_object(Bucket=bucket, Key=deleted_digest, VersionId=version["VersionId"])
    s3.delete_object(Bucket=bucket, Key=deleted_digest)
    # Written over: the hidden object taken out of the list, the old signature kept.
    altered, body, metadata = sealed(second)
    listed = [o for o in body["objects"] if o["key"] == hidden["Key"]]
    assert listed, body
    body["objects"] = [o for o in body["objects"] if o["key"] != hidden["Key"]]
    body["events"] -= listed[0]["events"]
    s3.put_object(Bucket=bucket, Key=altered, Body=compact(body), Metadata=metadata, ChecksumAlgorithm="SHA256")
    # Re-signed with another key: once naming it, once in the name of the digest key.
    other = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["Arn"]
    stack_key = system.stack_env()["DIGEST_KEY_ID"]
    assert other != stack_key
    resigned, forged = (digest_key(p) for p in [p for p in empty if p < first][-2:])
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    other_public = serialization.load_der_public_key(kms.get_public_key(KeyId=other)["PublicKey"])
    for key, key_id in ((resigned, other), (forged, stack_key)):
        _, body, _ = sealed(period_of_key(key))
        body["keyId"] = key_id
        body["sealedAt"] = iso(time.time())
        data = compact(body)
        message = signing_string(body, key, data)
        signature = kms.sign(KeyId=other, Message=message, MessageType="RAW",
                             SigningAlgorithm="ECDSA_SHA_256")["Signature"]
        other_public.verify(signature, message, ec.ECDSA(hashes.SHA256()))  # a good signature, of the other key
        s3.put_object(Bucket=bucket, Key=key, Body=data, ChecksumAlgorithm="SHA256",
                      Metadata={"signature": signature.hex(), "signature-algorithm": "ECDSA_SHA_256"})

    # A period the stack never sealed: once the tamper objects' periods are sealed, the schedule
    # stops; the period after the chain's head becomes due with no digest.
    assert system.wait_sealed(tampered_at, 120), "the tamper objects' period was not sealed"
    system.scheduler.stop()
    assert system.scheduler.stats.errors == 0
    head = digest_periods(s3, bucket)[-1]
    assert head >= last
    unsealed = head + P
    wait_until(unsealed + P + 30 + 1)  # its end + SEAL_DELAY: due, with --grace 0
    assert digest_periods(s3, bucket)[-1] == head, "a digest was sealed after the schedule stopped"
    tamper = system.archive_objects("tamper/")
    assert tamper and all(last < period_of_key(o["Key"]) <= head for o in tamper), tamper
    tamper_events = sum(len(o["lines"]) for o in tamper)
    assert tamper_events == 2, tamper

    # Within the grace, the unsealed period is counted, not a problem.
    pending = verify(auditctl, system, "--from", iso(unsealed), "--to", iso(unsealed + P - 0.001))
    assert pending.returncode == 0, pending.stdout + pending.stderr
    assert f"periods   1 checked: 0 sealed (0 empty), 1 not sealed yet (the newest 1, from {iso(unsealed)[:19]}Z: " \
           f"within the grace, no digest is due before " in pending.stdout, pending.stdout

    # 3. One run over the whole chain up to that period, past its grace: each attack once, with
    # its kind and key, and nothing else (no broken link after the hidden digest).
    run = verify(auditctl, system, "--from", frm, "--to", iso(unsealed + P - 0.001), "--table", "--grace", "0")
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    expected = sorted([
        ("item changed", changed_id),
        ("item missing", deleted_id),
        ("item modified", changed_id),
        # The changed item no longer is what the receiver attested.
        ("item not attested", changed_id),
        ("item modified", deleted_id),
        ("object changed", overwritten["Key"]),
        ("object missing", hidden["Key"]),
        ("object not in digest", slipped),
        ("digest missing", deleted_digest),
        ("digest missing", digest_key(unsealed)),
        ("signature invalid", altered),
        ("signature invalid", resigned),
        ("signature invalid", forged),
        ("leaf missing", tile),
    ])
    assert sorted(problems(out)) == expected, out
    assert "actor changed" in line_of(out, "item changed", changed_id), out
    assert "a newer version" in line_of(out, "object changed", overwritten["Key"]), out
    assert "a delete marker hides it" in line_of(out, "object missing", hidden["Key"]), out
    assert "a delete marker hides it" in line_of(out, "digest missing", deleted_digest), out
    assert "no digest of the period" in line_of(out, "digest missing", digest_key(unsealed)), out
    assert "does not verify" in line_of(out, "signature invalid", altered), out
    assert f"signed by key {other}, not by the digest key" in line_of(out, "signature invalid", resigned), out
    assert "does not verify" in line_of(out, "signature invalid", forged), out
    assert "holds another hash at leaf 0" in line_of(out, "leaf missing", tile), out
    n = (unsealed - genesis) // P + 1
    assert f"periods   {n} checked: {n - 1} sealed (" in out, out
    assert ", 0 not sealed yet, 1 without a usable digest (digest missing or signature invalid: reported above)" \
        in out, out
    # The overwritten and the hidden objects are checked at their sealed versions, and the tamper
    # objects the archiver wrote of the attacks on the table like any other.
    k, t = len(objects), len(tamper)
    assert f"objects   {k + t} checked ({k} trail, {t} tamper); 0 not covered by a digest" in out, out
    assert f"events    {events + tamper_events} checked ({events} trail, {tamper_events} tamper)" in out, out
    assert f"items     {events} archived events looked up in the table, {events - 2} found as archived: 1 changed " \
           f"(item changed: reported above), 1 not in the table (item missing: reported above)" in out, out
    assert f"items     {events - 1} items of the table in the range looked up in the archive, {events - 1} archived;" \
        in out, out
    assert "problems  14 (2 digest missing, 3 signature invalid, 1 object changed, 1 object missing, " \
           "1 object not in digest, 1 item changed, 2 item modified, 1 item missing, 1 item not attested, " \
           "1 leaf missing)" in out, out


def _fnv1a_32(text: str) -> int:
    h = 2166136261
    for byte in text.encode():
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h


def audit_bucket(message_id: str, audit_time: str) -> str:
    """docs/events.md "The item": the UTC day and FNV-1a 32 of the messageId, modulo 32."""
    return f"{audit_time[:10]}#{_fnv1a_32(message_id) % 32:02d}"


def summary_line(output: str, name: str) -> str:
    return next((line for line in output.splitlines() if line.startswith(name)), "")


def wait_genesis(s3, bucket: str) -> int:
    """The chain's first digest, sealed by the schedule's first run."""
    end = time.monotonic() + 60
    while not digest_periods(s3, bucket):
        assert time.monotonic() < end, "the schedule sealed no first digest"
        time.sleep(0.5)
    return digest_periods(s3, bucket)[0]


def test_verify_reports_undone_tampering_and_a_planted_first_digest_and_counts_a_late_item(system, auditctl):
    s3 = _client("s3", system.endpoint)
    kms = _client("kms", system.endpoint)
    ddb = system.ddb
    bucket = system.stack.archive_bucket.name
    table = system.stack.table_name
    P = system.digest_period
    genesis = wait_genesis(s3, bucket)
    wait_until(genesis + 3 * P)
    send_burst(system, 3, "u")

    # Undone tampering: an item changed behind the function's back, then changed back. The table
    # holds what was archived again; the two MODIFY records are archived as tamper records.
    [victim] = [i for i in system.scan_table() if i["auditText"] == "verified event u0"]
    key = {"messageId": {"S": victim["messageId"]}, "auditTime": {"S": victim["auditTime"]}}
    for actor in ("mallory", victim["actor"]):
        ddb.update_item(TableName=table, Key=key, UpdateExpression="SET actor = :a",
                        ExpressionAttributeValues={":a": {"S": actor}})
    assert system.wait_archived(120), "the tamper records were not archived"

    # An item the stream delivered late: written (receivedAt) just after the chain began, before
    # the burst, and archived only now.
    received = genesis + P + 1
    assert time.time() - received > 25
    late_id, late_time = "late-1", iso(received)
    ddb.put_item(TableName=table, Item={
        "messageId": {"S": late_id}, "auditTime": {"S": late_time},
        "auditBucket": {"S": audit_bucket(late_id, late_time)}, "auditText": {"S": "delivered late"},
        "receivedAt": {"S": late_time}})
    assert system.wait_archived(120), "the late item was not archived"
    done = time.time()
    assert system.wait_sealed(done, 120), "the last archive write's period was not sealed"

    # The late item alone: not where --archive-lag looks (10 s), found later, counted.
    # The late item is put behind the function (it stands for a late stream record), so it
    # carries no attestation: these runs leave attestations out (the last test checks them).
    run = verify(auditctl, system, "--from", iso(received - 1), "--to", iso(received + 1), "--table",
                 "--archive-lag", "10", attestations=False)
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert problems(out) == [], out
    assert "\nitems     1 items of the table in the range looked up in the archive, 1 archived (1 late: found " \
           "beyond --archive-lag); " in out, out


    # A digest key planted three periods before the chain's first, signed by another key in the
    # name of the digest key (the attacker removes the bucket policy first).
    s3.delete_bucket_policy(Bucket=bucket)
    planted_period = genesis - 3 * P
    planted = digest_key(planted_period)
    body = {"format": "audit-receiver-digest/1", "bucket": bucket,
            "periodStart": datetime.fromtimestamp(planted_period, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "periodEnd": datetime.fromtimestamp(planted_period + P, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "periodSeconds": P, "sealedAt": iso(time.time()), "objects": [], "events": 0, "previous": None,
            "keyId": system.stack_env()["DIGEST_KEY_ID"], "signingAlgorithm": "ECDSA_SHA_256"}
    data = json.dumps(body, separators=(",", ":")).encode()
    message = "\n".join(["audit-receiver-digest/1", body["periodEnd"], f"{bucket}/{planted}",
                         hashlib.sha256(data).hexdigest(), "null"]).encode()
    other = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["Arn"]
    signature = kms.sign(KeyId=other, Message=message, MessageType="RAW",
                         SigningAlgorithm="ECDSA_SHA_256")["Signature"]
    s3.put_object(Bucket=bucket, Key=planted, Body=data, ChecksumAlgorithm="SHA256",
                  Metadata={"signature": signature.hex(), "signature-algorithm": "ECDSA_SHA_256"})
    assert digest_periods(s3, bucket)[0] == planted_period

    # One run from the planted period to the last write: the tampering, the planted key, and
    # nothing else (no digest missing between the planted key and the chain's first digest).
    last = int(done) // P * P
    run = verify(auditctl, system, "--from", iso(planted_period), "--to", iso(last + P - 0.001), "--table",
                 attestations=False)
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    assert sorted(problems(out)) == sorted([
        ("item modified", victim["messageId"]),
        ("item modified", victim["messageId"]),
        ("signature invalid", planted),
    ]), out
    assert "not the chain's start" in line_of(out, "signature invalid", planted), out
    assert "whether or not it was restored" in line_of(out, "item modified", victim["messageId"]), out
    assert summary_line(out, "chain ") == \
        f"chain     trusted from {digest_key(genesis)}: the chain's first digest (previous null)", out
    assert f"the range starts before the trail: its first period is {iso(genesis)[:19]}Z (digest " \
           f"{digest_key(genesis)}); the 3 period(s) before it are not counted" in out, out


def test_verify_never_passes_a_trail_whose_sealing_never_worked(work_dir, auditctl):
    system = LocalSystem(work_dir, visibility_timeout=2, archiver=True, archive_batching_window=2)
    system.stack.schedule.enabled = False  # the digest schedule never runs
    with system:
        s3 = _client("s3", system.endpoint)
        bucket = system.stack.archive_bucket.name
        t0 = time.time()
        t = send_burst(system, 4, "n")
        assert system.archive_objects("trail/"), "nothing was archived"
        assert digest_periods(s3, bucket) == []
        P = system.digest_period
        run = verify(auditctl, system, "--from", iso(t0 - P), "--to", iso(t + 1), "--table")
        out = run.stdout
        assert run.returncode == 1, out + run.stderr
        found = problems(out)
        assert found and all(kind == "trail not sealed" for kind, _ in found), out
        periods = {period_of_key(o["Key"]) for o in system.archive_objects("trail/")}
        assert {digest_key(p) for p in periods} <= {subject for _, subject in found}, out
        assert "holds no digest chain" in out, out
        assert summary_line(out, "chain ") == \
            f"chain     none: the bucket {bucket} holds no digest (never sealed, or not the archive: check --bucket)", out
        assert "problems  none" not in out, out


def test_an_item_put_in_the_table_behind_the_function_is_not_attested(system, auditctl):
    """Issue 34: a `PutItem` by anyone but the function, a real item's fields (its attestation
    among them) copied under a new messageId, is archived as an INSERT like any other. With the
    receiver's attestation key (the stack's ATTESTATION_KEY_ID), `verify --table` exits 1 with
    `item not attested <messageId>` and `get` says NOT ATTESTED; without it, nothing tells it
    apart and verify says attestations were not checked."""
    s3, ddb = _client("s3", system.endpoint), system.ddb
    bucket, table = system.stack.archive_bucket.name, system.stack.table_name
    assert system.stack_env()["ATTESTATION_KEY_ID"], "the stack's receiver has no attestation key"
    genesis = wait_genesis(s3, bucket)
    send_burst(system, 3, "r")
    [real] = [i for i in system.scan_table() if i["auditText"] == "verified event r0"]
    item = ddb.get_item(TableName=table, Key={"messageId": {"S": real["messageId"]},
                                              "auditTime": {"S": real["auditTime"]}})["Item"]
    assert "attestation" in item, item
    forged_id = "forged-put-1"
    forged = {**item, "messageId": {"S": forged_id},
              "auditBucket": {"S": audit_bucket(forged_id, real["auditTime"])}}
    ddb.put_item(TableName=table, Item=forged)
    assert system.wait_archived(120), "the foreign item was not archived"
    done = time.time()
    assert system.wait_sealed(done, 120), "the foreign item's period was not sealed"
    frm, to = iso(genesis), iso(done)

    run = verify(auditctl, system, "--from", frm, "--to", to, "--table")
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    found = problems(out)
    assert ("item not attested", forged_id) in found, out
    assert found.count(("item not attested", forged_id)) == 1, out
    assert {subject for _, subject in found} == {forged_id}, out
    assert "its attestation's batch signature does not hold" in line_of(out, "item not attested", forged_id), out
    key_arn = system.stack.function.environment["ATTESTATION_KEY_ID"]
    assert summary_line(out, "attested ").startswith("attested  "), out
    assert "item line(s) checked" in summary_line(out, "attested "), out
    assert key_arn.rsplit("/", 1)[-1] in summary_line(out, "attested "), out

    env = {**os.environ, **system.stack_env()}
    for message_id, verdict in ((forged_id, "NOT ATTESTED: its attestation's batch signature does not hold"),
                                (real["messageId"], "yes")):
        got = subprocess.run([str(auditctl), "get", message_id, "--format", "jsonl", "--no-audit-event"],
                             env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert got.returncode == 0, got.stdout + got.stderr
        [row] = [json.loads(line) for line in got.stdout.splitlines()]
        assert row["attested"] == verdict, row

    # Without the key nothing tells the foreign item apart, and verify says so.
    unchecked = subprocess.run([str(auditctl), "verify", "--from", frm, "--to", to, "--table", "--no-audit-event"],
                               env={**env, "ATTESTATION_KEY_ID": ""}, capture_output=True, text=True,
                               timeout=300, cwd=ROOT)
    assert unchecked.returncode == 0, unchecked.stdout + unchecked.stderr
    assert "attested  attestations not checked: set ATTESTATION_KEY_ID" in unchecked.stdout, unchecked.stdout
