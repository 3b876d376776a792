"""S3 bucket policies evaluated as S3 evaluates them, for what the local stack's requests carry.

moto 5.2.5 checks a bucket's policy on object requests only halfway (moto/s3/responses.py
``_key_response``, moto/iam/access_control.py ``IAMPolicyStatement``): it never knows who is
asking (a statement naming a principal is skipped, ``Principal: "*"`` applies to everyone), it
evaluates no condition but ``StringEquals`` against nothing (every other condition, ``ArnNotEquals``
among them, is taken to hold), and it names the action after the HTTP method (``s3:PutObject`` for
every PUT, ``s3:HeadObject`` for a HEAD). A Deny "to everyone but the archiver's role" would
therefore refuse the archiver too, and a Deny on ``s3:PutObjectRetention`` would never apply.
local/motoserver.py replaces that check with ``evaluate`` below.

What is evaluated (docs/operations.md "Threat model": where the real service attests, the local
stack does too):

* **Who asks**: the principal of the request's access key, as IAM names it in ``aws:PrincipalArn``:
  the role's ARN for an assumed role's session (``AssumeRole``), the user's ARN for an IAM user's
  key; moto's default key (the local stack's ``test``, which no IAM user holds) stands for the
  account's root user, ``arn:aws:iam::<account>:root`` (S3 applies a bucket policy's Deny to the
  root user too). A request without credentials has no principal.
* **Statements**: ``Effect``, ``Principal`` (``"*"``, ``{"AWS": "*"}``, ``{"AWS": [ARNs or account
  ids]}``, where an account's root ARN or id stands for every principal of that account;
  ``{"Service": ...}`` matches no request made with credentials), ``Action``/``NotAction`` and
  ``Resource``/``NotResource`` with ``*`` and ``?`` wildcards (actions case-insensitively), and
  ``Condition`` with the operators ``StringEquals``, ``StringNotEquals``, ``StringLike``,
  ``StringNotLike``, ``ArnEquals``, ``ArnNotEquals``, ``ArnLike``, ``ArnNotLike``, ``Bool`` (each
  with ``IfExists``) and ``Null``, over the keys ``aws:PrincipalArn``, ``aws:PrincipalAccount``,
  ``aws:SecureTransport`` (false: the local endpoint is plain HTTP), ``aws:username`` and
  ``s3:if-none-match`` (an object write's ``If-None-Match`` header, absent without one). A key
  the request does not carry is absent: a plain operator on it does not hold, a negated one
  (``…NotEquals``, ``…NotLike``) does, ``…IfExists`` does. Several values of one key are ORed,
  several keys and operators ANDed.
* **Decision**: an explicit Deny of a matching statement refuses the request whatever IAM
  allows; otherwise a matching Allow is reported as such, and no match is neutral (the caller's
  identity policies decide, when moto's access control is on).

Anything else (``NotPrincipal``, another operator, a policy variable such as ``${aws:username}``)
raises ``UnsupportedPolicy`` rather than being judged wrongly.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Decision(Enum):
    ALLOWED = "allowed"
    DENIED = "denied"
    NEUTRAL = "neutral"


class UnsupportedPolicy(ValueError):
    pass


@dataclass(frozen=True)
class Request:
    """What S3 knows of a request when it evaluates the bucket policy."""

    action: str                       # the IAM action, e.g. "s3:PutObjectRetention"
    resource: str                     # the object's (or bucket's) ARN
    principal_arn: str | None         # aws:PrincipalArn; None for an anonymous request
    account_id: str                   # the principal's account (aws:PrincipalAccount)
    secure_transport: bool = False    # aws:SecureTransport
    username: str | None = None       # aws:username (IAM users only)
    if_none_match: str | None = None  # s3:if-none-match: the request's If-None-Match header

    def context(self) -> dict[str, str]:
        out = {"aws:securetransport": "true" if self.secure_transport else "false"}
        if self.if_none_match is not None:
            out["s3:if-none-match"] = self.if_none_match
        if self.principal_arn:
            out["aws:principalarn"] = self.principal_arn
            out["aws:principalaccount"] = self.account_id
        if self.username:
            out["aws:username"] = self.username
        return out


OPERATORS = ("StringEquals", "StringNotEquals", "StringLike", "StringNotLike", "ArnEquals",
             "ArnNotEquals", "ArnLike", "ArnNotLike", "Bool")
KNOWN_KEYS = ("aws:principalarn", "aws:principalaccount", "aws:securetransport", "aws:username",
              "aws:sourcearn", "aws:sourceaccount", "s3:x-amz-acl", "s3:if-none-match")


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _wildcard(pattern: str, value: str, ignore_case: bool = False) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.I | re.S if ignore_case else re.S) is not None


def _arn_like(pattern: str, value: str) -> bool:
    """ArnLike: each of the six colon-separated parts matched on its own, with wildcards."""
    p, v = pattern.split(":", 5), value.split(":", 5)
    return len(p) == len(v) == 6 and all(_wildcard(a, b) for a, b in zip(p, v))


def _principal_matches(principal: Any, request: Request) -> bool:
    if principal == "*":
        return True
    if not isinstance(principal, dict):
        raise UnsupportedPolicy(f"Principal {principal!r}")
    unknown = set(principal) - {"AWS", "Service", "CanonicalUser", "Federated"}
    if unknown:
        raise UnsupportedPolicy(f"Principal keys {sorted(unknown)}")
    for value in _as_list(principal.get("AWS", [])):
        if value == "*":
            return True
        if request.principal_arn is None:
            continue
        if value == request.principal_arn:
            return True
        # An account (its id, or its root user's ARN) stands for every principal of it.
        if value == request.account_id or re.fullmatch(rf"arn:[^:]+:iam::{re.escape(request.account_id)}:root",
                                                       str(value)):
            return True
    return False  # Service/Federated/CanonicalUser: not a request made with an access key


def _condition_holds(operator: str, key: str, expected: Any, context: dict[str, str]) -> bool:
    if_exists = operator.endswith("IfExists")
    base = operator[: -len("IfExists")] if if_exists else operator
    key = key.lower()
    if key not in KNOWN_KEYS:
        raise UnsupportedPolicy(f"condition key {key}")
    values = [str(v) for v in _as_list(expected)]
    if any("${" in v for v in values):
        raise UnsupportedPolicy(f"policy variable in {values}")
    actual = context.get(key)
    if base == "Null":
        wanted_absent = [v.lower() == "true" for v in values]
        return (actual is None) in wanted_absent
    if base not in OPERATORS:
        raise UnsupportedPolicy(f"condition operator {operator}")
    negated = "Not" in base
    if actual is None:
        return if_exists or negated
    if base == "Bool":
        return actual.lower() in [v.lower() for v in values]
    if base in ("StringEquals", "StringNotEquals"):
        hit = actual in values
    elif base in ("StringLike", "StringNotLike"):
        hit = any(_wildcard(v, actual) for v in values)
    elif base in ("ArnEquals", "ArnNotEquals", "ArnLike", "ArnNotLike"):
        hit = any(_arn_like(v, actual) for v in values)
    else:  # pragma: no cover - OPERATORS is exhaustive above
        raise UnsupportedPolicy(operator)
    return not hit if negated else hit


def _conditions_hold(condition: Any, request: Request) -> bool:
    if not condition:
        return True
    if not isinstance(condition, dict):
        raise UnsupportedPolicy(f"Condition {condition!r}")
    context = request.context()
    return all(_condition_holds(operator, key, expected, context)
               for operator, pairs in condition.items() for key, expected in pairs.items())


def _statement_matches(st: dict, request: Request) -> bool:
    unknown = set(st) - {"Sid", "Effect", "Principal", "Action", "NotAction", "Resource", "NotResource",
                         "Condition"}
    if unknown:
        raise UnsupportedPolicy(f"statement elements {sorted(unknown)}")
    if st.get("Effect") not in ("Allow", "Deny"):
        raise UnsupportedPolicy(f"Effect {st.get('Effect')!r}")
    if "Principal" not in st:
        raise UnsupportedPolicy("a bucket policy statement without Principal")
    if not _principal_matches(st["Principal"], request):
        return False
    if "Action" in st:
        if not any(_wildcard(a, request.action, ignore_case=True) for a in _as_list(st["Action"])):
            return False
    elif "NotAction" in st:
        if any(_wildcard(a, request.action, ignore_case=True) for a in _as_list(st["NotAction"])):
            return False
    else:
        raise UnsupportedPolicy("a statement without Action or NotAction")
    if "Resource" in st:
        if not any(_wildcard(r, request.resource) for r in _as_list(st["Resource"])):
            return False
    elif "NotResource" in st:
        if any(_wildcard(r, request.resource) for r in _as_list(st["NotResource"])):
            return False
    else:
        raise UnsupportedPolicy("a statement without Resource or NotResource")
    return _conditions_hold(st.get("Condition"), request)


def evaluate(policy: str | bytes | dict, request: Request) -> tuple[Decision, str | None]:
    """The bucket policy's decision on the request, and the Sid (or index) of the statement that
    decided it (the first matching Deny, else the first matching Allow)."""
    doc = json.loads(policy) if isinstance(policy, (str, bytes)) else policy
    allowed_by = None
    for i, st in enumerate(_as_list(doc.get("Statement", []))):
        if not _statement_matches(st, request):
            continue
        name = st.get("Sid") or f"Statement[{i}]"
        if st["Effect"] == "Deny":
            return Decision.DENIED, name
        allowed_by = allowed_by or name
    return (Decision.ALLOWED, allowed_by) if allowed_by else (Decision.NEUTRAL, None)


# ---- the IAM action of an S3 object request ---------------------------------------------------

def object_action(method: str, query: dict[str, Any], headers: dict[str, str]) -> str:
    """The IAM action S3 authorises an object request as (the Service Authorization Reference's
    mapping of API operations to actions), for the requests an object's URL takes."""
    method = method.upper()
    versioned = bool(query.get("versionId"))
    if method == "PUT":
        if "retention" in query:
            return "s3:PutObjectRetention"
        if "legal-hold" in query:
            return "s3:PutObjectLegalHold"
        if "tagging" in query:
            return "s3:PutObjectVersionTagging" if versioned else "s3:PutObjectTagging"
        if "acl" in query:
            return "s3:PutObjectVersionAcl" if versioned else "s3:PutObjectAcl"
        return "s3:PutObject"  # PutObject, CopyObject's destination, UploadPart(Copy)
    if method == "POST":
        if "restore" in query:
            return "s3:RestoreObject"
        return "s3:PutObject"  # CreateMultipartUpload, CompleteMultipartUpload
    if method == "DELETE":
        if "tagging" in query:
            return "s3:DeleteObjectVersionTagging" if versioned else "s3:DeleteObjectTagging"
        if "uploadId" in query:
            return "s3:AbortMultipartUpload"
        return "s3:DeleteObjectVersion" if versioned else "s3:DeleteObject"
    if method in ("GET", "HEAD"):
        for sub, action in (("retention", "s3:GetObjectRetention"), ("legal-hold", "s3:GetObjectLegalHold"),
                            ("attributes", "s3:GetObjectAttributes")):
            if sub in query:
                return action
        if "tagging" in query:
            return "s3:GetObjectVersionTagging" if versioned else "s3:GetObjectTagging"
        if "acl" in query:
            return "s3:GetObjectVersionAcl" if versioned else "s3:GetObjectAcl"
        if "uploadId" in query:
            return "s3:ListMultipartUploadParts"
        return "s3:GetObjectVersion" if versioned else "s3:GetObject"
    return f"s3:{method.capitalize()}Object"


def access_key_of(headers: dict[str, str], query: dict[str, Any]) -> str | None:
    """The access key id a request is signed with (header or presigned URL); None if unsigned."""
    auth = headers.get("Authorization") or headers.get("authorization") or ""
    m = re.search(r"Credential=([^/,\s]+)/", auth) or re.match(r"AWS ([^:\s]+):", auth)
    if m:
        return m.group(1)
    credential = query.get("X-Amz-Credential") or query.get("AWSAccessKeyId")
    if isinstance(credential, list):
        credential = credential[0] if credential else None
    return credential.split("/", 1)[0] if credential else None
