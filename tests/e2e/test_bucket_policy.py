"""Only the archiver writes the archive (docs/deploy.md "The archive"): the archive bucket's policy
refuses every object write (put, retention, legal hold, tags, ...) to every principal but
AuditArchiverRole, whatever that principal's own IAM policies allow.

moto 5.2.5 does not evaluate a bucket policy as S3 does (it knows no principal and takes the
policy's conditions to hold, so it would refuse the archiver too); local/motoserver.py makes the
local stack evaluate it (local/bucketpolicy.py). These tests prove both: the evaluator on the
template's own policy (resolved as local/stack.py creates it), then, under moto's access control
(``POST /moto-api/reset-auth`` with ``0``: every signature checked, every identity policy
evaluated), a user whose own policy allows every object write on the bucket is refused under
trail/, tamper/, state/ and digest/, and the archiver's role, with its template policies, writes
there and archives a stream batch with the real audit-archiver binary."""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timedelta, timezone

import pytest

from iam_support import Account, Function, error_code, function_role, refusals, stream_event
from local import bucketpolicy, motoserver
from local.bucketpolicy import Decision, Request
from local.stack import DEFAULT_TEMPLATE, read_stack

ACCOUNT = "123456789012"
PREFIXES = ("trail", "tamper", "state", "digest")
WRITES = ("s3:PutObject", "s3:PutObjectRetention", "s3:PutObjectLegalHold", "s3:PutObjectTagging",
          "s3:PutObjectVersionTagging", "s3:DeleteObjectTagging", "s3:PutObjectAcl", "s3:RestoreObject")


# ---- the evaluator, on the template's policy ------------------------------------------------------

@pytest.fixture(scope="module")
def archive():
    stack = read_stack(DEFAULT_TEMPLATE)
    bucket = stack.archive_bucket
    [policy] = bucket.policies
    return bucket.name, policy, stack.roles["AuditArchiverRole"].arn


def _ask(policy: dict, action: str, resource: str, principal: str | None) -> Decision:
    return bucketpolicy.evaluate(policy, Request(action, resource, principal, ACCOUNT, secure_transport=True))[0]


def test_the_template_policy_refuses_every_object_write_to_all_but_the_archivers_role(archive):
    name, policy, role = archive
    others = [f"arn:aws:iam::{ACCOUNT}:role/admin", f"arn:aws:iam::{ACCOUNT}:user/mallory",
              f"arn:aws:iam::{ACCOUNT}:root", role + "-copy", role.replace(ACCOUNT, "210987654321"), None]
    for prefix in PREFIXES:
        resource = f"arn:aws:s3:::{name}/{prefix}/dt=2026-11-24/hour=19/x.json"
        for action in WRITES:
            for principal in others:
                assert _ask(policy, action, resource, principal) is Decision.DENIED, (action, principal)
            assert _ask(policy, action, resource, role) is Decision.NEUTRAL, action  # its IAM decides
        # Reads are the identity policies' business; deletes are refused to everyone.
        assert _ask(policy, "s3:GetObject", resource, others[1]) is Decision.NEUTRAL
        for action in ("s3:DeleteObject", "s3:DeleteObjectVersion"):
            assert _ask(policy, action, resource, role) is Decision.DENIED
    # Without TLS nothing passes, the archiver included.
    plain = Request("s3:GetObject", f"arn:aws:s3:::{name}/trail/x", role, ACCOUNT, secure_transport=False)
    assert bucketpolicy.evaluate(policy, plain) == (Decision.DENIED, "DenyInsecureTransport")


def test_witnesses_only_ever_add_a_cosignature(archive):
    """log/cosignatures/* is the one exception to OnlyTheArchiverWritesObjects (NotResource): a
    witness, here or in another account, adds its cosignature with If-None-Match (its own IAM, or
    the bucket policy's grant, decides); nobody writes one without it, nor changes its lock or
    tags; everything else under log/ is the archiver's."""
    name, policy, role = archive
    witness, foreign = f"arn:aws:iam::{ACCOUNT}:role/witness", "arn:aws:iam::210987654321:role/witness"
    cosignature = f"arn:aws:s3:::{name}/log/cosignatures/00000000000000000010/ab000102"

    def ask(action, resource, principal, if_none_match=None):
        return bucketpolicy.evaluate(policy, Request(action, resource, principal, ACCOUNT, secure_transport=True,
                                                     if_none_match=if_none_match))

    for principal in (witness, foreign, role):
        assert ask("s3:PutObject", cosignature, principal, "*") == (Decision.NEUTRAL, None), principal
        assert ask("s3:PutObject", cosignature, principal) == (Decision.DENIED, "CosignaturesAreOnlyAdded")
        for action in WRITES[1:]:
            assert ask(action, cosignature, principal, "*") == (Decision.DENIED, "CosignaturesAreNeverChanged"), \
                (action, principal)
    for key in ("log/checkpoints/00000000000000000010", "log/tile/0/000.p/10", "log/index/p1.tsv.gz",
                "log/cosignatures", "log/cosignature/00000000000000000010/ab000102"):
        assert ask("s3:PutObject", f"arn:aws:s3:::{name}/{key}", witness, "*") == \
            (Decision.DENIED, "OnlyTheArchiverWritesObjects"), key


def test_not_resource_and_a_header_condition_are_judged_as_s3_does():
    deny = {"Statement": [{"Sid": "d", "Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
                           "NotResource": "arn:aws:s3:::b/open/*"},
                          {"Sid": "n", "Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
                           "Resource": "arn:aws:s3:::b/open/*", "Condition": {"Null": {"s3:if-none-match": "true"}}}]}
    put = lambda key, inm=None: bucketpolicy.evaluate(deny, Request("s3:PutObject", f"arn:aws:s3:::b/{key}",  # noqa: E731
                                                                    "arn:aws:iam::1:role/r", "1", if_none_match=inm))
    assert put("closed/k", "*") == (Decision.DENIED, "d")
    assert put("open/k", "*") == (Decision.NEUTRAL, None)
    assert put("open/k") == (Decision.DENIED, "n")
    assert put("opened/k", "*") == (Decision.DENIED, "d")


def test_conditions_on_a_missing_key_hold_as_in_iam():
    deny = {"Statement": [{"Sid": "d", "Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
                           "Resource": "*", "Condition": {"ArnNotEquals": {"aws:PrincipalArn": "arn:aws:iam::1:role/a"}}}]}
    assert bucketpolicy.evaluate(deny, Request("s3:PutObject", "x", None, "1"))[0] is Decision.DENIED  # negated
    like = {"Statement": [{"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::1:root"}, "Action": "s3:Get*",
                           "Resource": "arn:aws:s3:::b/*", "Condition": {"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::1:role/*"}}}]}
    assert bucketpolicy.evaluate(like, Request("s3:GetObject", "arn:aws:s3:::b/k", "arn:aws:iam::1:role/r", "1"))[0] \
        is Decision.ALLOWED
    assert bucketpolicy.evaluate(like, Request("s3:GetObject", "arn:aws:s3:::b/k", "arn:aws:iam::1:user/u", "1"))[0] \
        is Decision.NEUTRAL
    assert bucketpolicy.evaluate(like, Request("s3:GetObject", "arn:aws:s3:::b/k", None, "1"))[0] is Decision.NEUTRAL
    if_exists = {"Statement": [{"Effect": "Deny", "Principal": "*", "Action": "*", "Resource": "*",
                                "Condition": {"StringEqualsIfExists": {"aws:username": "bob"}}}]}
    assert bucketpolicy.evaluate(if_exists, Request("s3:GetObject", "x", "arn:aws:iam::1:role/r", "1"))[0] \
        is Decision.DENIED
    for unsupported in ({"NotPrincipal": {"AWS": "x"}}, {"Condition": {"DateGreaterThan": {"aws:CurrentTime": "x"}}},
                        {"Condition": {"StringEquals": {"aws:PrincipalTag/team": "x"}}}):
        st = {"Effect": "Deny", "Principal": "*", "Action": "*", "Resource": "*", **unsupported}
        if "NotPrincipal" in st:
            del st["Principal"]
        with pytest.raises(bucketpolicy.UnsupportedPolicy):
            bucketpolicy.evaluate({"Statement": [st]}, Request("s3:GetObject", "x", "arn:aws:iam::1:root", "1"))


@pytest.mark.parametrize("method, query, action", [
    ("PUT", {}, "s3:PutObject"),
    ("PUT", {"retention": [""]}, "s3:PutObjectRetention"),
    ("PUT", {"legal-hold": [""]}, "s3:PutObjectLegalHold"),
    ("PUT", {"tagging": [""], "versionId": ["v"]}, "s3:PutObjectVersionTagging"),
    ("POST", {"uploads": [""]}, "s3:PutObject"),
    ("POST", {"restore": [""]}, "s3:RestoreObject"),
    ("DELETE", {"versionId": ["v"]}, "s3:DeleteObjectVersion"),
    ("DELETE", {"tagging": [""]}, "s3:DeleteObjectTagging"),
    ("HEAD", {}, "s3:GetObject"),
    ("HEAD", {"versionId": ["v"]}, "s3:GetObjectVersion"),
])
def test_each_object_request_is_judged_as_the_iam_action_s3_authorises_it_as(method, query, action):
    assert bucketpolicy.object_action(method, query, {}) == action


# ---- the local stack, under moto's access control --------------------------------------------------

@pytest.fixture
def account(work_dir):
    acc = Account(work_dir)
    yield acc
    acc.close()


def _writer_policy(bucket: str) -> dict:
    """What an insider may have been given: every object write on the archive bucket."""
    return {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:PutObject", "s3:PutObjectRetention", "s3:PutObjectLegalHold",
                                       "s3:PutObjectTagging", "s3:GetObject", "s3:ListBucket"],
         "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]}]}


def _archiver(account: Account):
    role = function_role(account.template, "AuditArchiverFunction")
    return account.assume_role(account.template.physical_name(role.logical_id), role.trust, role.policies)


def _key(prefix: str) -> str:
    return f"{prefix}/dt=2026-11-24/hour=19/p1795460400-planted.json"


def test_a_writer_allowed_by_iam_is_refused_and_the_archivers_role_writes(account):
    bucket = account.stack.archive_bucket.name
    mallory = account.user("mallory", inline=_writer_policy(bucket))
    insider = account.assume_role("insider", {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "sts:AssumeRole"}]},
        {"write-archive": _writer_policy(bucket)})
    archiver = _archiver(account)
    account.enforce()

    written = {}
    for prefix in PREFIXES:
        key = _key(prefix)
        for who, creds in (("mallory", mallory), ("insider", insider)):
            s3 = account.client("s3", creds)
            try:
                s3.put_object(Bucket=bucket, Key=key, Body=b"planted", IfNoneMatch="*", ChecksumAlgorithm="SHA256")
            except Exception as e:  # noqa: BLE001 - the refusal is the point
                assert error_code(e) == "AccessDenied", e
                assert "explicit deny in a resource-based policy" in str(e), e
            else:
                raise AssertionError(f"{who} wrote {key}")
        # The archiver's role writes the same name (its IAM allows PutObject under these prefixes).
        put = account.client("s3", archiver).put_object(Bucket=bucket, Key=key, Body=b"archived",
                                                        IfNoneMatch="*", ChecksumAlgorithm="SHA256")
        written[key] = put["VersionId"]
    admin = account.client("s3")
    for key, version in written.items():
        versions = admin.list_object_versions(Bucket=bucket, Prefix=key)["Versions"]
        assert [v["VersionId"] for v in versions] == [version], versions  # only the archiver's
        assert admin.get_object(Bucket=bucket, Key=key)["Body"].read() == b"archived"

    # Nor the lock, nor tags, of what the archiver wrote (IAM allows them to mallory).
    s3 = account.client("s3", mallory)
    trail = _key("trail")
    until = datetime.now(timezone.utc) + timedelta(days=3650)
    for name, attempt in (
            ("retention", lambda: s3.put_object_retention(Bucket=bucket, Key=trail, Retention={
                "Mode": "COMPLIANCE", "RetainUntilDate": until})),
            ("legal hold", lambda: s3.put_object_legal_hold(Bucket=bucket, Key=trail, LegalHold={"Status": "ON"})),
            ("tags", lambda: s3.put_object_tagging(Bucket=bucket, Key=trail, Tagging={"TagSet": [
                {"Key": "k", "Value": "v"}]}))):
        try:
            attempt()
        except Exception as e:  # noqa: BLE001
            assert error_code(e) == "AccessDenied", (name, e)
        else:
            raise AssertionError(f"mallory changed the {name} of {trail}")
    # Refused by the bucket policy's statement, not by IAM (mallory's IAM allows each of them).
    log = (account.work_dir / "moto.log").read_text(errors="replace")
    by_policy = [line.split(motoserver.BUCKET_POLICY_MARK, 1)[1].split()[0]
                 for line in log.splitlines() if motoserver.BUCKET_POLICY_MARK in line]
    assert sorted(set(by_policy)) == ["s3:PutObject", "s3:PutObjectLegalHold", "s3:PutObjectRetention",
                                      "s3:PutObjectTagging"], by_policy
    assert all("by OnlyTheArchiverWritesObjects" in line for line in log.splitlines()
               if motoserver.BUCKET_POLICY_MARK in line)
    assert refusals(account.work_dir) == [], "IAM refused nothing: every refusal was the bucket policy's"
    # mallory's reads are still IAM's business: allowed.
    assert s3.get_object(Bucket=bucket, Key=trail)["Body"].read() == b"archived"


def test_the_archiver_binary_archives_a_batch_through_the_bucket_policy(account):
    """The real audit-archiver, with the role's credentials, through the policy: every object and
    marker it writes lands, and the bucket policy refuses none of its requests."""
    event = stream_event(account, [{
        "messageId": {"S": "policy-1"}, "auditTime": {"S": "2026-11-24T19:00:00.000Z"},
        "auditText": {"S": "alice signed in"}, "eventSource": {"S": account.queue.arn}}])
    archiver = _archiver(account)
    account.enforce()
    with Function(account, archiver, log_name="archiver.log", archiver=True) as fn:
        answer = fn.invoke(event, 60)
    assert answer == {"batchItemFailures": []}, answer
    bucket = account.stack.archive_bucket.name
    admin = account.client("s3")
    trail = admin.list_object_versions(Bucket=bucket, Prefix="trail/").get("Versions", [])
    assert len(trail) == 1, trail
    lines = gzip.decompress(admin.get_object(Bucket=bucket, Key=trail[0]["Key"])["Body"].read()).splitlines()
    assert [json.loads(line)["messageId"] for line in lines] == ["policy-1"]
    assert admin.list_object_versions(Bucket=bucket, Prefix="state/").get("Versions"), "no run marker"
    log = (account.work_dir / "moto.log").read_text(errors="replace")
    assert motoserver.BUCKET_POLICY_MARK not in log, "the bucket policy refused the archiver"
    assert refusals(account.work_dir) == []
