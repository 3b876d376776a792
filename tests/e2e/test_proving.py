"""docs/operations.md "Proving the trail" shows how anyone checks a digest without our code: the
AWS CLI, jq, xxd and openssl against the local stack. This runs that block exactly as the docs
print it (extracted from the Markdown), in bash, with `.local/stack.env`'s variables, after the
real archiver sealed the trail: openssl must say `Verified OK` and every listed object's hash
must match. A digest is checked as it was sealed, its oldest version: a newer version written
over it, even one carrying a valid signature by the digest key (what a principal that may sign
could forge: ForeignSignAlarm), is reported and never checked instead. And the same block against
a digest whose sealed bytes do not match their signature fails: the check is not a formality."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from local.harness import LocalSystem, _client

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "operations.md"


def documented_block() -> str:
    text = DOC.read_text()
    m = re.search(r"<!-- proving-the-trail:openssl -->\n```bash\n(.*?)\n```", text, re.S)
    assert m, "docs/operations.md lost its openssl example (marker proving-the-trail:openssl)"
    return m.group(1)


def run_block(system: LocalSystem, block: str) -> subprocess.CompletedProcess:
    for tool in ("aws", "jq", "xxd", "openssl", "sha256sum", "base64"):
        assert shutil.which(tool), f"{tool} is needed by the documented check (aws: `make venv`)"
    env = {**os.environ, **system.stack_env()}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def system(work_dir):
    with LocalSystem(work_dir, visibility_timeout=2, archiver=True, archive_batching_window=2) as s:
        yield s


def test_the_documented_openssl_check_verifies_a_sealed_digest_and_fails_on_a_changed_one(system):
    for i in range(12):
        system.sqs.send_message(QueueUrl=system.queue_url, MessageBody=json.dumps(
            {"auditText": f"proved event {i}", "actor": "alice", "action": "user.login"}))
    assert system.wait_drained(120)
    assert system.wait_archived(120)
    assert system.wait_sealed(time.time(), 120), "the last archive write's period was not sealed"

    block = documented_block()
    good = run_block(system, block)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Verified OK" in good.stdout, good.stdout + good.stderr

    # The digest that lists the archive's objects: its objects are each checked.
    s3 = _client("s3", system.endpoint)
    bucket = system.stack.archive_bucket.name
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="digest/")
            for o in page.get("Contents", [])]
    with_objects = [k for k in keys if json.loads(s3.get_object(Bucket=bucket, Key=k)["Body"].read())["objects"]]
    assert with_objects, "no digest lists an object"
    listed = json.loads(s3.get_object(Bucket=bucket, Key=with_objects[-1])["Body"].read())["objects"]
    pinned = block.replace("--query 'Contents[-1].Key' --output text)", f"--query 'Contents[-1].Key' --output text); key={with_objects[-1]}")
    assert pinned != block
    checked = run_block(system, pinned)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Verified OK" in checked.stdout
    assert checked.stdout.count("SHA-256 OK") == len(listed), checked.stdout

    # An insider who may change the bucket policy takes it out (CloudTrail records PutBucketPolicy;
    # docs/operations.md "Threat model"), and one who may sign with the digest key (the key policy
    # lets only the archiver's role: ForeignSignAlarm fires in AWS; moto enforces no key policy)
    # writes a newer version over the digest, one object fewer, validly signed over its own bytes: a
    # check that read the current version would verify it and its shorter list.
    s3.delete_bucket_policy(Bucket=bucket)
    kms = _client("kms", system.endpoint)
    digest_key_id = system.stack_env()["DIGEST_KEY_ID"]
    key = with_objects[-1]
    got = s3.get_object(Bucket=bucket, Key=key)
    sealed_bytes = got["Body"].read()
    body = json.loads(sealed_bytes)
    dropped = body["objects"].pop()
    body["events"] -= dropped["events"]
    forged = json.dumps(body, separators=(",", ":")).encode()
    signed = "\n".join([body["format"], body["periodEnd"], f"{bucket}/{key}", hashlib.sha256(forged).hexdigest(),
                        body["previous"]["signature"] if body["previous"] else "null"]).encode()
    signature = kms.sign(KeyId=digest_key_id, Message=signed, MessageType="RAW",
                         SigningAlgorithm="ECDSA_SHA_256")["Signature"]
    s3.put_object(Bucket=bucket, Key=key, Body=forged, ChecksumAlgorithm="SHA256",
                  Metadata={**got["Metadata"], "signature": signature.hex()})
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == forged
    over = run_block(system, pinned)
    assert over.returncode == 0, over.stdout + over.stderr
    assert f"{key}: written over 1 time(s) since it was sealed" in over.stdout, over.stdout
    assert "Verified OK" in over.stdout
    # The sealed list, every object of it, the dropped one included.
    assert over.stdout.count("SHA-256 OK") == len(listed), over.stdout
    assert f"{dropped['key']}: SHA-256 OK" in over.stdout, over.stdout

    # Not a formality: a digest whose sealed (oldest) version does not match its signature (the
    # sealed bytes with one event fewer, under a name nothing sealed) fails it.
    altered = json.loads(sealed_bytes)
    altered["events"] -= 1
    planted = key.replace(".json", "-9.json")
    s3.put_object(Bucket=bucket, Key=planted, Body=json.dumps(altered, separators=(",", ":")).encode(),
                  Metadata=got["Metadata"], ChecksumAlgorithm="SHA256")
    bad = run_block(system, block.replace("--query 'Contents[-1].Key' --output text)",
                                          f"--query 'Contents[-1].Key' --output text); key={planted}"))
    assert bad.returncode != 0
    assert "Verification failure" in bad.stdout + bad.stderr, bad.stdout + bad.stderr
