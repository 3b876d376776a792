"""Objects planted under `log/cosignatures/` (the bucket policy lets anyone with `s3:PutObject` add
one there) against `auditctl prove` on the local stack (moto's server, the real receiver, archiver,
seal schedule and local witness): a cosignature of a tree size no checkpoint has
(18446744073709551615), a line bearing the log's own name and key id on the newest checkpoint, an
object far larger than one signature line. `prove` still proves: its tree size comes only from a
cosignature that verifies under `--witness-key` (else the newest checkpoint), no planted line is
merged into the checkpoint, and check-proof and the docs' script accept the proof.

Every wait is on the stack's own states (drained, caught up, sealed, checkpoint and cosignature
written); none races the clock."""

import base64
import hashlib
import json
import os
import subprocess
import sys
import time

import pytest
from cryptography.hazmat.primitives import serialization

from local import procs
from local.harness import _client
from local.stack import DEFAULT_TEMPLATE, create_stack, read_stack
from test_prove import auditctl, documented_script, iso, run, system, wait_logged  # noqa: F401 - fixtures

LARGEST = 2**64 - 1


def newest_checkpoint(s3, bucket: str) -> int:
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="log/checkpoints/").get("Contents", [])]
    return max(int(k.rsplit("/", 1)[1]) for k in keys)


def test_planted_cosignatures_neither_stop_prove_nor_steer_its_tree_size_nor_enter_its_checkpoint(system, auditctl):
    batch = [f"planted-{i}" for i in range(4)]
    for message_id in batch:
        system.sqs.send_message(QueueUrl=system.queue_url, MessageBody=json.dumps(
            {"messageId": message_id, "auditTime": iso(time.time()), "actor": "alice", "action": "invoice.pay"}))
    assert system.wait_drained(120), "the audit queue was not drained"
    assert system.wait_archived(120), "the archiver did not catch up"
    wait_logged(system, time.time(), 180)

    s3 = _client("s3", system.endpoint)
    bucket = system.stack.archive_bucket.name
    size = newest_checkpoint(s3, bucket)
    vkey = system.stack_env()["WITNESS_KEY"]
    witness_name, witness_id = vkey.split("+")[:2]
    mine = f"log/cosignatures/{size:020}/{witness_id}"
    end = time.monotonic() + 120
    while not s3.list_objects_v2(Bucket=bucket, Prefix=mine).get("KeyCount"):
        assert time.monotonic() < end, f"the local witness did not cosign the checkpoint of size {size}"
        time.sleep(0.5)

    der = _client("kms", system.endpoint).get_public_key(KeyId=system.stack_env()["DIGEST_KEY_ID"])["PublicKey"]
    log_id = hashlib.sha256(der).digest()[:4]
    origin = f"audit-receiver/{bucket}"

    def line(name: str, key_id: bytes) -> bytes:
        return f"\u2014 {name} {base64.b64encode(key_id + bytes(72)).decode()}\n".encode()

    planter = _client("s3", system.endpoint)  # under the bucket policy: it may only add a cosignature
    for key, body in [
        (f"log/cosignatures/{LARGEST:020}/{witness_id}", line(witness_name, bytes.fromhex(witness_id))),
        (f"log/cosignatures/{size:020}/{log_id.hex()}", line(origin, log_id)),
        (f"log/cosignatures/{size:020}/00000000", b"x" * 200_000),
    ]:
        planter.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*", ChecksumAlgorithm="SHA256")

    work = system.work_dir
    pem = serialization.load_der_public_key(der).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    (work / "key.pem").write_bytes(pem)
    (work / "check_proof.py").write_text(documented_script())
    message_id = batch[0]
    for args in ([], ["--witness-key", vkey]):
        proved = run(auditctl, system, "prove", message_id, *args)
        assert proved.returncode == 0, proved.stdout + proved.stderr
        proof = json.loads(proved.stdout)
        assert proof["treeSize"] == size, proof["treeSize"]
        assert f"\u2014 {origin} " in proof["checkpoint"]
        assert proof["checkpoint"].count(f"\u2014 {origin} ") == 1, proof["checkpoint"]
        path = work / "proof.json"
        path.write_text(proved.stdout)
        checked = run(auditctl, system, "check-proof", str(path), "--public-key", str(work / "key.pem"),
                      "--origin", origin, "--witness-key", vkey, env={"PATH": os.environ.get("PATH", "")})
        assert checked.returncode == 0, checked.stdout + checked.stderr
        script = subprocess.run([sys.executable, str(work / "check_proof.py"), str(path), str(work / "key.pem"),
                                 origin],
                                capture_output=True, text=True, timeout=60)
        assert script.returncode == 0, script.stdout + script.stderr


@pytest.fixture
def stack(work_dir):
    proc, endpoint = procs.start_moto(work_dir)
    try:
        yield create_stack(read_stack(DEFAULT_TEMPLATE), endpoint), endpoint
    finally:
        proc.stop()


def test_a_proof_of_another_log_signed_by_the_stacks_key_is_refused_offline(stack, auditctl, work_dir):
    """Whoever can sign with the digest key (or a second stack sharing it) makes a proof whose
    checkpoint names another log: its signature and path hold, so only the origin tells it from
    this log's. check-proof --origin and the docs' script, given this stack's origin, refuse it."""
    from tlog_support import checkpoint, leaf

    st, endpoint = stack
    bucket, key_arn = st.archive_bucket.name, st.archiver.environment["DIGEST_KEY_ID"]
    kms = _client("kms", endpoint)
    line = '{"auditTime":"2026-11-22T10:00:00.000Z","messageId":"elsewhere-1"}'
    proof = {"format": "audit-receiver-proof/1", "messageId": "elsewhere-1",
             "auditTime": "2026-11-22T10:00:00.000Z", "line": line, "object": "trail/x.jsonl.gz",
             "lineNumber": 0, "leafIndex": 0, "treeSize": 1, "inclusionPath": [],
             "checkpoint": checkpoint(kms, key_arn, "elsewhere", 1, leaf(line.encode()))}
    path = work_dir / "elsewhere.json"
    path.write_text(json.dumps(proof))
    der = kms.get_public_key(KeyId=key_arn)["PublicKey"]
    (work_dir / "key.pem").write_bytes(serialization.load_der_public_key(der).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    (work_dir / "check_proof.py").write_text(documented_script())
    ours = f"audit-receiver/{bucket}"
    env = {"PATH": os.environ.get("PATH", "")}
    theirs = subprocess.run([str(auditctl), "check-proof", str(path), "--public-key", str(work_dir / "key.pem"),
                             "--origin", "audit-receiver/elsewhere"], env=env, capture_output=True, text=True)
    assert theirs.returncode == 0, theirs.stdout + theirs.stderr  # the proof itself holds
    checked = subprocess.run([str(auditctl), "check-proof", str(path), "--public-key", str(work_dir / "key.pem"),
                              "--origin", ours], env=env, capture_output=True, text=True)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert checked.stdout.startswith('FAILED: the checkpoint is of the log "audit-receiver/elsewhere"'), checked.stdout
    script = subprocess.run([sys.executable, str(work_dir / "check_proof.py"), str(path), str(work_dir / "key.pem"),
                             ours], capture_output=True, text=True, timeout=60)
    assert script.returncode == 1, script.stdout + script.stderr
    assert "FAILED: the checkpoint is of the log audit-receiver/elsewhere" in script.stderr, script.stderr
