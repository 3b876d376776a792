"""The local stack's witness of the transparency log (docs/operations.md "Witnesses"): `auditctl
witness`, the built binary, run after each run of the local seal schedule (local/schedule.py), as
a witness would run on its own schedule elsewhere.

* its key is made once in its directory (``auditctl witness --init``: ``key``, mode 0600, and
  ``key.pub``) and kept; its public key is ``WITNESS_KEY`` in ``.local/stack.env``;
* its state (``state.json``, the last checkpoint it accepted) belongs to one log: a new local
  stack starts a new log (moto starts empty), so ``start_new_log`` moves a previous stack's state
  aside (``state.json.previous``) rather than have the witness refuse the new log as a rollback;
* each run is logged, one JSON line (exit status, what it printed, milliseconds), to
  ``log_path``; a refusal (exit 1, ``REFUSED: ...``) is logged, never hidden.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The local witness's key name (a C2SP key name: no spaces, no '+').
NAME = "witness.audit-receiver.local/local-stack"


def build_auditctl() -> Path:
    """target/debug/auditctl, built (or found up to date) by cargo, as `make demo` builds it."""
    subprocess.run(["cargo", "build", "--quiet", "--bin", "auditctl"], cwd=ROOT, check=True,
                   env=dict(os.environ, CARGO_TERM_COLOR="never"))
    return ROOT / "target" / "debug" / "auditctl"


class LocalWitness:
    def __init__(self, directory: Path, auditctl: Path, env: dict[str, str], log_path: Path | None = None):
        self.dir = Path(directory)
        self.key = self.dir / "key"
        self.state = self.dir / "state.json"
        self.auditctl = Path(auditctl)
        self.env = env
        self.runs = 0
        self.refusals = 0
        self._lock = threading.Lock()
        self._log = open(log_path, "a", encoding="utf-8") if log_path else None

    def init(self) -> str:
        """The witness's public key (vkey), its key made first when there is none."""
        self.dir.mkdir(parents=True, exist_ok=True)
        public = self.dir / "key.pub"
        if not self.key.exists():
            made = subprocess.run([str(self.auditctl), "witness", "--init", "--key", str(self.key), "--name", NAME],
                                  env=self.env, capture_output=True, text=True, timeout=60)
            if made.returncode != 0:
                raise RuntimeError(f"auditctl witness --init exited {made.returncode}: {made.stderr.strip()}")
        return public.read_text().strip()

    def start_new_log(self) -> None:
        """A new stack's log: the previous stack's accepted checkpoint is kept aside, not used."""
        if self.state.exists():
            self.state.replace(self.state.with_name("state.json.previous"))

    def run(self) -> subprocess.CompletedProcess:
        """One witness run (`auditctl witness --state ... --key ...`), logged."""
        with self._lock:  # one at a time over one state file
            started = time.monotonic()
            done = subprocess.run([str(self.auditctl), "witness", "--state", str(self.state), "--key", str(self.key)],
                                  env=self.env, capture_output=True, text=True, timeout=120)
            self.runs += 1
            self.refusals += done.returncode != 0 and "REFUSED:" in done.stderr
            if self._log:
                self._log.write(json.dumps({"event": "witness", "t": round(time.time(), 3), "exit": done.returncode,
                                            "stdout": done.stdout.strip()[-2000:],
                                            "stderr": done.stderr.strip()[-2000:],
                                            "ms": int((time.monotonic() - started) * 1000)}) + "\n")
                self._log.flush()
            return done

    def close(self) -> None:
        with self._lock:
            if self._log:
                self._log.close()
                self._log = None
