"""The IAM tests' pieces (test_iam_function.py, test_iam_auditctl.py): moto with its access control
on, the template's policies as deployed, principals that hold exactly them, the function binary
behind a Runtime API stand-in, and auditctl. Not a test module itself.

What moto 5.2.5 checks once ``POST /moto-api/reset-auth`` with ``0`` turns access control on
(moto/core/authorization.py, moto/iam/access_control.py), and so what these tests can prove:

* **Signatures.** Every request's SigV4 signature is computed again with botocore from the
  secret moto holds for its access key id, over the headers the request says it signed. A key
  sent without a session token (or starting ``AKIA``) must be an IAM user's key; a key sent with
  one must come from STS ``AssumeRole`` with that very token. No key is exempt: the local stack's
  ``test`` key is refused (``InvalidClientTokenId``). Never checked: ``/moto-api/``,
  ``sts:GetCallerIdentity``, a few Cognito operations, and the request time (no clock skew).
* **Identity policies**, of the caller only: a user's inline, attached and group policies, a
  role's inline and attached ones; Allow and Deny over ``Action``/``NotAction`` and ``Resource``
  with ``*`` wildcards. Not evaluated: ``Condition`` (ignored: the statement applies as if it
  held), ``NotResource`` (taken to match everything), resource policies other than S3's bucket
  policies (the queues' ``DenyInsecureTransport``), permission boundaries, session policies, SCPs, and the trust
  policy of a service principal (the role is assumed before enforcement starts).
  ``policy_document()`` refuses a statement moto would misjudge, rather than pass it quietly.
* **Bucket policies**, as S3 evaluates them, on every object request, whether access control is
  on or not (local/motoserver.py, local/bucketpolicy.py): the principal, the conditions, the
  object request's IAM action. An explicit Deny there refuses the request before IAM is asked, so
  the archive bucket's policy (only the archiver's role writes) refuses the administrator's
  writes too: a test arranges the archive with ``Account.bucket_policy_lifted()``.
* **Resources.** SQS requests are checked against the queue's ARN, S3 requests against the
  bucket's or the object's. DynamoDB and KMS requests are checked against ``*`` by moto, so a
  statement scoped to the table's or the key's ARN would never match; the launcher here
  (``main()``) gives moto the ARN IAM evaluates instead: the table's, or ``table/T/index/I`` for
  a request naming an index, the ``ResourceArn`` of a request on a table's tags
  (``ListTagsOfResource``, ``TagResource``), or for a batch (``BatchGetItem``, ``BatchWriteItem``) on one table
  that table's (IAM authorizes a batch per table; a batch over several tables stays ``*``, which
  a table-scoped statement never matches: stricter, never looser); for KMS the ARN of the key the
  request's ``KeyId`` names (by id, ARN, alias or alias ARN; a request naming no key, or an
  unknown one, stays ``*``). As in SQS's IAM, the batch actions (``SendMessageBatch``,
  ``DeleteMessageBatch``, ``ChangeMessageVisibilityBatch``) need the single action's permission,
  where moto would ask for an action IAM does not have; and as in S3's, a ``HEAD`` of an object
  with a ``versionId`` needs ``s3:GetObjectVersion`` and the object lock's ``retention`` and
  ``legal-hold`` requests their own actions, where moto asks for ``s3:GetObject`` or
  ``s3:PutObject`` (``S3_KEY_ACTIONS``); and as in Lambda's, ``Invoke`` needs
  ``lambda:InvokeFunction`` on the function's ARN (``LAMBDA_ACTIONS``), where moto asks for
  ``lambda:Invoke`` on ``*``, and a refusal is answered in Lambda's JSON. The server logs every refusal (``REFUSED_MARK``, in
  moto.log): a refused ``HEAD`` has no body, so a client cannot say which action was refused.
* **Key policies are not evaluated**, not even their Denies: the digest key's policy (only the
  archiver signs; nobody disables it or schedules its deletion without MFA) is checked in
  tests/template/tests/template/digests.rs, not here. What these tests prove about KMS is the identity
  side: which keys a principal's own policies let it use, and for what.
* **The answer** to a refused request is HTTP 403 with an XML ``ErrorResponse`` whatever the
  service, which a JSON-protocol client (DynamoDB, SQS) cannot read. The launcher answers as the
  services do instead (``AWS_JSON_ERRORS``): DynamoDB HTTP 400 with a JSON ``__type``
  (``AccessDeniedException``, ``InvalidSignatureException``, ``UnrecognizedClientException``),
  SQS's ``AccessDenied`` in JSON with ``x-amzn-query-error``, KMS's ``AccessDeniedException``
  (HTTP 400, JSON); ``--moto-errors`` keeps moto's own. S3 answers in XML as moto does, but its
  ``AccessDenied`` message names the caller, the action and the resource, as S3 now words a
  refusal by an identity policy in the same account ("User: … is not authorized to perform:
  s3:GetObject on resource: … because no identity-based policy allows the s3:GetObject action"),
  where moto says only "Access Denied".
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from local import procs  # noqa: E402
from local.cfn import Template, TemplateError  # noqa: E402
from local.stack import DEFAULT_TEMPLATE, Stack, create_stack, read_stack  # noqa: E402

REGION = "us-east-1"
# SQS authorizes a batch with the single action's permission (there is no IAM action of the
# batch's name); moto 5.2.5 asks for the batch's name.
SQS_BATCH_ACTIONS = {
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}
# Lambda's Invoke is authorized by IAM as lambda:InvokeFunction; moto 5.2.5 asks for the
# operation's name.
LAMBDA_ACTIONS = {"lambda:Invoke": "lambda:InvokeFunction"}
# S3 requests moto authorizes as another action than IAM does (it falls back to the method's
# default): (method, query parameter, IAM's action).
S3_KEY_ACTIONS = [
    ("HEAD", "versionId", "GetObjectVersion"),
    ("PUT", "retention", "PutObjectRetention"),
    ("PUT", "legal-hold", "PutObjectLegalHold"),
    ("GET", "retention", "GetObjectRetention"),
    ("GET", "legal-hold", "GetObjectLegalHold"),
]
# How moto's server (as launched here) logs a refusal: "<mark> <action> on <resource>".
REFUSED_MARK = "iam-support: access refused:"
# Statement elements moto evaluates as IAM does (module docstring).
EVALUATED = {"Sid", "Effect", "Action", "NotAction", "Resource"}


# ---- moto with access control -------------------------------------------------------------------

# How DynamoDB (JSON 1.0) and SQS (JSON 1.0, query-compatible) answer a refused request: moto's
# XML code -> (HTTP status, __type, x-amzn-query-error, the message's key). SQS's other refusals
# (signature, token) stay as moto words them: no test reads more than "refused" from them.
AWS_JSON_ERRORS = {
    "dynamodb": {
        "AccessDenied": (400, "com.amazon.coral.service#AccessDeniedException", None, "Message"),
        "SignatureDoesNotMatch": (400, "com.amazon.coral.service#InvalidSignatureException", None, "message"),
        "InvalidClientTokenId": (400, "com.amazon.coral.service#UnrecognizedClientException", None, "message"),
    },
    "sqs": {
        "AccessDenied": (403, "com.amazon.coral.service#AccessDeniedException", "AccessDenied;Sender", "message"),
    },
    "kms": {
        "AccessDenied": (400, "AccessDeniedException", None, "message"),
        "SignatureDoesNotMatch": (400, "InvalidSignatureException", None, "message"),
        "InvalidClientTokenId": (400, "UnrecognizedClientException", None, "message"),
    },
}


def _aws_json_errors(handler_cls, service: str) -> None:
    """A refusal to a JSON-protocol request in the service's own JSON shape (moto answers every
    service with its XML ErrorResponse, which a JSON client cannot read)."""
    import binascii
    import functools
    from xml.sax.saxutils import unescape

    original = handler_cls.call_action

    @functools.wraps(original)
    def call_action(self):
        status, headers, body = original(self)
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
        if str(status) != "403" or not self.headers.get("X-Amz-Target") or "<ErrorResponse>" not in text:
            return status, headers, body
        code = re.search(r"<Code>([^<]*)</Code>", text)
        message = re.search(r"<Message>([^<]*)</Message>", text)
        shape = AWS_JSON_ERRORS[service].get(code.group(1) if code else "")
        if shape is None:
            return status, headers, body
        new_status, error_type, query_error, message_key = shape
        new_body = json.dumps({"__type": error_type, message_key: unescape(message.group(1) if message else "")})
        headers = {k: v for k, v in dict(headers).items() if k.lower() not in ("content-type", "x-amz-crc32")}
        content_type = "application/x-amz-json-1.1" if service == "kms" else "application/x-amz-json-1.0"
        headers.update({"status": str(new_status), "Content-Type": content_type})
        if query_error:
            headers["x-amzn-query-error"] = query_error
        if service == "dynamodb":  # DynamoDB signs its answers with a CRC32 of the body
            headers["x-amz-crc32"] = str(binascii.crc32(new_body.encode()) & 0xFFFFFFFF)
        return new_status, headers, new_body

    handler_cls.call_action = call_action


def _lambda_json_errors(handler_cls) -> None:
    """A refusal to a Lambda request as Lambda answers it (REST-JSON: HTTP 403, the error type in
    ``x-amzn-ErrorType``, a JSON body), where moto answers with its XML ErrorResponse."""
    import functools
    from xml.sax.saxutils import unescape

    original = handler_cls.call_action

    @functools.wraps(original)
    def call_action(self):
        status, headers, body = original(self)
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
        if str(status) != "403" or "<ErrorResponse>" not in text:
            return status, headers, body
        code = re.search(r"<Code>([^<]*)</Code>", text)
        message = re.search(r"<Message>([^<]*)</Message>", text)
        error_type = "AccessDeniedException" if code and code.group(1) == "AccessDenied" else (
            code.group(1) if code else "AccessDeniedException")
        new_body = json.dumps({"Type": "User", "message": unescape(message.group(1) if message else "")})
        headers = {k: v for k, v in dict(headers).items() if k.lower() not in ("content-type", "x-amz-crc32")}
        headers.update({"status": "403", "Content-Type": "application/json", "x-amzn-ErrorType": error_type})
        return 403, headers, new_body

    handler_cls.call_action = call_action


def _patch_moto(aws_errors: bool) -> None:
    """The changes of the module docstring ("Resources", "The answer"), on top of
    local/motoserver.py's."""
    from moto.awslambda.responses import LambdaResponse
    from moto.dynamodb.responses import DynamoHandler
    from moto.iam import access_control
    from moto.kms.responses import KmsResponse
    from moto.s3 import responses as s3_responses
    from moto.s3.exceptions import S3ClientError
    from moto.sqs.responses import SQSResponse
    from moto.utilities.utils import get_partition

    if hasattr(DynamoHandler, "_determine_resource"):
        raise RuntimeError("this moto determines DynamoDB resources itself: drop the patch in "
                           "tests/e2e/iam_support.py and check what it passes")

    def _determine_resource(self) -> str:
        params = self.body if isinstance(self.body, dict) else {}
        resource_arn = params.get("ResourceArn")
        if isinstance(resource_arn, str) and resource_arn:
            return resource_arn  # ListTagsOfResource, TagResource, UntagResource: the table's ARN
        table = params.get("TableName")
        batch = params.get("RequestItems")
        if (not isinstance(table, str) or not table) and isinstance(batch, dict) and len(batch) == 1:
            table = next(iter(batch))  # BatchGetItem, BatchWriteItem on one table
        if not isinstance(table, str) or not table:
            return "*"  # ListTables, a batch over several tables, ...: no one table
        arn = table if table.startswith("arn:") else (
            f"arn:{get_partition(self.region)}:dynamodb:{self.region}:{self.current_account}:table/{table}")
        index = params.get("IndexName")
        return f"{arn}/index/{index}" if isinstance(index, str) and index else arn

    DynamoHandler._determine_resource = _determine_resource

    if hasattr(KmsResponse, "_determine_resource"):
        raise RuntimeError("this moto determines KMS resources itself: drop the patch in "
                           "tests/e2e/iam_support.py and check what it passes")

    def _kms_resource(self) -> str:
        try:
            key_id = json.loads(self.body or "{}").get("KeyId")
        except ValueError:
            return "*"
        if not isinstance(key_id, str) or not key_id:
            return "*"  # CreateKey, ListKeys, ListAliases, ...: no one key
        try:
            return self.kms_backend.describe_key(key_id).arn
        except Exception:  # noqa: BLE001 - an unknown key: the request fails on its own
            return "*"

    KmsResponse._determine_resource = _kms_resource

    if hasattr(LambdaResponse, "_determine_resource"):
        raise RuntimeError("this moto determines Lambda resources itself: drop the patch in "
                           "tests/e2e/iam_support.py and check what it passes")

    def _lambda_resource(self) -> str:
        # /2015-03-31/functions/<name or ARN>/invocations: IAM authorizes the function's ARN.
        from urllib.parse import unquote

        parts = unquote(self.path.split("?", 1)[0]).split("/")
        if len(parts) < 4 or parts[2] != "functions":
            return "*"
        name = parts[3]
        if name.startswith("arn:"):
            return name
        return f"arn:{get_partition(self.region)}:lambda:{self.region}:{self.current_account}:function:{name}"

    LambdaResponse._determine_resource = _lambda_resource

    key_actions = s3_responses.ACTION_MAP["KEY"]
    for method, query, action in S3_KEY_ACTIONS:
        if query in key_actions[method]:
            raise RuntimeError(f"this moto maps {method} ?{query} itself: drop the patch in tests/e2e/iam_support.py")
        key_actions[method][query] = action
    # A bucket's: IAM authorizes GET ?object-lock (GetObjectLockConfiguration, which auditctl
    # verify calls for the default retention) as s3:GetBucketObjectLockConfiguration, where moto
    # falls back to the method's default, s3:ListBucket.
    bucket_actions = s3_responses.ACTION_MAP["BUCKET"]
    for method, query, action in [("GET", "object-lock", "GetBucketObjectLockConfiguration")]:
        if query in bucket_actions[method]:
            raise RuntimeError(f"this moto maps {method} ?{query} itself: drop the patch in tests/e2e/iam_support.py")
        bucket_actions[method][query] = action

    original_permitted = access_control.IAMRequestBase.check_action_permitted

    def check_action_permitted(self, resource: str) -> None:
        self._checked_resource = resource
        try:
            original_permitted(self, resource)
        except Exception:
            # The server's own record of each refusal (moto.log), for a test to read: a refused
            # HEAD has no body, so the client cannot tell which action was refused.
            print(f"{REFUSED_MARK} {self._action} on {resource}", file=sys.stderr, flush=True)
            raise

    def raise_access_denied(self) -> None:
        resource = getattr(self, "_checked_resource", "*")
        raise S3ClientError("AccessDenied", f"User: {self._access_key.arn} is not authorized to perform: "
                            f"{self._action} on resource: \"{resource}\" because no identity-based policy "
                            f"allows the {self._action} action")

    access_control.IAMRequestBase.check_action_permitted = check_action_permitted
    access_control.S3IAMRequest._raise_access_denied = raise_access_denied

    original_init = access_control.IAMRequest.__init__

    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        self._action = SQS_BATCH_ACTIONS.get(self._action, self._action)
        self._action = LAMBDA_ACTIONS.get(self._action, self._action)

    access_control.IAMRequest.__init__ = __init__

    if aws_errors:
        _aws_json_errors(DynamoHandler, "dynamodb")
        _aws_json_errors(SQSResponse, "sqs")
        _aws_json_errors(KmsResponse, "kms")
        _lambda_json_errors(LambdaResponse)


def main() -> None:
    """``python tests/e2e/iam_support.py [--moto-errors] -H 127.0.0.1 -p PORT``: moto's server
    with local/motoserver.py's patches and _patch_moto's; ``--moto-errors`` leaves refusals in
    moto's own XML."""
    from local import motoserver

    argv = sys.argv[1:]
    moto_errors = "--moto-errors" in argv
    argv = [a for a in argv if a != "--moto-errors"]
    motoserver.patch()
    _patch_moto(aws_errors=not moto_errors)
    from moto.server import main as moto_main

    moto_main(argv)


def start_moto(log_dir: Path, moto_errors: bool = False) -> tuple[procs.Proc, str]:
    port = procs.free_port()
    argv = [sys.executable, str(Path(__file__).resolve())] + (["--moto-errors"] if moto_errors else [])
    proc = procs.Proc("moto_server (IAM)", argv + ["-H", "127.0.0.1", "-p", str(port)], log_dir / "moto.log")
    procs.wait_port(port, 30, proc)
    return proc, f"http://127.0.0.1:{port}"


def enforce(endpoint: str) -> None:
    """Access control on from the next request (the number is how many requests may still pass
    unchecked)."""
    req = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        resp.read()


# ---- the template's policies, as deployed -------------------------------------------------------

class DeployedTemplate(Template):
    """cfn.py's evaluator, plus the ARN of a log group (``Fn::GetAtt [LogGroup, Arn]``, which
    CloudFormation gives with a trailing ``:*``), which only the policies need."""

    def arn(self, logical_id: str) -> str:
        if self.resources[logical_id].get("Type") == "AWS::Logs::LogGroup":
            return f"arn:aws:logs:{self.region}:{self.account_id}:log-group:{self.physical_name(logical_id)}:*"
        return super().arn(logical_id)


def deployed_template(stack: Stack) -> DeployedTemplate:
    tpl = stack._tpl  # type: ignore[attr-defined]
    return DeployedTemplate(tpl.doc, parameters=dict(tpl.parameters), stack_name=tpl.stack_name,
                            region=tpl.region, account_id=tpl.account_id, created=dict(tpl.created))


def policy_document(doc: Any, where: str) -> dict:
    """A resolved policy document, refused when moto would judge a statement otherwise than IAM."""
    if not isinstance(doc, dict) or doc.get("Version") != "2012-10-17":
        raise TemplateError(f"{where}: not a policy document of Version 2012-10-17")
    statements = doc.get("Statement")
    statements = statements if isinstance(statements, list) else [statements]
    for i, st in enumerate(statements):
        unknown = set(st) - EVALUATED
        if unknown:
            raise TemplateError(f"{where}.Statement[{i}] uses {sorted(unknown)}, which moto 5.2.5 does not "
                                f"evaluate as IAM does (tests/e2e/iam_support.py): extend the test")
        if st.get("Effect") not in ("Allow", "Deny") or ("Action" in st) == ("NotAction" in st) \
                or "Resource" not in st:
            raise TemplateError(f"{where}.Statement[{i}]: needs Effect, Action (or NotAction) and Resource")
    return {"Version": "2012-10-17", "Statement": statements}


@dataclass
class RolePolicies:
    logical_id: str
    trust: dict
    policies: dict[str, dict]  # inline policy name -> document


def function_role(tpl: Template, function_id: str = "AuditReceiverFunction") -> RolePolicies:
    """The role the function runs as (its ``Role: Fn::GetAtt [R, Arn]``) with every inline policy
    and every ``AWS::IAM::Policy`` of the template attached to it (``Roles: [Ref R]``), resolved to
    this stack's ARNs."""
    role_ref = (tpl.resources[function_id].get("Properties") or {}).get("Role")
    if not (isinstance(role_ref, dict) and list(role_ref) == ["Fn::GetAtt"] and role_ref["Fn::GetAtt"][1] == "Arn"):
        raise TemplateError(f"{function_id}.Role is not Fn::GetAtt [<role>, Arn]: SAM would make its own role")
    role_id = role_ref["Fn::GetAtt"][0]
    props = tpl.properties(role_id)
    for key in ("ManagedPolicyArns", "PermissionsBoundary"):
        if props.get(key):
            raise TemplateError(f"{role_id}.{key} is set: the IAM tests read inline policies only, extend them")
    policies = {p["PolicyName"]: policy_document(p["PolicyDocument"], f"{role_id}.Policies.{p['PolicyName']}")
                for p in props.get("Policies") or []}
    for pid in tpl.resources_of_type("AWS::IAM::Policy"):
        if {"Ref": role_id} not in (tpl.resources[pid].get("Properties") or {}).get("Roles", []):
            continue
        attached = tpl.properties(pid)
        for key in ("Users", "Groups"):
            if attached.get(key):
                raise TemplateError(f"{pid}.{key}: the IAM tests attach policies to roles only, extend them")
        if attached["PolicyName"] in policies:
            raise TemplateError(f"{pid}: policy name {attached['PolicyName']} is the role's already")
        policies[attached["PolicyName"]] = policy_document(attached["PolicyDocument"], f"{pid}.PolicyDocument")
    return RolePolicies(role_id, props["AssumeRolePolicyDocument"], policies)


def managed_policy(tpl: Template, logical_id: str) -> dict:
    res = tpl.resources.get(logical_id)
    if res is None:
        raise TemplateError(f"template.yaml has no resource {logical_id}")
    if res.get("Type") != "AWS::IAM::ManagedPolicy":
        raise TemplateError(f"{logical_id} is a {res.get('Type')}, not an AWS::IAM::ManagedPolicy")
    props = tpl.properties(logical_id)
    for key in ("Roles", "Users", "Groups"):
        if props.get(key):
            raise TemplateError(f"{logical_id}.{key}: the IAM tests attach the policy themselves, extend them")
    return policy_document(props["PolicyDocument"], f"{logical_id}.PolicyDocument")


def actions_of(statement: dict) -> list[str]:
    a = statement.get("Action", [])
    return [a] if isinstance(a, str) else list(a)


def resources_of(statement: dict) -> list[str]:
    r = statement.get("Resource", [])
    return [r] if isinstance(r, str) else list(r)


def without_action(policies: dict[str, dict], action: str) -> dict[str, dict]:
    """The same policies with one action taken out of every statement (a statement left without
    actions goes; a policy left without statements goes). Fails if no statement granted it."""
    out: dict[str, dict] = {}
    found = False
    for name, doc in policies.items():
        statements = []
        for st in doc["Statement"]:
            acts = actions_of(st)
            if action in acts:
                found = True
                acts = [a for a in acts if a != action]
                if not acts:
                    continue
                st = {**st, "Action": acts}
            statements.append(st)
        if statements:
            out[name] = {**doc, "Statement": statements}
    assert found, f"no statement grants {action}"
    return out


# ---- an account with principals ---------------------------------------------------------------

@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str
    session_token: str | None = None

    def env(self) -> dict[str, str]:
        out = {"AWS_ACCESS_KEY_ID": self.access_key_id, "AWS_SECRET_ACCESS_KEY": self.secret_access_key}
        if self.session_token:
            out["AWS_SESSION_TOKEN"] = self.session_token
        return out


class Account:
    """The template's table and queues on a moto of its own, and an administrator (a user allowed
    everything) that the tests read and arrange with once access control is on."""

    def __init__(self, work_dir: Path, moto_errors: bool = False):
        self.work_dir = work_dir
        self.proc, self.endpoint = start_moto(work_dir, moto_errors)
        try:
            self.stack = create_stack(read_stack(DEFAULT_TEMPLATE), self.endpoint)
            self.template = deployed_template(self.stack)
            self.bootstrap = Credentials("test", "test")  # the local stack's key: no user has it
            self.admin = self.user("iam-test-admin", inline={
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})
        except BaseException:
            self.proc.stop()
            raise

    def close(self) -> None:
        self.proc.stop()

    # clients --------------------------------------------------------------------------------
    def client(self, service: str, creds: Credentials | None = None):
        import boto3
        from botocore.config import Config

        creds = creds or self.admin
        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=creds.access_key_id,
                            aws_secret_access_key=creds.secret_access_key,
                            aws_session_token=creds.session_token,
                            config=Config(retries={"max_attempts": 1}))

    # names ----------------------------------------------------------------------------------
    @property
    def table_name(self) -> str:
        return self.stack.table_name

    @property
    def queue(self):
        return self.stack.source_queue

    @property
    def dlq(self):
        return self.stack.dead_letter_queue

    @property
    def access_queue(self):
        return self.stack.access_queue

    # principals (before enforce(): creating them is not what is tested) -------------------------
    def _iam(self):
        return self.client("iam", getattr(self, "admin", None) or self.bootstrap)

    def user(self, name: str, inline: dict | None = None, managed: dict[str, dict] | None = None) -> Credentials:
        iam = self._iam()
        iam.create_user(UserName=name)
        if inline:
            iam.put_user_policy(UserName=name, PolicyName=f"{name}-inline", PolicyDocument=json.dumps(inline))
        for policy_name, doc in (managed or {}).items():
            arn = iam.create_policy(PolicyName=policy_name, PolicyDocument=json.dumps(doc))["Policy"]["Arn"]
            iam.attach_user_policy(UserName=name, PolicyArn=arn)
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return Credentials(key["AccessKeyId"], key["SecretAccessKey"])

    def assume_role(self, name: str, trust: dict, policies: dict[str, dict]) -> Credentials:
        """A role with exactly these inline policies, assumed: temporary credentials with a session
        token, as Lambda gives the function."""
        iam = self._iam()
        try:
            arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        except iam.exceptions.EntityAlreadyExistsException:
            # The stack's own role (local/stack.py creates the functions' roles, with no
            # permissions): it gets exactly these.
            role = iam.get_role(RoleName=name)["Role"]
            assert iam.list_role_policies(RoleName=name)["PolicyNames"] == [], f"{name} holds policies already"
            assert iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"] == []
            iam.update_assume_role_policy(RoleName=name, PolicyDocument=json.dumps(trust))
            arn = role["Arn"]
        for policy_name, doc in policies.items():
            iam.put_role_policy(RoleName=name, PolicyName=policy_name, PolicyDocument=json.dumps(doc))
        c = self.client("sts", self.admin).assume_role(RoleArn=arn, RoleSessionName="audit-receiver")["Credentials"]
        return Credentials(c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"])

    @contextlib.contextmanager
    def bucket_policy_lifted(self):
        """The archive bucket without its policy for a moment, put back as it was: what the
        administrator arranges (an object where and as the archiver writes its own, a run of
        the archiver with the administrator's credentials) is refused by the policy, which lets
        no principal but the archiver's role write (local/motoserver.py evaluates it as S3 does;
        test_bucket_policy.py proves it). Arranging is not what these tests test."""
        s3 = self.client("s3")
        bucket = self.stack.archive_bucket.name
        policy = s3.get_bucket_policy(Bucket=bucket)["Policy"]
        s3.delete_bucket_policy(Bucket=bucket)
        try:
            yield
        finally:
            s3.put_bucket_policy(Bucket=bucket, Policy=policy)

    def enforce(self) -> None:
        """Access control on; proven on, since the local stack's key is refused from here on."""
        from botocore.exceptions import ClientError

        enforce(self.endpoint)
        try:
            self.client("sqs", self.bootstrap).get_queue_attributes(QueueUrl=self.queue.url)
        except ClientError as e:
            assert error_code(e) == "InvalidClientTokenId", e
        else:
            raise AssertionError("moto's access control is not on: an unknown key was let in")


# What a refused action's error code is, per client (AWS_JSON_ERRORS).
DENIED = {"dynamodb": "AccessDeniedException", "sqs": "AccessDenied"}


def error_code(e: Exception) -> str:
    """The error code of a refused request. moto answers a JSON-protocol client (DynamoDB, SQS)
    with its XML ErrorResponse, which botocore cannot read: it reports the HTTP status as the code
    and the XML as the message, so the code is read from there."""
    error = getattr(e, "response", {}).get("Error", {})
    code, message = str(error.get("Code", "")), str(error.get("Message", ""))
    found = re.search(r"<Code>([^<]+)</Code>", message) if code.isdigit() else None
    return found.group(1) if found else code


def refusals(log_dir: Path) -> list[str]:
    """The actions (with their resources) moto refused, as its log records them."""
    try:
        text = (log_dir / "moto.log").read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    return [line.split(REFUSED_MARK, 1)[1].strip() for line in text.splitlines() if REFUSED_MARK in line]


def refused(call, *args, **kwargs) -> str:
    """The error code of a call that must be refused (raises if it was let through)."""
    from botocore.exceptions import ClientError

    try:
        call(*args, **kwargs)
    except ClientError as e:
        return error_code(e)
    raise AssertionError(f"{getattr(call, '__name__', call)} was allowed")


def stream_event(account: Account, items: list[dict]) -> dict:
    """Items (DynamoDB JSON) put into the table by the administrator, as Lambda's event source
    mapping hands their stream records to a function: every record the stream holds."""
    from local.streams import lambda_record

    ddb = account.client("dynamodb")
    for item in items:
        ddb.put_item(TableName=account.table_name, Item=item)
    streams = account.client("dynamodbstreams")
    arn = account.stack.stream_arn
    records = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records += streams.get_records(ShardIterator=iterator)["Records"]
    return {"Records": [lambda_record(r, arn) for r in records]}


# ---- binaries -------------------------------------------------------------------------------------

_built: dict[str, Path] = {}
_build_lock = threading.Lock()


def binary(name: str, log_dir: Path) -> Path:
    """target/debug/<name>, built (or found up to date) by cargo once per session."""
    with _build_lock:
        if not _built:
            with open(log_dir / "cargo-build.log", "ab") as log:
                subprocess.run(["cargo", "build", "--bin", "audit-receiver", "--bin", "audit-archiver", "--bin",
                                "auditctl", "--bin", "audit-ocsf-writer"], cwd=ROOT, stdout=log,
                               stderr=subprocess.STDOUT, check=True, timeout=1800,
                               env={**os.environ, "CARGO_TERM_COLOR": "never"})
            for b in ("audit-receiver", "audit-archiver", "auditctl", "audit-ocsf-writer"):
                _built[b] = ROOT / "target" / "debug" / b
        return _built[name]


def clean_aws_env(work_dir: Path, creds: Credentials, endpoint: str) -> dict[str, str]:
    """The environment of a program under test: these credentials and the local endpoint, none of
    the caller's AWS settings, empty profile files."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    for name in ("aws-config", "aws-credentials"):
        (work_dir / name).touch()
    env.update(creds.env())
    env.update({"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
                "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_CONFIG_FILE": str(work_dir / "aws-config"),
                "AWS_SHARED_CREDENTIALS_FILE": str(work_dir / "aws-credentials"),
                "NO_COLOR": "1"})
    return env


# ---- the function behind a Runtime API stand-in ----------------------------------------------

class RuntimeApi:
    """The Lambda Runtime API as the function process meets it: ``next`` hands out the queued
    events one at a time with a request id and a deadline 30 s ahead (epoch ms, as Lambda sends);
    ``response``, ``error`` and ``init/error`` come back to ``invoke``."""

    def __init__(self, timeout_s: int = 30, function_name: str = "audit-receiver"):
        self.timeout_s = timeout_s
        self.function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        self._events: queue.Queue = queue.Queue()
        self._answers: queue.Queue = queue.Queue()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if not self.path.endswith("/runtime/invocation/next"):
                    self._reply(404, b"{}")
                    return
                item = api._events.get()
                if item is None:  # stopping
                    self.close_connection = True
                    return
                request_id, body = item
                deadline = int(time.time() * 1000) + api.timeout_s * 1000
                self._reply(200, body, {"Lambda-Runtime-Aws-Request-Id": request_id,
                                        "Lambda-Runtime-Deadline-Ms": str(deadline),
                                        "Lambda-Runtime-Invoked-Function-Arn": api.function_arn,
                                        "Lambda-Runtime-Trace-Id": "Root=1-00000000-000000000000000000000000"})

            def do_POST(self):
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                parts = self.path.rstrip("/").split("/")
                if "invocation" in parts:
                    request_id = parts[parts.index("invocation") + 1]
                    api._answers.put((parts[-1], request_id, data))
                else:
                    api._answers.put(("init_error", None, data))
                self._reply(202, b"{}")

            def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda *a: None  # the function going away is not news
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True, name="runtime-api").start()

    def invoke(self, event: dict, timeout_s: float = 30, alive=None) -> dict:
        """One invocation; its response. A bound, not a wait: the answer ends it at once, and so
        does the function's process ending without one (``alive`` says whether it still runs):
        ``FunctionExited``."""
        request_id = str(uuid.uuid4())
        self._events.put((request_id, json.dumps(event).encode()))
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                kind, answered_id, data = self._answers.get(timeout=0.2)
                break
            except queue.Empty:
                if alive is not None and not alive():
                    raise FunctionExited("the function exited without answering") from None
                if time.monotonic() >= deadline:
                    raise
        if kind != "response" or answered_id != request_id:
            raise AssertionError(f"the function answered {kind} for {answered_id}: {data[:500]!r}")
        return json.loads(data)

    def stop(self) -> None:
        self._events.put(None)
        self.server.shutdown()
        self.server.server_close()


class FunctionExited(AssertionError):
    """The function's process ended before it answered an invocation (an init error)."""


class Function:
    """The function binary (as main.rs wires it) under these credentials, with the template's
    environment (DEAD_LETTER_QUEUE_URL among it; the archiver's ARCHIVE_BUCKET, DIGEST_KEY_ID, ...
    with ``archiver=True``), against the account's endpoint."""

    def __init__(self, account: Account, creds: Credentials, log_name: str = "function.log",
                 archiver: bool = False, timeout_s: int | None = None, spec=None):
        # ``spec``: another function of the stack (its FunctionSpec: the OCSF writer's).
        spec = spec or (account.stack.archiver if archiver else account.stack.function)
        self.log_path = account.work_dir / log_name
        self.api = RuntimeApi(timeout_s=timeout_s or spec.timeout_s, function_name=spec.binary)
        env = clean_aws_env(account.work_dir, creds, account.endpoint)
        env.update(spec.environment)
        env.update({"AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{self.api.port}",
                    "AWS_LAMBDA_FUNCTION_NAME": spec.binary, "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
                    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
                    "AWS_LAMBDA_LOG_FORMAT": "JSON"})
        try:
            self.proc = procs.Proc(spec.binary, [str(binary(spec.binary, account.work_dir))],
                                   self.log_path, env=env)
        except BaseException:
            self.api.stop()
            raise

    def invoke(self, event: dict, timeout_s: float = 30) -> dict:
        return self.api.invoke(event, timeout_s, alive=self.proc.alive)

    def stop(self) -> None:
        self.proc.stop()
        self.api.stop()

    def __enter__(self) -> "Function":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# ---- an archive with digests ---------------------------------------------------------------------

def sealable_start(at: float | None = None) -> int:
    """The start of the UTC hour two hours before ``at`` (now): a period of the template's (an
    hour) that can be sealed, whenever in the hour a test runs."""
    return (int(time.time() if at is None else at) // 3600 - 2) * 3600


def sealable_object(account: Account, start: int | None = None, line: dict | None = None) -> tuple[str, int]:
    """An archive object of a period that can be sealed now (``sealable_start``), put by the
    administrator where and as audit-archiver puts its own (its run marker first, version 2,
    naming the object with its SHA-256; then the object: key, SHA-256 checksum, `events` and
    `marker` metadata), standing in for what the archiver wrote then: a period of the current
    hour could be sealed only once it has ended. Returns its key and its period's start (epoch
    seconds). ``line``: the archived event (by default iam-earlier-1, "carol signed out")."""
    import gzip
    import hashlib
    from datetime import datetime, timezone

    start = sealable_start() if start is None else start
    hour = datetime.fromtimestamp(start, timezone.utc)
    key = f"trail/dt={hour:%Y-%m-%d}/hour={hour:%H}/p{start}-{'1'.zfill(40)}-a1.jsonl.gz"
    line = line or {"messageId": "iam-earlier-1", "auditTime": "2026-11-22T08:00:00.000Z",
                    "auditText": "carol signed out"}
    body = gzip.compress(json.dumps(line).encode() + b"\n", mtime=0)
    marker_key = f"state/{'1'.zfill(40)}-iamearlier1/a1.json"
    marker = {"version": 2, "run": [["1", "iamearlier1"]],
              "objects": [{"key": key, "events": [0], "sha256": hashlib.sha256(body).hexdigest()}],
              "writeBy": 0}
    s3 = account.client("s3")
    bucket = account.stack.archive_bucket.name
    with account.bucket_policy_lifted():
        s3.put_object(Bucket=bucket, Key=marker_key, Body=json.dumps(marker, separators=(",", ":")).encode(),
                      ChecksumAlgorithm="SHA256")
        s3.put_object(Bucket=bucket, Key=key, Body=body, ChecksumAlgorithm="SHA256",
                      Metadata={"events": "1", "marker": marker_key})
    return key, start


def seal(account: Account, creds: Credentials | None = None) -> dict:
    """One scheduled run of audit-archiver (EventBridge's Scheduled Event) with these credentials
    (the administrator's by default, with the bucket policy lifted for the run: it lets only the
    archiver's role write): seals every period due. Its answer."""
    from local.schedule import scheduled_event

    lifted = account.bucket_policy_lifted() if creds is None else contextlib.nullcontext()
    with lifted, Function(account, creds or account.admin, log_name="archiver-seal.log", archiver=True) as fn:
        return fn.invoke(scheduled_event(time.time(), account.stack.schedule.rule_arn), 120)


if __name__ == "__main__":
    main()
