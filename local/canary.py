"""Runs a command (the test suites) and proves it harmed nothing outside itself.

    python -m local.canary -- cargo nextest run ...

Before the command, a canary process is started in a session of its own, outside every group
the tests create; after it, the canary must still be alive, and no process of this checkout
(moto_server, cargo lambda watch, the function) that the command started may be left running.
A stray signal to every process (`kill -TERM -1`, which procps-ng's `kill -TERM -12` turns into)
or to the wrong group would kill the canary; this wrapper ignores SIGTERM and SIGHUP while the
command runs, so that it survives to say so. Exit status: the command's, or 3 when the canary
died or processes were left behind (those are then stopped).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def background_build(entry: Path) -> bool:
    """A process of a build that CI runs beside the suites (`.ci/run` marks its environment with
    AUDIT_BACKGROUND_BUILD): not a server the suites started, and not theirs to stop."""
    try:
        return b"\0AUDIT_BACKGROUND_BUILD=" in b"\0" + (entry / "environ").read_bytes()
    except OSError:
        return False


def started_by(entry: Path, run: str) -> bool:
    """Whether the process descends from the command this canary ran: the canary gives the command
    CANARY_RUN, a value of its own, and every process it starts inherits it (a server left in its
    own session too). A suite running beside this one in the same checkout (the end-to-end tests
    run on several workers, one of them this wrapper's own test) has another value, or none."""
    try:
        return f"\0CANARY_RUN={run}\0".encode() in b"\0" + (entry / "environ").read_bytes()
    except OSError:
        return False


def ours(run: str) -> dict[int, str]:
    """Servers running in this checkout (their working directory is in it) that the command of
    this run started: moto_server, cargo lambda watch, the function. Another checkout's servers,
    even ones started with this checkout's tools, are not ours, nor another run's."""
    found = {}
    root = str(ROOT)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if not cmdline:
            continue
        if background_build(entry) or not started_by(entry, run):
            continue
        servers = ("moto_server", "local.motoserver", "cargo-lambda", "lambda watch", "audit-receiver")
        if (cwd == root or cwd.startswith(root + "/")) and any(s in cmdline for s in servers):
            found[int(entry.name)] = cmdline
    return found


def main(argv: list[str]) -> int:
    if "--" in argv:
        argv = argv[argv.index("--") + 1:]
    if not argv:
        print("usage: python -m local.canary -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    strays: list[str] = []
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _f: strays.append(signal.Signals(n).name))
    run = uuid.uuid4().hex
    before = set(ours(run))
    canary = subprocess.Popen(["sleep", "86400"], start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        status = subprocess.call(argv, env={**os.environ, "CANARY_PID": str(canary.pid), "CANARY_RUN": run})
    finally:
        canary_alive = canary.poll() is None
        if canary_alive:
            os.killpg(canary.pid, signal.SIGKILL)
        canary.wait()
    problems = []
    if not canary_alive:
        problems.append(f"the canary process (pid {canary.pid}, its own session) was killed by "
                        f"{signal.Signals(-canary.returncode).name if canary.returncode < 0 else canary.returncode}: "
                        "a test signalled a process it did not start")
    if strays:
        problems.append(f"this wrapper received {', '.join(strays)} from the command's run")
    left = {pid: cmd for pid, cmd in ours(run).items() if pid not in before}
    if left:
        problems.append("processes left behind: " + "; ".join(f"{pid} {cmd[:120]}" for pid, cmd in left.items()))
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p in problems:
        print(f"canary: {p}", file=sys.stderr)
    if problems:
        return status or 3
    print("canary: alive after the run; no process left behind", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
