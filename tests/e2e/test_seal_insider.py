"""Sealing on the local stack against someone who can write to the archive bucket
(docs/operations.md "Threat model"): the real audit-archiver under `cargo lambda watch`, sealing on the local schedule.
Objects and digest names are planted straight into the bucket, as an insider with s3:PutObject
would plant them (the bucket policy that refuses them is tested on its own):

- a stray object that is neither gzip nor carries `events`, an object without a marker planted
  before its period is sealed, and a digest name taken ahead of time do not stop sealing: the
  period is sealed at its alternate name, the planted objects are listed as unattested with their
  reason, and the digests keep coming, the next one linked to the alternate;
- an object that lands, attested by its marker, in a period already sealed is voided, its lines
  are archived again in an open period (attested by the sealer's marker), and the next digest
  lists it as late."""

import gzip
import hashlib
import json
import time
from datetime import datetime, timezone

import pytest

from local.harness import LocalSystem, _client, digest_key


@pytest.fixture
def system(work_dir):
    with LocalSystem(work_dir, visibility_timeout=2, archiver=True, archive_batching_window=2) as s:
        # The insider here is one the bucket policy no longer stops (it refuses every object
        # write but the archiver's: test_bucket_policy.py): someone who could change the policy
        # took it out first. Sealing must still never trust what it did not write.
        _client("s3", s.endpoint).delete_bucket_policy(Bucket=s.stack.archive_bucket.name)
        yield s


def _object_key(start: int, seq: int, attempt: int = 0) -> str:
    """An archive object's key for period ``start``, written in the period's own hour."""
    hour = datetime.fromtimestamp(start, timezone.utc)
    return f"trail/dt={hour:%Y-%m-%d}/hour={hour:%H}/p{start}-{str(seq).zfill(40)}-a{attempt}.jsonl.gz"


def _lines(n: int, tag: str) -> bytes:
    return gzip.compress(b"".join(
        json.dumps({"messageId": f"{tag}-{i}", "auditText": f"planted {tag} {i}"}).encode() + b"\n"
        for i in range(n)), mtime=0)


def _digests(system: LocalSystem) -> dict[str, dict]:
    s3 = _client("s3", system.endpoint)
    bucket = system.stack.archive_bucket.name
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="digest/"):
        for o in page.get("Contents", []):
            out[o["Key"]] = o
    return out


def _read(system: LocalSystem, key: str) -> bytes:
    s3 = _client("s3", system.endpoint)
    return s3.get_object(Bucket=system.stack.archive_bucket.name, Key=key)["Body"].read()


def _digest_of(system: LocalSystem, start: int) -> tuple[str, dict] | None:
    """The chain's digest of the period ``start`` (its name or an alternate), if sealed."""
    base = digest_key(start).removesuffix(".json")
    keys = _digests(system)
    for name in [f"{base}.json"] + [f"{base}-{n}.json" for n in range(1, 10)]:
        if name in keys:
            try:
                body = json.loads(_read(system, name))
            except ValueError:
                continue
            if body.get("periodStart") == datetime.fromtimestamp(start, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"):
                return name, body
    return None


# A period is sealed SEAL_DELAY (30 s) after it ends, at the next run of the local schedule: a
# period that starts within the next few is sealed well within this.
SEALED_WITHIN = 240


def _wait(predicate, timeout: float = SEALED_WITHIN):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = predicate()
        if got:
            return got
        time.sleep(0.5)
    return None


def _put_attested(system: LocalSystem, start: int, seq: int, tag: str, n: int) -> tuple[str, bytes]:
    """Records archived as audit-archiver archives them: its marker (version 2, the object's
    SHA-256), then the object naming the marker."""
    s3 = _client("s3", system.endpoint)
    bucket = system.stack.archive_bucket.name
    key = _object_key(start, seq)
    body = _lines(n, tag)
    run = [[str(seq + i), f"{tag}{i:04d}"] for i in range(n)]
    marker_key = f"state/{str(seq).zfill(40)}-{tag}0000/a0.json"
    marker = {"version": 2, "run": run,
              "objects": [{"key": key, "events": list(range(n)), "sha256": hashlib.sha256(body).hexdigest()}],
              "writeBy": 0}
    s3.put_object(Bucket=bucket, Key=marker_key, Body=json.dumps(marker, separators=(",", ":")).encode(),
                  ChecksumAlgorithm="SHA256")
    s3.put_object(Bucket=bucket, Key=key, Body=body, ChecksumAlgorithm="SHA256",
                  ContentType="application/gzip", Metadata={"events": str(n), "marker": marker_key})
    return key, body


def test_strays_planted_objects_and_a_taken_digest_name_do_not_stop_sealing(system):
    s3 = _client("s3", system.endpoint)
    bucket = system.stack.archive_bucket.name
    period = system.digest_period
    # A period that has not begun: everything is in its place before it is sealed.
    target = (int(time.time()) // period + 3) * period
    stray = _object_key(target, 7)
    s3.put_object(Bucket=bucket, Key=stray, Body=b"this is not gzip", ChecksumAlgorithm="SHA256")
    unmarked = _object_key(target, 8)
    s3.put_object(Bucket=bucket, Key=unmarked, Body=_lines(2, "unmarked"), ChecksumAlgorithm="SHA256",
                  Metadata={"events": "2"})
    squatted = digest_key(target)
    s3.put_object(Bucket=bucket, Key=squatted, Body=b'{"taken":true}', ChecksumAlgorithm="SHA256")

    # Sealed at its first alternate name; the digests keep coming after it.
    alternate = squatted.removesuffix(".json") + "-1.json"
    after = target + 2 * period
    assert _wait(lambda: _digest_of(system, after)), \
        f"sealing stopped: no digest of {after} (digests: {sorted(_digests(system))[-5:]})"
    name, body = _digest_of(system, target)
    assert name == alternate
    reasons = {u["key"]: u["reason"] for u in body["unattested"]}
    assert reasons[stray] == "neither gzip nor carrying an events count"
    assert reasons[unmarked] == "no marker names it"
    assert reasons[unmarked] and all(o["key"] not in (stray, unmarked) for o in body["objects"])
    unmarked_entry = next(u for u in body["unattested"] if u["key"] == unmarked)
    assert unmarked_entry["sha256"] == hashlib.sha256(_lines(2, "unmarked")).hexdigest()
    _, next_body = _digest_of(system, target + period)
    assert next_body["previous"]["key"] == alternate
    assert next_body["previous"]["sha256"] == hashlib.sha256(_read(system, alternate)).hexdigest()
    # The squatted name still holds what was put there: never overwritten.
    assert _read(system, squatted) == b'{"taken":true}'
    assert system.scheduler.stats.errors == 0


def test_an_object_landing_after_its_period_was_sealed_is_archived_again_and_listed_late(system):
    period = system.digest_period
    sealed = (int(time.time()) // period - 1) * period
    assert _wait(lambda: _digest_of(system, sealed)), "the period was not sealed"
    late_key, late_body = _put_attested(system, sealed, 4421584500000000017000000100, "late", 3)

    def listed_late():
        for start in range(sealed + period, sealed + 8 * period, period):
            got = _digest_of(system, start)
            if got:
                for entry in got[1].get("late", []):
                    if entry["key"] == late_key:
                        return start, entry
        return None

    found = _wait(listed_late)
    assert found, "the late object was never listed as late"
    start, entry = found
    assert entry["sha256"] == hashlib.sha256(late_body).hexdigest()
    assert entry["events"] == 3
    again = entry["archivedAs"]
    assert again and again != late_key
    # Voided by the sealer; its lines again in an object of a later, open period.
    void = json.loads(_read(system, f"state/void/{late_key}.json"))
    assert void["by"] == "seal"
    assert gzip.decompress(_read(system, again)) == gzip.decompress(late_body)
    again_start = int(again.rsplit("/p", 1)[1].split("-", 1)[0])
    assert again_start > sealed
    # Its period's digest lists it as the trail, attested by the sealer's marker; listed late once.
    got = _wait(lambda: _digest_of(system, again_start))
    assert got, "the period of the object archived again was not sealed"
    listed = {o["key"]: o for o in got[1]["objects"]}
    assert again in listed and listed[again]["marker"].startswith(f"state/late/{late_key}/")
    assert _wait(lambda: _digest_of(system, again_start + 2 * period))
    lates = [e for s in range(sealed + period, again_start + 3 * period, period)
             for e in (_digest_of(system, s) or ("", {}))[1].get("late", []) if e["key"] == late_key]
    assert len(lates) == 1, lates
    assert system.scheduler.stats.errors == 0
