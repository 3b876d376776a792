"""A witness needs exactly AuditWitnessPolicy of template.yaml, under moto's access control and the
archive bucket's policy as S3 evaluates it (local/motoserver.py): a user holding only it runs
`auditctl witness` over the transparency log (it lists and reads log/, fetches the digest key's
public key, adds its cosignature under log/cosignatures/), and is refused every write outside
log/cosignatures/ and a cosignature written without If-None-Match.

The log is written here as the sealer writes it (RFC 9162 leaves, a C2SP partial tile, checkpoints
signed by the stack's AuditDigestKey with KMS Sign, RAW, ECDSA_SHA_256): small trees, one tile.

moto 5.2.5 evaluates no Condition in an identity policy: the policy's ListBucket statement is
granted here without its condition (s3:prefix log/checkpoints/* and log/cosignatures/*, checked in
tests/template), which the witness meets by construction (it lists only those two).

The witness reads no period index (log/index/, which names every event's messageId and auditTime):
its GetObject covers checkpoints, tiles and cosignatures only."""

import subprocess

import pytest

from iam_support import Account, binary, clean_aws_env, error_code, policy_document, refusals
from local import motoserver
from tlog_support import write_log


@pytest.fixture
def account(work_dir):
    acc = Account(work_dir)
    yield acc
    acc.close()


def _write_log(account: Account, key_arn: str, sizes: list[int]) -> None:
    with account.bucket_policy_lifted():  # the sealer's writes, arranged by the administrator
        write_log(account.client("s3"), account.client("kms"), key_arn, account.stack.archive_bucket.name, sizes)


def _witness_policy(account: Account) -> dict:
    """AuditWitnessPolicy as deployed, its one condition (listing under log/) taken out for moto."""
    doc = account.template.properties("AuditWitnessPolicy")["PolicyDocument"]
    [listing] = [st for st in doc["Statement"] if st.get("Sid") == "ListTheLog"]
    assert listing.pop("Condition") == {"StringLike": {"s3:prefix": ["log/checkpoints/*", "log/cosignatures/*"]}}
    return policy_document(doc, "AuditWitnessPolicy.PolicyDocument")


def test_the_witness_policy_is_enough_to_cosign_and_writes_nothing_else(account, work_dir):
    bucket = account.stack.archive_bucket.name
    key_arn = account.stack.archiver.environment["DIGEST_KEY_ID"]
    auditctl = binary("auditctl", work_dir)
    witness = account.user("witness", managed={"AuditWitnessPolicy": _witness_policy(account)})
    _write_log(account, key_arn, [3])
    made = subprocess.run([str(auditctl), "witness", "--init", "--key", str(work_dir / "witness" / "key"),
                           "--name", "witness.test/iam"], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    key_id = made.stdout.strip().split("+")[1]
    account.enforce()
    env = {**clean_aws_env(work_dir, witness, account.endpoint), "ARCHIVE_BUCKET": bucket, "DIGEST_KEY_ID": key_arn}

    def run() -> subprocess.CompletedProcess:
        return subprocess.run([str(auditctl), "witness", "--state", str(work_dir / "witness" / "state.json"),
                               "--key", str(work_dir / "witness" / "key")], env=env, capture_output=True, text=True,
                              timeout=120)

    first = run()
    assert first.returncode == 0, first.stderr
    assert "trusting the checkpoint of size 3" in first.stdout, first.stdout
    _write_log(account, key_arn, [7])
    second = run()
    assert second.returncode == 0, second.stderr
    assert "cosigned checkpoint 7" in second.stdout, second.stdout
    admin = account.client("s3")
    keys = [o["Key"] for o in admin.list_objects_v2(Bucket=bucket, Prefix="log/cosignatures/")["Contents"]]
    assert keys == [f"log/cosignatures/{n:020}/{key_id}" for n in (3, 7)], keys
    assert refusals(work_dir) == [], "IAM refused the witness nothing"
    log = (work_dir / "moto.log").read_text(errors="replace")
    assert motoserver.BUCKET_POLICY_MARK not in log, "the bucket policy refused the witness nothing"

    # Nothing else: no write outside log/cosignatures/ (IAM), no cosignature replaced (the bucket
    # policy: a cosignature is only added, with If-None-Match).
    s3 = account.client("s3", witness)
    for key in ("log/checkpoints/00000000000000000009", "log/tile/0/000.p/9", "trail/planted.jsonl.gz",
                "digest/planted.json"):
        try:
            s3.put_object(Bucket=bucket, Key=key, Body=b"forged", IfNoneMatch="*", ChecksumAlgorithm="SHA256")
        except Exception as e:  # noqa: BLE001 - the refusal is the point
            assert error_code(e) == "AccessDenied", (key, e)
        else:
            raise AssertionError(f"the witness wrote {key}")
    try:
        s3.put_object(Bucket=bucket, Key=keys[0], Body=b"hidden", ChecksumAlgorithm="SHA256")
    except Exception as e:  # noqa: BLE001
        assert error_code(e) == "AccessDenied", e
        assert "explicit deny in a resource-based policy" in str(e), e
    else:
        raise AssertionError("the witness replaced a cosignature")
    versions = admin.list_object_versions(Bucket=bucket, Prefix=keys[0])["Versions"]
    assert len(versions) == 1, versions

    # Nor does it read what it does not need: a period's index names every event in the period.
    index = "log/index/2026-11-22T10:00:00Z.json"
    with account.bucket_policy_lifted():
        admin.put_object(Bucket=bucket, Key=index, Body=b'{"messageIds": ["m-1"]}', IfNoneMatch="*",
                         ChecksumAlgorithm="SHA256")
    try:
        s3.get_object(Bucket=bucket, Key=index)
    except Exception as e:  # noqa: BLE001 - the refusal is the point
        assert error_code(e) == "AccessDenied", e
    else:
        raise AssertionError("the witness read a period index")


def _without(doc: dict, action: str) -> dict:
    statements = [st for st in doc["Statement"] if st["Action"] != action]
    assert len(statements) == len(doc["Statement"]) - 1, action
    return {**doc, "Statement": statements}


@pytest.mark.parametrize("action", ["s3:ListBucket", "s3:GetObject", "s3:PutObject", "kms:GetPublicKey"])
def test_every_grant_of_the_witness_policy_is_needed(account, work_dir, action):
    bucket = account.stack.archive_bucket.name
    key_arn = account.stack.archiver.environment["DIGEST_KEY_ID"]
    auditctl = binary("auditctl", work_dir)
    short = account.user("short-of-one", managed={"short-of-one": _without(_witness_policy(account), action)})
    _write_log(account, key_arn, [3])
    subprocess.run([str(auditctl), "witness", "--init", "--key", str(work_dir / "key")], check=True,
                   capture_output=True, timeout=60)
    account.enforce()
    env = {**clean_aws_env(work_dir, short, account.endpoint), "ARCHIVE_BUCKET": bucket, "DIGEST_KEY_ID": key_arn}
    run = subprocess.run([str(auditctl), "witness", "--state", str(work_dir / "state.json"), "--key",
                          str(work_dir / "key")], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout
    assert f"not authorized to perform: {action}" in run.stderr or action in " ".join(refusals(work_dir)), run.stderr
    assert not (work_dir / "state.json").exists()
