"""local/canary.py, which `make test` runs the suites under, catches what it is there to catch:
a signal to a process the suite did not start, and a server left running."""

import os
import signal
import subprocess
import sys
import time

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


def test_a_server_another_run_starts_meanwhile_is_neither_counted_nor_stopped(tmp_path):
    # The end-to-end tests run on several workers in one checkout: while this wrapper runs (here,
    # in this test), another worker starts its own moto_server. It is not this run's to judge.
    ready, go = tmp_path / "ready", tmp_path / "go"
    code = (f"import pathlib, time; pathlib.Path({str(ready)!r}).touch()\n"
            f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.01)")
    wrapper = subprocess.Popen([sys.executable, "-m", "local.canary", "--", sys.executable, "-c", code],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    other = None
    try:
        while not ready.exists():
            assert wrapper.poll() is None, wrapper.communicate()
            time.sleep(0.01)
        env = {k: v for k, v in os.environ.items() if k != "CANARY_RUN"}
        other = subprocess.Popen(["bash", "-c", f"exec -a {ROOT}/.venv/bin/moto_server sleep 600"],
                                 cwd=ROOT, env=env, start_new_session=True)
        go.touch()
        _, err = wrapper.communicate(timeout=60)
        assert wrapper.returncode == 0, err
        assert "processes left behind" not in err
        assert other.poll() is None, "the other run's server is still running"
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
        if other is not None:
            os.killpg(other.pid, signal.SIGKILL)
            other.wait()
