"""A real headless Chromium (Debian's package, installed by `make chromium`) driven over the
DevTools protocol with websocket-client: navigate, evaluate, wait for a condition, take a
screenshot at a given width. Started in a process group of its own and stopped with killpg.
Knows nothing of the pages it drives."""

import base64
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import websocket

CHROMIUM = os.environ.get("CHROMIUM", "chromium")


def available() -> str | None:
    """The chromium binary, or None when it is not installed."""
    return shutil.which(CHROMIUM)


class Browser:
    def __init__(self, work_dir: Path):
        self.profile = work_dir / "chromium-profile"
        if self.profile.exists():
            shutil.rmtree(self.profile)
        self.profile.mkdir(parents=True)
        self.log = open(work_dir / "chromium.log", "ab")
        args = [CHROMIUM, "--headless=new", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-extensions", "--password-store=basic", "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}", "--window-size=1280,800", "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses root without it (CI runs as root)
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self.next_id = 0
        self.events: list[dict] = []
        try:
            port = self._port()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                pages = [t for t in json.load(r) if t["type"] == "page"]
            self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=60,
                                                  suppress_origin=True)
            self.call("Page.enable")
            self.call("Runtime.enable")
        except BaseException:
            self.close()
            raise

    def _port(self) -> int:
        """The DevTools port Chromium chose, from the file it writes once it listens."""
        active = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if active.exists() and active.read_text().strip():
                return int(active.read_text().split()[0])
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited {self.proc.returncode}: see chromium.log")
            time.sleep(0.05)
        raise RuntimeError("chromium wrote no DevToolsActivePort within 60 s")

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001 - stopping regardless
            pass
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()

    # the protocol ---------------------------------------------------------------------------------
    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == mine:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def navigate(self, url: str) -> None:
        """Opens `url` and returns once its load event fired (after any redirect)."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        self._wait_event("Page.loadEventFired")

    def _wait_event(self, name: str) -> dict:
        while True:
            for i, event in enumerate(self.events):
                if event["method"] == name:
                    return self.events.pop(i)
            self.events.append(json.loads(self.ws.recv()))

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (a promise awaited)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click_and_load(self, selector: str) -> None:
        """Clicks the element and waits for the page it opens."""
        self.events.clear()
        self.evaluate(f"document.querySelector({json.dumps(selector)}).click()")
        self._wait_event("Page.loadEventFired")

    def key(self, key: str, load: bool = False) -> None:
        """Presses a key (a letter, or Enter) as a person does; with `load`, waits for the page it
        opens."""
        code = 13 if key == "Enter" else ord(key.upper())
        text = "\r" if key == "Enter" else key
        if load:
            self.events.clear()
        self.call("Input.dispatchKeyEvent", type="keyDown", key=key, text=text, windowsVirtualKeyCode=code)
        self.call("Input.dispatchKeyEvent", type="keyUp", key=key, windowsVirtualKeyCode=code)
        if load:
            self._wait_event("Page.loadEventFired")

    def wait_for(self, expression: str, timeout: float = 30):
        """Polls until the expression is truthy (the page's own script finishing its work)."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"not true within {timeout} s: {expression}")
            time.sleep(0.05)

    def status(self) -> int:
        """The HTTP status of the page shown."""
        return self.evaluate("performance.getEntriesByType('navigation')[0].responseStatus")

    def text(self) -> str:
        return self.evaluate("document.body.innerText")

    def screenshot(self, path: Path, width: int, height: int = 800) -> Path:
        """The page at `width` CSS pixels (a phone below 500), whole height up to 4 screens."""
        mobile = width < 500
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=mobile)
        full = min(self.evaluate("document.documentElement.scrollHeight"), height * 4)
        shot = self.call("Page.captureScreenshot", format="png",
                         clip={"x": 0, "y": 0, "width": width, "height": max(full, height), "scale": 1},
                         captureBeyondViewport=True)
        self.call("Emulation.clearDeviceMetricsOverride")
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
