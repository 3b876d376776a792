"""local/canary.py, which `make test` runs the suites under, catches what it is there to catch:
a signal to a process the suite did not start, and a server left running."""

import subprocess
import sys

from local.canary import ROOT


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "local.canary", "--", sys.executable, "-c", code],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_a_clean_run_passes_with_the_commands_status():
    assert run("pass").returncode == 0
    result = run("raise SystemExit(4)")
    assert result.returncode == 4
    assert "alive after the run" in result.stderr


def test_a_killed_canary_fails_the_run():
    result = run("import os, signal; os.kill(int(os.environ['CANARY_PID']), signal.SIGKILL)")
    assert result.returncode == 3
    assert "canary process" in result.stderr and "SIGKILL" in result.stderr


def test_a_server_left_running_fails_the_run_and_is_stopped():
    # A process that runs this checkout's moto_server (in the checkout), in its own session, left.
    code = (f"import subprocess; subprocess.Popen(['bash', '-c', 'exec -a {ROOT}/.venv/bin/moto_server sleep 600'], "
            "start_new_session=True)")
    result = run(code)
    assert result.returncode == 3
    assert "left behind" in result.stderr
    leftover = subprocess.run(["pgrep", "-f", f"{ROOT}/.venv/bin/moto_server"], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", "the wrapper stops what it found"
