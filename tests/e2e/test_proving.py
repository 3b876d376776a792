"""docs/operations.md "Proving the trail" shows how anyone checks a digest without our code: the
AWS CLI, jq, xxd and openssl against the local stack. This runs that block exactly as the docs
print it (extracted from the Markdown), in bash, with `.local/stack.env`'s variables, after the
real archiver sealed the trail: openssl must say `Verified OK` and every listed object's hash
must match. Then the same block against a digest whose bytes were changed (a newer version)
must fail: the check is not a formality."""

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

    # A newer version of that digest with one event fewer (same signature metadata): openssl refuses.
    got = s3.get_object(Bucket=bucket, Key=with_objects[-1])
    body = json.loads(got["Body"].read())
    body["events"] -= 1
    s3.put_object(Bucket=bucket, Key=with_objects[-1], Body=json.dumps(body, separators=(",", ":")).encode(),
                  Metadata=got["Metadata"], ChecksumAlgorithm="SHA256")
    bad = run_block(system, pinned)
    assert bad.returncode != 0
    assert "Verification failure" in bad.stdout + bad.stderr, bad.stdout + bad.stderr
