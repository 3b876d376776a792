"""End-to-end tests of the local system (moto_server, template stack, fault proxy, the real
function under `cargo lambda watch`, the local SQS trigger). Run with `make e2e`; `make soak`
runs the long variant. Sizes come from the environment so that one test serves both:

    E2E_MESSAGES       logical messages sent by the producer (default 1000)
    E2E_FAULT_SCALE    multiplies every fault probability (default 1)
    E2E_SEED           seed of the producer and of the fault proxy (default 7)
    E2E_DRAIN_TIMEOUT  seconds allowed for the queue to drain (default 600)
    E2E_VISIBILITY_TIMEOUT  the source queue's visibility timeout, scaled down (default 4)
    E2E_POLLERS        concurrent invocations of the trigger (default 4; the template allows 10)
    LOCAL_FUNCTION_MODE  "watch" (default) or "deadline-shim" (see local/procs.py)
"""

import os
import signal
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_configure(config):
    # A TERM (CI stopping, `kill`) unwinds like Ctrl-C, so that every fixture and `with` block
    # stops the servers it started.
    def on_term(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


@pytest.fixture
def work_dir(tmp_path_factory, request) -> Path:
    """Logs of one test (moto, function, trigger); kept under .local/e2e/<test> for a look after
    a failure."""
    base = Path(os.environ.get("E2E_WORK_DIR", ROOT / ".local" / "e2e"))
    d = base / request.node.name
    if d.exists():
        import shutil

        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


def pytest_report_header(config):
    return [f"e2e: messages={os.environ.get('E2E_MESSAGES', 1000)} "
            f"fault_scale={os.environ.get('E2E_FAULT_SCALE', 1)} "
            f"function_mode={os.environ.get('LOCAL_FUNCTION_MODE', 'watch')}"]
