"""`make validate`'s template variants: cfn-lint on copies of template.yaml whose parameter
defaults are set to other values, so that the SAM transform and the linter see each variant as a
deployment with those parameters would (cfn-lint's ``--parameters`` is not applied to a template
with a Transform). cfn-lint already checks every branch of every condition; a variant adds the
values' own checks (AllowedValues, ranges) and what the transform resolves from parameters.

    python -m local.lint_variants [cfn-lint arguments...]
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"

# Each variant: parameters that differ from the defaults.
VARIANTS: dict[str, dict[str, str]] = {
    "provisioned, one lookup index": {"TableBillingMode": "PROVISIONED", "LookupIndexes": "action"},
    "provisioned, no lookup index, no dashboard": {"TableBillingMode": "PROVISIONED", "LookupIndexes": "none",
                                                   "Dashboard": "false"},
}


def with_defaults(text: str, parameters: dict[str, str]) -> str:
    """template.yaml's text with each named parameter's ``Default:`` line set to the value."""
    for name, value in parameters.items():
        pattern = re.compile(rf"(\n  {re.escape(name)}:\n(?:    .*\n)*?    Default: ).*\n")
        written = value if re.fullmatch(r"[0-9]+", value) else f'"{value}"'  # a Number unquoted
        text, n = pattern.subn(lambda m: m.group(1) + written + "\n", text, count=1)
        if n != 1:
            raise SystemExit(f"lint_variants: no Default line for parameter {name}")
    return text


def variants() -> dict[str, dict[str, str]]:
    """VARIANTS and the parameters of each `make cost` configuration (local/cost.py)."""
    from local.cost import CONFIGURATIONS

    out = dict(VARIANTS)
    for name, config in CONFIGURATIONS.items():
        if config.get("template_parameters"):
            out[f"make cost's {name} configuration"] = config["template_parameters"]
    return out


def main(argv: list[str] | None = None) -> int:
    extra = list(sys.argv[1:] if argv is None else argv)
    text = TEMPLATE.read_text()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for label, parameters in variants().items():
            path = Path(tmp) / "template.yaml"
            path.write_text(with_defaults(text, parameters))
            shown = " ".join(f"{k}={v}" for k, v in parameters.items())
            print(f"cfn-lint, {label}: {shown}", flush=True)
            failed |= subprocess.run(["cfn-lint", str(path), *extra]).returncode
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
