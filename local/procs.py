"""Processes of the local stack: moto_server and `cargo lambda watch`, bound to 127.0.0.1 on
free ports, each in its own process group so that stopping one stops all its children
(cargo, the function binary). Everything started here is stopped by ``stop()``, by
``stop_all()`` and at interpreter exit."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FUNCTION_NAME = "audit-receiver"  # the default binary; the archiver is "audit-archiver"
# cargo lambda watch's --timeout: how long an idle instance may wait for its next invocation.
WATCH_IDLE_TIMEOUT_S = 86_400
_started: list["Proc"] = []
_lock = threading.Lock()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float, proc: "Proc | None" = None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}; see {proc.log_path}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


class Proc:
    def __init__(self, name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None,
                 cwd: Path = ROOT):
        self.name = name
        self.argv = argv
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.popen = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      env=env, cwd=cwd, start_new_session=True)
        with _lock:
            _started.append(self)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group at once (a crash, not a shutdown)."""
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.popen.wait()

    def stop(self, grace: float = 5.0) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        # The group may outlive its leader (cargo's children): make sure none is left.
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.popen.poll() is None:
            self.popen.wait()
        self._log.close()
        with _lock:
            if self in _started:
                _started.remove(self)


def stop_all() -> None:
    with _lock:
        procs = list(reversed(_started))
    for p in procs:
        p.stop(grace=3)


atexit.register(stop_all)


def venv_bin(tool: str) -> str:
    for cand in (ROOT / ".venv" / "bin" / tool, Path(sys.executable).parent / tool):
        if cand.exists():
            return str(cand)
    found = shutil.which(tool)
    if not found:
        raise FileNotFoundError(f"{tool} not found: run `make venv`")
    return found


def start_moto(log_dir: Path, port: int | None = None, plain: bool | None = None) -> tuple[Proc, str]:
    """moto's server on 127.0.0.1, through local/motoserver.py (moto's own server with locks
    that make it safe under concurrent clients, and a cheap clock). `plain` (LOCAL_PLAIN_MOTO=1)
    runs the unpatched `moto_server`, which loses queued messages under concurrent pollers (and
    judges bucket policies without knowing who asks: the archive's refuses the archiver too)."""
    port = port or free_port()
    if plain is None:
        plain = os.environ.get("LOCAL_PLAIN_MOTO", "0") == "1"
    if plain:
        argv = [os.environ.get("MOTO_SERVER") or venv_bin("moto_server")]
    else:
        argv = [sys.executable, "-m", "local.motoserver"]
    proc = Proc("moto_server", argv + ["-H", "127.0.0.1", "-p", str(port)], log_dir / "moto.log")
    wait_port(port, 30, proc)
    return proc, f"http://127.0.0.1:{port}"


def function_env(stack_env: dict[str, str], endpoint: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    # The function must see the local endpoint and fake credentials, never a real account.
    for k in list(env):
        if k.startswith("AWS_") and k not in ("AWS_LAMBDA_LOG_FORMAT", "AWS_LAMBDA_LOG_LEVEL"):
            del env[k]
    env.update(stack_env)
    env.update({
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_LAMBDA_LOG_FORMAT": "JSON",
        "CARGO_TERM_COLOR": "never",
        "NO_COLOR": "1",
    })
    env.update(extra or {})
    return env


class Function:
    """A function (``binary``: audit-receiver by default, or audit-archiver), run locally behind
    its own `cargo lambda watch`'s invoke endpoint on 127.0.0.1: one emulator per function, so
    that each has its template environment, its concurrency and its log.

    mode "watch" (the default, what a user runs): `cargo lambda watch` builds and runs the
    function itself.

    mode "deadline-shim": `cargo lambda watch --only-lambda-apis` serves the Lambda APIs and the
    function binary (built with `cargo build`) is started here, talking to the runtime API
    through a small shim that gives each invocation a real Lambda deadline (now + the
    template's Timeout). cargo-lambda 1.9.2 sends `Lambda-Runtime-Deadline-Ms: 600000` (not an
    epoch time), which a function that honours its deadline reads as long past. The shim also
    lets a test kill and restart the function process alone while the emulator stays up.
    """

    def __init__(self, env: dict[str, str], log_path: Path, port: int | None = None, timeout_s: int = 30,
                 mode: str | None = None, concurrency: int = 1, binary: str = FUNCTION_NAME):
        self.binary_name = binary
        self.env = env
        self.concurrency = concurrency
        self.log_path = Path(log_path)
        self.port = port or free_port()
        self.timeout_s = timeout_s
        self.mode = mode or os.environ.get("LOCAL_FUNCTION_MODE", "watch")
        if self.mode not in ("watch", "deadline-shim"):
            raise ValueError(f"unknown function mode {self.mode!r}")
        self.proc: Proc | None = None      # cargo lambda watch
        self.binary: Proc | None = None    # the function process (deadline-shim mode)
        self.shim: "DeadlineShim | None" = None
        self.starts = 0

    @property
    def url(self) -> str:
        # With --only-lambda-apis, cargo lambda watch serves one unnamed function, "_".
        name = "_" if self.mode == "deadline-shim" else self.binary_name
        return f"http://127.0.0.1:{self.port}/2015-03-31/functions/{name}/invocations"

    def _cargo(self) -> str:
        return shutil.which("cargo", path=self.env.get("PATH")) or "cargo"

    def start(self, ready_timeout: float = 1800) -> "Function":
        # `--timeout` is also how long cargo lambda watch (1.9.2) lets an idle function instance
        # wait on the runtime API's /next: after that it answers without a request id, which
        # lambda_runtime 1.5 treats as fatal (the instance panics and is not restarted). Lambda's
        # /next waits for as long as it takes, so the local stack gives it a day; the trigger
        # enforces the template's Timeout on each invocation itself (invoke_timeout_s).
        argv = [self._cargo(), "lambda", "watch", "--invoke-address", "127.0.0.1", "--invoke-port",
                str(self.port), "--ignore-changes", "--timeout", str(WATCH_IDLE_TIMEOUT_S)]
        if self.mode == "deadline-shim":
            self._build(ready_timeout)
            argv.append("--only-lambda-apis")
        else:
            # One function instance per concurrent invocation, as Lambda scales out.
            argv += ["--bin", self.binary_name, "--concurrency", str(self.concurrency)]
        self._mark(f"start {' '.join(argv)}")
        self.proc = Proc("cargo lambda watch", argv, self.log_path, env=self.env)
        wait_port(self.port, 120, self.proc)
        if self.mode == "deadline-shim":
            self.shim = DeadlineShim(f"127.0.0.1:{self.port}", self.timeout_s).start()
            self.start_binary()
        self.warm_up(ready_timeout)
        return self

    def _mark(self, text: str) -> None:
        with open(self.log_path, "ab") as f:
            f.write(f"\n### {time.strftime('%H:%M:%S')} {text}\n".encode())

    def _build(self, timeout: float) -> None:
        self._mark(f"cargo build --bin {self.binary_name}")
        with open(self.log_path, "ab") as log:
            subprocess.run([self._cargo(), "build", "--bin", self.binary_name], cwd=ROOT, env=self.env,
                           stdout=log, stderr=subprocess.STDOUT, check=True, timeout=timeout)

    def start_binary(self) -> None:
        """deadline-shim mode: (re)start the function process."""
        assert self.shim is not None
        self.starts += 1
        env = dict(self.env)
        env.update({"AWS_LAMBDA_RUNTIME_API": f"http://127.0.0.1:{self.shim.port}/.rt",
                    "AWS_LAMBDA_FUNCTION_NAME": self.binary_name, "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
                    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": env.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")})
        self._mark(f"function process start {self.starts}")
        self.binary = Proc(self.binary_name, [str(ROOT / "target" / "debug" / self.binary_name)], self.log_path,
                           env=env)

    def function_pids(self) -> list[int]:
        """The running function process(es): the binary under cargo lambda watch, or ours."""
        if self.mode == "deadline-shim":
            return [self.binary.pid] if self.binary and self.binary.alive() else []
        out = subprocess.run(["pgrep", "-s", str(self.proc.pid), "-f", f"target/debug/{self.binary_name}$"],
                             capture_output=True, text=True) if self.proc else None
        return [int(p) for p in out.stdout.split()] if out else []

    def kill_function_process(self) -> list[int]:
        """SIGKILL the function process(es) only, as a crash would (not the emulator)."""
        pids = self.function_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.binary:
            self.binary.popen.wait()
            self.binary.stop()
        return pids

    def warm_up(self, timeout: float) -> None:
        """The first invoke builds (if needed) and starts the function: wait for it to answer
        an empty batch."""
        end = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < end:
            if self.proc and not self.proc.alive():
                raise RuntimeError(f"cargo lambda watch exited; see {self.log_path}")
            try:
                body = invoke(self.url, {"Records": []}, timeout=max(5.0, end - time.monotonic()))
                if isinstance(body, dict) and body.get("batchItemFailures") == []:
                    return
                last = RuntimeError(f"unexpected warm-up answer {body!r}")
            except Exception as e:  # noqa: BLE001 - keep trying until the deadline
                last = e
            time.sleep(0.5)
        raise TimeoutError(f"function not ready after {timeout}s: {last}; see {self.log_path}")

    def kill(self) -> None:
        """Crash everything (emulator and function) at once."""
        if self.binary:
            self.binary.kill()
            self.binary.stop()
        if self.proc:
            self.proc.kill()
            self.proc.stop()

    def stop(self) -> None:
        if self.binary:
            self.binary.stop()
        if self.proc:
            self.proc.stop()
        if self.shim:
            self.shim.stop()
            self.shim = None


class DeadlineShim:
    """Forwards the function's runtime API calls to cargo lambda watch, replacing the
    `Lambda-Runtime-Deadline-Ms` of each invocation by a real one (epoch ms, now + timeout)."""

    def __init__(self, upstream: str, timeout_s: int):
        import http.client
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        host, port = upstream.split(":")
        shim = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no 40 ms delayed-ACK stall between header and body

            def log_message(self, *a):
                pass

            def do_GET(self):
                self._fwd()

            do_POST = do_GET

            def _fwd(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                conn = http.client.HTTPConnection(host, int(port), timeout=None)
                try:
                    hdrs = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                    conn.request(self.command, self.path, body=body, headers=hdrs)
                    resp = conn.getresponse()
                    data = resp.read()
                except OSError:
                    self.close_connection = True
                    return
                finally:
                    conn.close()
                self.send_response_only(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() in ("content-length", "connection", "transfer-encoding", "date"):
                        continue
                    if k.lower() == "lambda-runtime-deadline-ms":
                        v = str(int(time.time() * 1000) + shim.timeout_s * 1000)
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.timeout_s = timeout_s
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda *a: None  # a peer going away is not news
        self.port = self.server.server_address[1]

    def start(self) -> "DeadlineShim":
        threading.Thread(target=self.server.serve_forever, daemon=True, name="deadline-shim").start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class InvokeError(Exception):
    pass


def invoke(url: str, event: dict, timeout: float) -> object:
    """POST the event; return the decoded JSON answer. Raises InvokeError for a function
    error, an HTTP error, or a broken connection."""
    data = json.dumps(event).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            if resp.headers.get("X-Amz-Function-Error"):
                raise InvokeError(f"function error: {raw[:500]!r}")
    except urllib.error.HTTPError as e:
        raise InvokeError(f"HTTP {e.code}: {e.read()[:500]!r}") from None
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        raise InvokeError(f"invoke failed: {e}") from None
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise InvokeError(f"malformed response: {raw[:200]!r}") from None
