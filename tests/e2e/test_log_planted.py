"""A tile and a checkpoint planted under `log/` at the names the sealer is about to create, on the
local stack (moto's server, the real receiver, archiver, seal schedule and local witness), by an
insider the bucket policy no longer stops (someone who could change the policy took it out first):
the sealer passes them over for their first alternates (`<name>.1`, docs/archive.md "Planted log
objects") and goes on; `prove` proves in that tree from the alternates, the witness cosigns it,
and `verify` names each planted object as `log object planted`.

Every wait is on the stack's own states (drained, caught up, sealed, checkpoint and cosignature
written); none races the clock."""

import json
import time

from local.harness import _client
from test_prove import auditctl, iso, run, system, wait_logged  # noqa: F401 - fixtures
from test_prove_attacks import newest_checkpoint


def tile_key(size: int) -> str:
    """The level-0 partial tile of the tree of ``size`` leaves (c2sp.org/tlog-tiles)."""
    index, width = divmod(size, 256)
    parts = []
    while True:
        index, digits = divmod(index, 1000)
        parts.append(digits)
        if index == 0:
            break
    path = "/".join(("x" if i + 1 < len(parts) else "") + f"{d:03d}" for i, d in enumerate(reversed(parts)))
    return f"log/tile/0/{path}.p/{width}"


def wait_for(s3, bucket: str, key: str, timeout: float = 180) -> None:
    end = time.monotonic() + timeout
    while "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix=key):
        assert time.monotonic() < end, f"{key} was not written"
        time.sleep(0.5)


def test_a_planted_tile_and_checkpoint_are_passed_over_and_reported(system, auditctl):
    started = time.time()
    first = [f"before-{i}" for i in range(3)]
    for message_id in first:
        system.sqs.send_message(QueueUrl=system.queue_url, MessageBody=json.dumps(
            {"messageId": message_id, "auditTime": iso(time.time()), "actor": "alice", "action": "invoice.pay"}))
    assert system.wait_drained(120), "the audit queue was not drained"
    assert system.wait_archived(120), "the archiver did not catch up"
    wait_logged(system, time.time(), 180)

    s3 = _client("s3", system.endpoint)
    bucket = system.stack.archive_bucket.name
    s3.delete_bucket_policy(Bucket=bucket)
    size = newest_checkpoint(s3, bucket)
    n = 5 if (size + 5) % 256 else 6
    target = size + n
    checkpoint = f"log/checkpoints/{target:020}"
    tile = tile_key(target)
    junk_checkpoint = f"audit-receiver/{bucket}\n{target}\nAAAA\n\n\u2014 someone AAAAAAAA\n".encode()
    for key, body in [(checkpoint, junk_checkpoint), (tile, b"\x07" * 32 * (target % 256))]:
        s3.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*", ChecksumAlgorithm="SHA256")

    batch = [f"after-{i}" for i in range(n)]
    for message_id in batch:
        system.sqs.send_message(QueueUrl=system.queue_url, MessageBody=json.dumps(
            {"messageId": message_id, "auditTime": iso(time.time()), "actor": "alice", "action": "invoice.pay"}))
    assert system.wait_drained(120), "the audit queue was not drained"
    assert system.wait_archived(120), "the archiver did not catch up"
    # Sealing goes on: the checkpoint and the tile under their first alternates.
    wait_for(s3, bucket, checkpoint + ".1")
    wait_for(s3, bucket, tile + ".1")
    assert s3.get_object(Bucket=bucket, Key=checkpoint)["Body"].read() == junk_checkpoint, "left as it is"

    vkey = system.stack_env()["WITNESS_KEY"]
    witness_id = vkey.split("+")[1]
    wait_for(s3, bucket, f"log/cosignatures/{target:020}/{witness_id}")

    proved = run(auditctl, system, "prove", batch[-1], "--tree-size", str(target))
    assert proved.returncode == 0, proved.stdout + proved.stderr
    proof = json.loads(proved.stdout)
    assert proof["treeSize"] == target
    assert proof["checkpoint"].startswith(f"audit-receiver/{bucket}\n{target}\n")

    verified = run(auditctl, system, "verify", "--from", iso(started - 60), "--to", iso(time.time()),
                   "--no-audit-event")
    out = verified.stdout + verified.stderr
    assert verified.returncode != 0, out
    planted = [line for line in out.splitlines() if "log object planted" in line]
    assert any(checkpoint in line and checkpoint + ".1" not in line for line in planted), out
    assert any(tile in line and tile + ".1" not in line for line in planted), out
    assert not [line for line in out.splitlines()
                if any(kind in line for kind in ("checkpoint inconsistent", "leaf missing"))], out
