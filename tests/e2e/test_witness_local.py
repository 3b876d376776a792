"""The local stack's witness (local/witness.py) against the local stack's bucket and key on moto,
with the real auditctl: its key is made once and kept, it cosigns the checkpoints the log adds, a
fork or a rollback shown to it is refused loudly (exit 1, REFUSED, logged) with nothing cosigned,
and a new stack's log starts from a new state. Run by local/harness.py after each seal run."""

import base64
import json

import pytest

from local import procs
from local.harness import _client
from local.stack import DEFAULT_TEMPLATE, create_stack, read_stack
from local.witness import LocalWitness, build_auditctl
from tlog_support import checkpoint, leaves, root, write_log


@pytest.fixture
def stack(work_dir):
    proc, endpoint = procs.start_moto(work_dir)
    try:
        yield create_stack(read_stack(DEFAULT_TEMPLATE), endpoint), endpoint
    finally:
        proc.stop()


def _sealer(endpoint, bucket):
    """The sealer's writes, let through the bucket policy (they are the archiver's)."""
    s3 = _client("s3", endpoint)
    policy = s3.get_bucket_policy(Bucket=bucket)["Policy"]
    s3.delete_bucket_policy(Bucket=bucket)
    return s3, lambda: s3.put_bucket_policy(Bucket=bucket, Policy=policy)


def test_the_local_witness_cosigns_what_extends_and_refuses_a_fork(stack, work_dir):
    st, endpoint = stack
    bucket, key_arn = st.archive_bucket.name, st.archiver.environment["DIGEST_KEY_ID"]
    kms = _client("kms", endpoint)
    env = procs.function_env({}, endpoint, {"ARCHIVE_BUCKET": bucket, "DIGEST_KEY_ID": key_arn})
    witness = LocalWitness(work_dir / "witness", build_auditctl(), env, work_dir / "witness.log")
    vkey = witness.init()
    assert vkey.startswith("witness.audit-receiver.local/local-stack+"), vkey
    assert witness.init() == vkey, "made once, then kept"
    assert (work_dir / "witness" / "key").stat().st_mode & 0o777 == 0o600

    assert witness.run().returncode == 0  # no checkpoint yet: nothing to cosign
    s3, restore = _sealer(endpoint, bucket)
    write_log(s3, kms, key_arn, bucket, [2, 5])
    restore()
    assert witness.run().returncode == 0
    keys = lambda: [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="log/cosignatures/").get("Contents", [])]  # noqa: E731
    assert [k.split("/")[2] for k in keys()] == [f"{2:020}", f"{5:020}"]
    state = (work_dir / "witness" / "state.json").read_text()

    # A fork: the key signs another tree of size 5, and a bigger one on top of it.
    s3, restore = _sealer(endpoint, bucket)
    other = leaves(9, "other")
    s3.put_object(Bucket=bucket, Key=f"log/checkpoints/{5:020}", ChecksumAlgorithm="SHA256",
                  Body=checkpoint(kms, key_arn, bucket, 5, b"\x07" * 32).encode())
    s3.put_object(Bucket=bucket, Key="log/tile/0/000.p/9", Body=b"".join(other), ChecksumAlgorithm="SHA256")
    s3.put_object(Bucket=bucket, Key=f"log/checkpoints/{9:020}", ChecksumAlgorithm="SHA256",
                  Body=checkpoint(kms, key_arn, bucket, 9, b"\x08" * 32).encode())
    restore()
    refused = witness.run()
    assert refused.returncode == 1 and refused.stderr.startswith("REFUSED: fork"), refused.stderr
    assert len(keys()) == 2, "nothing cosigned"
    assert (work_dir / "witness" / "state.json").read_text() == state
    log = [json.loads(line) for line in (work_dir / "witness.log").read_text().splitlines()]
    assert [e["exit"] for e in log] == [0, 0, 1] and "REFUSED: fork" in log[-1]["stderr"]
    assert witness.refusals == 1

    # A new stack is a new log: the state of this one is put aside, the key kept.
    witness.start_new_log()
    assert not (work_dir / "witness" / "state.json").exists()
    assert (work_dir / "witness" / "state.json.previous").read_text() == state
    assert witness.init() == vkey
    witness.close()


def test_a_rollback_is_refused(stack, work_dir):
    st, endpoint = stack
    bucket, key_arn = st.archive_bucket.name, st.archiver.environment["DIGEST_KEY_ID"]
    env = procs.function_env({}, endpoint, {"ARCHIVE_BUCKET": bucket, "DIGEST_KEY_ID": key_arn})
    witness = LocalWitness(work_dir / "witness", build_auditctl(), env)
    witness.init()
    s3, restore = _sealer(endpoint, bucket)
    write_log(s3, _client("kms", endpoint), key_arn, bucket, [4])
    restore()
    assert witness.run().returncode == 0
    # The witness is shown a bucket whose log is smaller than what it accepted.
    state = json.loads((work_dir / "witness" / "state.json").read_text())
    state["size"] = 40
    (work_dir / "witness" / "state.json").write_text(json.dumps(state))
    refused = witness.run()
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.startswith("REFUSED: rollback: the newest checkpoint is of size 4, smaller than the size 40")
    witness.close()


def test_a_slot_squatted_before_the_witness_is_refused_not_taken_for_its_cosignature(stack, work_dir):
    """Whoever may write under log/cosignatures/ (the bucket policy's one exception) writes junk
    in the witness's slot for the next checkpoint before the witness runs: the witness reads it
    back, finds it is not its own cosignature, exits 1 (REFUSED: slot taken) and keeps its state;
    it does not report the size as cosigned."""
    st, endpoint = stack
    bucket, key_arn = st.archive_bucket.name, st.archiver.environment["DIGEST_KEY_ID"]
    kms = _client("kms", endpoint)
    env = procs.function_env({}, endpoint, {"ARCHIVE_BUCKET": bucket, "DIGEST_KEY_ID": key_arn})
    witness = LocalWitness(work_dir / "witness", build_auditctl(), env)
    key_id = witness.init().split("+")[1]
    s3, restore = _sealer(endpoint, bucket)
    write_log(s3, kms, key_arn, bucket, [3])
    restore()
    assert witness.run().returncode == 0
    state = (work_dir / "witness" / "state.json").read_text()
    s3, restore = _sealer(endpoint, bucket)
    write_log(s3, kms, key_arn, bucket, [6])
    restore()
    slot = f"log/cosignatures/{6:020}/{key_id}"
    squatter = _client("s3", endpoint)  # under the bucket policy: it may only add a cosignature
    squatter.put_object(Bucket=bucket, Key=slot, Body=b"\xe2\x80\x94 junk AAAAAAAA\n", IfNoneMatch="*",
                        ChecksumAlgorithm="SHA256")

    refused = witness.run()
    assert refused.returncode == 1, refused.stdout
    assert refused.stderr.startswith(f"REFUSED: slot taken: {slot} was already written"), refused.stderr
    assert "cosigned checkpoint 6" not in refused.stdout, refused.stdout
    assert (work_dir / "witness" / "state.json").read_text() == state
    witness.close()


def test_the_witness_follows_the_configured_origin_and_cosigns_the_body_as_read(stack, work_dir):
    """The log's key signed, into this bucket, a checkpoint of another log: a witness on its first
    run (no state to take an origin from) refuses it (the origin is its configuration's:
    audit-receiver/<its bucket>) and cosigns nothing. A checkpoint of this log whose body carries an
    extension line is cosigned over that body as read, so that the cosignature holds on the
    stored checkpoint."""
    from cryptography.hazmat.primitives.asymmetric import ed25519

    st, endpoint = stack
    bucket, key_arn = st.archive_bucket.name, st.archiver.environment["DIGEST_KEY_ID"]
    kms = _client("kms", endpoint)
    env = procs.function_env({}, endpoint, {"ARCHIVE_BUCKET": bucket, "DIGEST_KEY_ID": key_arn})
    witness = LocalWitness(work_dir / "witness", build_auditctl(), env)
    vkey = witness.init()
    hashes = leaves(3)
    s3, restore = _sealer(endpoint, bucket)
    s3.put_object(Bucket=bucket, Key="log/tile/0/000.p/3", Body=b"".join(hashes), ChecksumAlgorithm="SHA256")
    s3.put_object(Bucket=bucket, Key=f"log/checkpoints/{3:020}", ChecksumAlgorithm="SHA256",
                  Body=checkpoint(kms, key_arn, "elsewhere", 3, root(hashes)).encode())
    restore()
    refused = witness.run()
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.stderr.startswith(
        f'REFUSED: another log: the checkpoint of size 3 is of origin "audit-receiver/elsewhere", '
        f'this witness follows "audit-receiver/{bucket}"'), refused.stderr
    assert not s3.list_objects_v2(Bucket=bucket, Prefix="log/cosignatures/").get("KeyCount")
    assert not (work_dir / "witness" / "state.json").exists()

    s3, restore = _sealer(endpoint, bucket)
    note = checkpoint(kms, key_arn, bucket, 3, root(hashes), extension="an extension line\n")
    s3.put_object(Bucket=bucket, Key=f"log/checkpoints/{3:020}", ChecksumAlgorithm="SHA256", Body=note.encode())
    restore()
    done = witness.run()
    assert done.returncode == 0, done.stdout + done.stderr
    name, key_id, key = vkey.split("+", 2)
    stored = s3.get_object(Bucket=bucket, Key=f"log/checkpoints/{3:020}")["Body"].read().decode()
    body = stored[: stored.rindex("\n\n") + 1]
    assert body.endswith("an extension line\n"), body
    line = s3.get_object(Bucket=bucket, Key=f"log/cosignatures/{3:020}/{key_id}")["Body"].read().decode()
    signature = base64.b64decode(line.split(" ")[2])[4:]
    time_, signature = int.from_bytes(signature[:8], "big"), signature[8:]
    ed25519.Ed25519PublicKey.from_public_bytes(base64.b64decode(key)[1:]).verify(
        signature, f"cosignature/v1\ntime {time_}\n{body}".encode())
    witness.close()


def test_an_object_planted_at_a_checkpoint_name_is_passed_over_not_a_refusal(stack, work_dir):
    """Someone who can write under log/checkpoints/ (the bucket policy lifted) plants junk at a
    size the log never had, a copy of the log's signed checkpoint at a size no digest names, and
    a note at the next size that the log's key did not sign: the
    witness reports both (passed over, on stderr), cosigns what the log signed, and goes on:
    nothing planted stops it."""
    st, endpoint = stack
    bucket, key_arn = st.archive_bucket.name, st.archiver.environment["DIGEST_KEY_ID"]
    kms = _client("kms", endpoint)
    env = procs.function_env({}, endpoint, {"ARCHIVE_BUCKET": bucket, "DIGEST_KEY_ID": key_arn})
    witness = LocalWitness(work_dir / "witness", build_auditctl(), env)
    witness.init()
    s3, restore = _sealer(endpoint, bucket)
    write_log(s3, kms, key_arn, bucket, [2])
    restore()
    assert witness.run().returncode == 0
    s3, restore = _sealer(endpoint, bucket)
    s3.put_object(Bucket=bucket, Key=f"log/checkpoints/{99:020}", Body=b"junk", ChecksumAlgorithm="SHA256")
    good = checkpoint(kms, key_arn, bucket, 4, root(leaves(4)))
    forged = good[: good.rindex(" ") + 1] + base64.b64encode(b"\x00" * 70).decode() + "\n"
    s3.put_object(Bucket=bucket, Key=f"log/checkpoints/{4:020}", Body=forged.encode(), ChecksumAlgorithm="SHA256")
    # The log's own signed checkpoint of size 2, copied to the name of a size no digest names:
    # its signature holds, but it is no checkpoint of size 7.
    copied = s3.get_object(Bucket=bucket, Key=f"log/checkpoints/{2:020}")["Body"].read()
    s3.put_object(Bucket=bucket, Key=f"log/checkpoints/{7:020}", Body=copied, ChecksumAlgorithm="SHA256")
    write_log(s3, kms, key_arn, bucket, [5])
    restore()
    done = witness.run()
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"passed over log/checkpoints/{4:020}: not a checkpoint the log's key signed for size 4" in done.stderr, done.stderr
    assert f"passed over log/checkpoints/{7:020}: not a checkpoint the log's key signed for size 7" in done.stderr, done.stderr
    assert "says size 2" in done.stderr, done.stderr
    assert f"passed over log/checkpoints/{99:020}" in done.stderr, done.stderr
    assert "cosigned checkpoint 5" in done.stdout, done.stdout
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="log/cosignatures/").get("Contents", [])]
    assert [k.split("/")[2] for k in keys] == [f"{2:020}", f"{5:020}"]
    witness.close()
