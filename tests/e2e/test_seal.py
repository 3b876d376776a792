"""The local stack seals digests as the deployed one does: the real audit-archiver under `cargo
lambda watch`, invoked by the local schedule (the template's SealDigests, scaled down) with
EventBridge's Scheduled Event, signs with the stack's KMS key created from AuditDigestKey. The
digests are checked here without the project's code, as anyone could check them: the signing
string as crates/model/src/digest.rs documents it, the signature with the key's public key
fetched from KMS and the `cryptography` package, the chain link by link, and the objects each
digest lists against the archive's own listing. (`auditctl verify` has its own tests.)"""

import gzip
import hashlib
import json
import time
from collections import defaultdict

import pytest

from local.harness import LocalSystem, _client

MESSAGES = 40


def _digests(system: LocalSystem) -> list[tuple[str, bytes, dict, str]]:
    """Every digest, in period order: (key, bytes, body, signature hex)."""
    s3 = _client("s3", system.endpoint)
    bucket = system.stack.archive_bucket.name
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="digest/")
            for o in page.get("Contents", [])]
    out = []
    for key in sorted(keys, key=lambda k: int(k.rsplit("/p", 1)[1].removesuffix(".json"))):
        got = s3.get_object(Bucket=bucket, Key=key)
        data = got["Body"].read()
        out.append((key, data, json.loads(data), got["Metadata"]["signature"]))
    return out


def _signing_string(body: dict, bucket: str, key: str, data: bytes) -> bytes:
    previous = body["previous"]["signature"] if body["previous"] else "null"
    return "\n".join(["audit-receiver-digest/1", body["periodEnd"], f"{bucket}/{key}",
                      hashlib.sha256(data).hexdigest(), previous]).encode()


@pytest.fixture
def system(work_dir):
    with LocalSystem(work_dir, visibility_timeout=2, archiver=True, archive_batching_window=2) as s:
        yield s


def test_the_local_schedule_seals_a_signed_chain_of_every_period(system):
    sqs = system.sqs
    for i in range(MESSAGES):
        sqs.send_message(QueueUrl=system.queue_url, MessageBody=json.dumps(
            {"auditText": f"sealed event {i}", "actor": "alice", "action": "user.login"}))
    assert system.wait_drained(120)
    assert system.wait_archived(120)
    archived_at = time.time()
    period = system.digest_period
    # Sealable SEAL_DELAY (30 s) after the period ends, then at the next run: 15 + 30 + 5 s at most.
    assert system.wait_sealed(archived_at, 120), "the period of the last archive write was not sealed"

    digests = _digests(system)
    bucket = system.stack.archive_bucket.name
    key_arn = system.stack.archiver.environment["DIGEST_KEY_ID"]
    assert key_arn == system.stack_env()["DIGEST_KEY_ID"] == system.stack.digest_key.arn

    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    der = _client("kms", system.endpoint).get_public_key(KeyId=key_arn)["PublicKey"]
    public_key = serialization.load_der_public_key(der)
    starts = []
    for i, (key, data, body, signature) in enumerate(digests):
        start = int(key.rsplit("/p", 1)[1].removesuffix(".json"))
        starts.append(start)
        assert body["periodSeconds"] == period and body["bucket"] == bucket
        assert body["keyId"] == key_arn and body["signingAlgorithm"] == "ECDSA_SHA_256"
        # Signed by the stack's key over the documented string (raises InvalidSignature if not).
        public_key.verify(bytes.fromhex(signature), _signing_string(body, bucket, key, data),
                          ec.ECDSA(hashes.SHA256()))
        if i == 0:
            assert body["previous"] is None  # the chain's first digest
        else:
            prev_key, prev_data, _, prev_signature = digests[i - 1]
            assert body["previous"] == {"key": prev_key, "sha256": hashlib.sha256(prev_data).hexdigest(),
                                        "signature": prev_signature}
    # One digest for every period from the first on, none missing, empty periods included.
    assert starts == list(range(starts[0], starts[-1] + period, period))
    assert any(not body["objects"] for _, _, body, _ in digests), "an empty period has its digest"

    # Each digest lists exactly its period's objects, at the version the archiver wrote, with
    # their SHA-256 and events; together they hold every item of the table once.
    s3 = _client("s3", system.endpoint)
    expected: dict[int, set] = defaultdict(set)
    events = 0
    for prefix in ("trail/", "tamper/"):
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
            assert not page.get("DeleteMarkers")
            for v in page.get("Versions", []):
                object_start = int(v["Key"].rsplit("/p", 1)[1].split("-", 1)[0])
                if object_start <= starts[-1]:
                    body = s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])["Body"].read()
                    lines = len(gzip.decompress(body).splitlines())
                    expected[object_start].add((v["Key"], v["VersionId"], hashlib.sha256(body).hexdigest(), lines))
                    events += lines
    listed = {int(k.rsplit("/p", 1)[1].removesuffix(".json")):
              {(o["key"], o["versionId"], o["sha256"], o["events"]) for o in body["objects"]}
              for k, _, body, _ in digests}
    assert {s: objs for s, objs in listed.items() if objs} == dict(expected)
    assert sum(body["events"] for _, _, body, _ in digests) == events == len(system.scan_table()) == MESSAGES
    # Every run went through: nothing but invocations in the schedule's log.
    assert system.scheduler.stats.errors == 0
