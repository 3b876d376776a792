"""Read template.yaml the way CloudFormation would, far enough for the local stack.

The local stack must be built from the template's own definitions, so that local and deployed
configuration cannot drift. This module loads the SAM/CloudFormation template (the long
``Fn::`` forms that template.yaml is written in, and the YAML short tags such as ``!Ref`` of the
same functions) and evaluates, against the parameter defaults (or explicit overrides), only the
intrinsic functions template.yaml uses or is about to use:

    Ref (parameters, pseudo parameters, resources), Fn::GetAtt (Arn, QueueName, a table's
    StreamArn, a KMS key's KeyId, an IAM role's RoleId), Fn::FindInMap, Fn::Sub, Fn::Join,
    Fn::If, and in Conditions Fn::Equals, Fn::Not, Fn::Or and Fn::And; AWS::NoValue

Anything else raises ``TemplateError`` naming the path, rather than guessing: a template change
that needs another function adds it here, with a case in tests/e2e/test_stack.py. Physical names follow CloudFormation: an explicit ``TableName``/``QueueName``/
``FunctionName``/``BucketName`` is used as written, otherwise ``<stack>-<LogicalId>`` (``.fifo``
appended for FIFO queues, lower case for buckets), without CloudFormation's random suffix so that
runs are repeatable. A table's ``StreamArn`` exists only once the table does (its label is the
creation time): it evaluates to ``<table ARN>/stream/`` + ``STREAM_LABEL_PLACEHOLDER``, which
local/stack.py replaces with the real one after creating the table. A KMS key's id is the
service's choice too: until ``created`` holds the id the key got (local/stack.py sets it once it
has created the key), ``Ref`` evaluates to ``key_id_placeholder(logical id)`` and its ARN ends in
it, and local/stack.py replaces the placeholder where it was already used. An IAM role's
``RoleId`` likewise: ``role_id_placeholder(logical id)`` until ``created`` holds the id the role
got.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ACCOUNT_ID = "123456789012"  # moto's default account
REGION = "us-east-1"
NO_VALUE = object()  # AWS::NoValue: the key or list element is removed
STREAM_LABEL_PLACEHOLDER = "local-stream-label"  # see the module's docstring


def key_id_placeholder(logical_id: str) -> str:
    """What a KMS key's id evaluates to before the key exists (see the module's docstring)."""
    return f"local-key-id-of-{logical_id}"


def role_id_placeholder(logical_id: str) -> str:
    """What an IAM role's RoleId evaluates to before the role exists (see the module's docstring)."""
    return f"local-role-id-of-{logical_id}"


class TemplateError(Exception):
    pass


# --- loading: YAML short tags -> long form -------------------------------------------------

class _Loader(yaml.SafeLoader):
    pass


def _tag_constructor(fn_name: str):
    def construct(loader: yaml.Loader, node: yaml.Node) -> dict:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if fn_name == "Fn::GetAtt" and isinstance(value, str):
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {fn_name: value}

    return construct


# Short tags of the supported functions only; any other tag is a YAML error naming it.
for _short in ("FindInMap", "GetAtt", "Join", "Sub", "Equals", "If", "Not", "Or", "And"):
    _Loader.add_constructor(f"!{_short}", _tag_constructor(f"Fn::{_short}"))
_Loader.add_constructor("!Ref", _tag_constructor("Ref"))


def load_template(path: str | Path) -> dict:
    with open(path, encoding="utf-8") as f:
        doc = yaml.load(f, Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    if not isinstance(doc, dict) or "Resources" not in doc:
        raise TemplateError(f"{path}: not a CloudFormation template (no Resources)")
    return doc


# --- evaluation ----------------------------------------------------------------------------

@dataclass
class Template:
    doc: dict
    parameters: dict[str, str] = field(default_factory=dict)  # overrides of the defaults
    stack_name: str = "audit-receiver-local"
    region: str = REGION
    account_id: str = ACCOUNT_ID
    # Ids the services chose when the resources were created (a KMS key's, a role's RoleId), by
    # logical id.
    created: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._params = self._resolve_parameters()
        self._conditions: dict[str, bool] = {}
        self._names: dict[str, str] = {}

    # parameters ---------------------------------------------------------------------------
    def _resolve_parameters(self) -> dict[str, Any]:
        declared = self.doc.get("Parameters") or {}
        unknown = set(self.parameters) - set(declared)
        if unknown:
            raise TemplateError(f"unknown parameter(s): {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {}
        for name, spec in declared.items():
            if name in self.parameters:
                value: Any = self.parameters[name]
            elif "Default" in spec:
                value = spec["Default"]
            else:
                raise TemplateError(f"parameter {name} has no Default and no value was given")
            ptype = str(spec.get("Type", "String"))
            if ptype == "Number":
                value = str(value)
            elif ptype.startswith("List<") or ptype == "CommaDelimitedList":
                value = value if isinstance(value, list) else [v.strip() for v in str(value).split(",")]
            else:
                value = str(value)
            allowed = spec.get("AllowedValues")
            if allowed is not None and value not in [str(a) for a in allowed]:
                raise TemplateError(f"parameter {name}={value!r} is not one of {allowed}")
            values[name] = value
        return values

    @property
    def parameter_values(self) -> dict[str, Any]:
        return dict(self._params)

    def pseudo(self, name: str) -> Any:
        table = {
            "AWS::AccountId": self.account_id,
            "AWS::Region": self.region,
            "AWS::StackName": self.stack_name,
            "AWS::StackId": f"arn:aws:cloudformation:{self.region}:{self.account_id}:stack/{self.stack_name}/local",
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NoValue": NO_VALUE,
            "AWS::NotificationARNs": [],
        }
        if name not in table:
            raise TemplateError(f"unknown pseudo parameter {name}")
        return table[name]

    # conditions ---------------------------------------------------------------------------
    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            conds = self.doc.get("Conditions") or {}
            if name not in conds:
                raise TemplateError(f"unknown condition {name}")
            self._conditions[name] = bool(self.resolve(conds[name], f"Conditions.{name}"))
        return self._conditions[name]

    # resources ----------------------------------------------------------------------------
    @property
    def resources(self) -> dict[str, dict]:
        return self.doc["Resources"]

    def resource_enabled(self, logical_id: str) -> bool:
        cond = self.resources[logical_id].get("Condition")
        return True if cond is None else self.condition(cond)

    def resources_of_type(self, rtype: str) -> list[str]:
        return [lid for lid, r in self.resources.items()
                if r.get("Type") == rtype and self.resource_enabled(lid)]

    def properties(self, logical_id: str) -> dict:
        res = self.resources[logical_id]
        props = self.resolve(res.get("Properties") or {}, f"Resources.{logical_id}.Properties")
        if res.get("Type") == "AWS::Serverless::Function":
            glob = self.resolve((self.doc.get("Globals") or {}).get("Function") or {}, "Globals.Function")
            props = _merge_globals(glob, props)
        return props

    def physical_name(self, logical_id: str) -> str:
        if logical_id in self._names:
            return self._names[logical_id]
        if logical_id not in self.resources:
            raise TemplateError(f"unknown resource {logical_id}")
        res = self.resources[logical_id]
        rtype = res.get("Type")
        raw = res.get("Properties") or {}
        if rtype == "AWS::KMS::Key":
            return self.created.get(logical_id) or key_id_placeholder(logical_id)
        key = {"AWS::DynamoDB::Table": "TableName", "AWS::SQS::Queue": "QueueName",
               "AWS::Serverless::Function": "FunctionName", "AWS::Lambda::Function": "FunctionName",
               "AWS::CloudWatch::Alarm": "AlarmName", "AWS::S3::Bucket": "BucketName",
               "AWS::KMS::Alias": "AliasName"}.get(rtype)
        name = None
        if key and key in raw:
            name = self.resolve(raw[key], f"Resources.{logical_id}.Properties.{key}")
            if name is NO_VALUE:
                name = None
        if name is None:
            name = f"{self.stack_name}-{logical_id}"
            if rtype == "AWS::SQS::Queue" and _truthy(self.resolve(raw.get("FifoQueue", False), logical_id)):
                name += ".fifo"
            if rtype == "AWS::S3::Bucket":
                name = name.lower()  # S3 bucket names are lower case
        self._names[logical_id] = str(name)
        return self._names[logical_id]

    def ref(self, logical_id: str) -> str:
        rtype = self.resources[logical_id].get("Type")
        name = self.physical_name(logical_id)
        if rtype == "AWS::SQS::Queue":
            return self.queue_url(name)
        return name

    def queue_url(self, name: str, endpoint: str | None = None) -> str:
        base = endpoint.rstrip("/") if endpoint else f"https://sqs.{self.region}.amazonaws.com"
        return f"{base}/{self.account_id}/{name}"

    def arn(self, logical_id: str) -> str:
        rtype = self.resources[logical_id].get("Type")
        name = self.physical_name(logical_id)
        if rtype == "AWS::SQS::Queue":
            return f"arn:aws:sqs:{self.region}:{self.account_id}:{name}"
        if rtype == "AWS::DynamoDB::Table":
            return f"arn:aws:dynamodb:{self.region}:{self.account_id}:table/{name}"
        if rtype in ("AWS::Serverless::Function", "AWS::Lambda::Function"):
            return f"arn:aws:lambda:{self.region}:{self.account_id}:function:{name}"
        if rtype == "AWS::CloudWatch::Alarm":
            return f"arn:aws:cloudwatch:{self.region}:{self.account_id}:alarm:{name}"
        if rtype == "AWS::SNS::Topic":
            return f"arn:aws:sns:{self.region}:{self.account_id}:{name}"
        if rtype == "AWS::IAM::Role":
            return f"arn:aws:iam::{self.account_id}:role/{name}"
        if rtype == "AWS::S3::Bucket":
            return f"arn:aws:s3:::{name}"
        if rtype == "AWS::KMS::Key":
            return f"arn:aws:kms:{self.region}:{self.account_id}:key/{name}"
        raise TemplateError(f"no local ARN for {logical_id} ({rtype})")

    def get_att(self, logical_id: str, attr: str) -> Any:
        if logical_id not in self.resources:
            raise TemplateError(f"Fn::GetAtt on unknown resource {logical_id}")
        rtype = self.resources[logical_id].get("Type")
        if attr == "Arn":
            return self.arn(logical_id)
        name = self.physical_name(logical_id)
        if rtype == "AWS::SQS::Queue" and attr == "QueueName":
            return name
        if rtype == "AWS::DynamoDB::Table" and attr == "StreamArn":
            return f"{self.arn(logical_id)}/stream/{STREAM_LABEL_PLACEHOLDER}"
        if rtype == "AWS::KMS::Key" and attr == "KeyId":
            return name
        if rtype == "AWS::IAM::Role" and attr == "RoleId":
            return self.created.get(logical_id) or role_id_placeholder(logical_id)
        raise TemplateError(f"Fn::GetAtt {logical_id}.{attr} is not supported locally")

    # the evaluator ------------------------------------------------------------------------
    def resolve(self, node: Any, where: str = "") -> Any:
        if isinstance(node, list):
            out = [self.resolve(v, f"{where}[{i}]") for i, v in enumerate(node)]
            return [v for v in out if v is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (key, arg), = node.items()
            if key == "Ref" or key.startswith("Fn::"):
                return self._intrinsic(key, arg, where)
        out = {}
        for k, v in node.items():
            r = self.resolve(v, f"{where}.{k}")
            if r is not NO_VALUE:
                out[k] = r
        return out

    def _intrinsic(self, fn: str, arg: Any, where: str) -> Any:
        here = f"{where}: {fn}"
        if fn == "Ref":
            name = self.resolve(arg, where)
            if name in self._params:
                return self._params[name]
            if isinstance(name, str) and name.startswith("AWS::"):
                return self.pseudo(name)
            if name in self.resources:
                return self.ref(name)
            raise TemplateError(f"{here} to unknown name {name!r}")
        if fn == "Fn::GetAtt":
            if isinstance(arg, str):
                arg = arg.split(".", 1)
            lid, attr = (self.resolve(a, where) for a in arg)
            return self.get_att(lid, attr)
        if fn == "Fn::FindInMap":
            mname, k1, k2 = (self.resolve(a, where) for a in arg[:3])
            mappings = self.doc.get("Mappings") or {}
            try:
                return self.resolve(_lookup(_lookup(mappings[mname], k1), k2), where)
            except (KeyError, TypeError):
                if len(arg) > 3 and isinstance(arg[3], dict) and "DefaultValue" in arg[3]:
                    return self.resolve(arg[3]["DefaultValue"], where)
                raise TemplateError(f"{here} found no {mname}/{k1}/{k2}") from None
        if fn == "Fn::Sub":
            if isinstance(arg, list):
                text, variables = arg[0], self.resolve(arg[1] if len(arg) > 1 else {}, where)
            else:
                text, variables = arg, {}
            return self._sub(text, variables, here)
        if fn == "Fn::Join":
            sep, items = arg
            items = self.resolve(items, where)
            return str(sep).join(_as_str(i) for i in items)
        if fn == "Fn::Split":
            sep, text = arg
            return _as_str(self.resolve(text, where)).split(str(sep))
        if fn == "Fn::If":
            cond, yes, no = arg
            return self.resolve(yes if self.condition(cond) else no, where)
        if fn == "Fn::Equals":
            a, b = (self.resolve(x, where) for x in arg)
            return _as_str(a) == _as_str(b)
        if fn == "Fn::Not":
            return not self._truth(arg[0], where)
        if fn == "Fn::Or":
            return any(self._truth(a, where) for a in arg)
        if fn == "Fn::And":
            return all(self._truth(a, where) for a in arg)
        raise TemplateError(f"{here} is not supported by the local stack")

    def _truth(self, node: Any, where: str) -> bool:
        """A condition function's argument: a function, or ``{"Condition": name}``."""
        if isinstance(node, dict) and set(node) == {"Condition"}:
            return self.condition(node["Condition"])
        return bool(self.resolve(node, where))

    def _sub(self, text: str, variables: dict, here: str) -> str:
        def repl(m: re.Match) -> str:
            expr = m.group(1)
            if expr.startswith("!"):
                return "${" + expr[1:] + "}"
            if expr in variables:
                return _as_str(variables[expr])
            if expr in self._params:
                return _as_str(self._params[expr])
            if expr.startswith("AWS::"):
                return _as_str(self.pseudo(expr))
            if "." in expr:
                lid, attr = expr.split(".", 1)
                return _as_str(self.get_att(lid, attr))
            if expr in self.resources:
                return _as_str(self.ref(expr))
            raise TemplateError(f"{here} references unknown ${{{expr}}}")

        return re.sub(r"\$\{([^}]+)\}", repl, str(text))


def _merge_globals(glob: dict, props: dict) -> dict:
    out = dict(glob)
    for k, v in props.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge_globals(out[k], v)
        else:
            out[k] = v
    return out


def _lookup(table: dict, key: Any) -> Any:
    """Mapping keys may be written as numbers in YAML (``30:``) and looked up as strings."""
    for k, v in table.items():
        if _as_str(k) == _as_str(key):
            return v
    raise KeyError(key)


def _as_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _truthy(v: Any) -> bool:
    if isinstance(v, str):
        return v.lower() == "true"
    return bool(v)


def truthy(v: Any) -> bool:
    return _truthy(v)
