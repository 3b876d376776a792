"""The local stack's witness over the real sealer's log: the real audit-archiver seals periods
into tiles and signed checkpoints (the local schedule), the witness runs after each seal run
(local/witness.py, the real auditctl), and every checkpoint gets its cosignature, checked here
without the project's code: C2SP tlog-cosignature (Ed25519 over `cosignature/v1`, the time and the
checkpoint's text) with the `cryptography` package and the public key WITNESS_KEY in the stack's
environment."""

import base64
import json
import time

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from local.harness import LocalSystem, _client

MESSAGES = 20


def test_the_witness_cosigns_every_checkpoint_the_sealer_writes(work_dir):
    with LocalSystem(work_dir, visibility_timeout=2, archiver=True, archive_batching_window=2) as system:
        for i in range(MESSAGES):
            system.sqs.send_message(QueueUrl=system.queue_url, MessageBody=json.dumps(
                {"auditText": f"witnessed event {i}", "actor": "alice", "action": "user.login"}))
        assert system.wait_drained(120)
        assert system.wait_archived(120)
        assert system.wait_sealed(time.time(), 120), "the period of the last archive write was not sealed"
        vkey = system.stack_env()["WITNESS_KEY"]
        assert vkey == (work_dir / "witness" / "key.pub").read_text().strip()
        name, key_id, key = vkey.split("+", 2)
        public = Ed25519PublicKey.from_public_bytes(base64.b64decode(key)[1:])
        s3 = _client("s3", system.endpoint)
        bucket = system.stack.archive_bucket.name
        sizes = [int(o["Key"].rsplit("/", 1)[1]) for o in
                 s3.list_objects_v2(Bucket=bucket, Prefix="log/checkpoints/").get("Contents", [])]
        assert sizes and max(sizes) >= MESSAGES, sizes
        # The witness runs after the seal run that wrote the newest checkpoint: wait for it.
        newest = f"log/cosignatures/{max(sizes):020}/{key_id}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not s3.list_objects_v2(Bucket=bucket, Prefix=newest).get("KeyCount"):
            time.sleep(0.5)
        runs = [json.loads(line) for line in (work_dir / "witness.log").read_text().splitlines()]
        assert all(r["exit"] == 0 for r in runs), [r for r in runs if r["exit"]]
        for size in sizes:
            note = s3.get_object(Bucket=bucket, Key=f"log/checkpoints/{size:020}")["Body"].read().decode()
            body = note[:note.rindex("\n\n") + 1]
            line = s3.get_object(Bucket=bucket, Key=f"log/cosignatures/{size:020}/{key_id}")["Body"].read().decode()
            assert line.startswith(f"\u2014 {name} ") and line.endswith("\n"), line
            raw = base64.b64decode(line.rsplit(" ", 1)[1])
            assert raw[:4].hex() == key_id
            timestamp = int.from_bytes(raw[4:12], "big")
            assert abs(timestamp - time.time()) < 600
            # Raises InvalidSignature if it does not hold.
            public.verify(raw[12:], f"cosignature/v1\ntime {timestamp}\n{body}".encode())
        state = json.loads((work_dir / "witness" / "state.json").read_text())
        assert state["size"] == max(sizes) and state["origin"] == f"audit-receiver/{bucket}"
