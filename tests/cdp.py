"""A real headless Chromium driven over the DevTools protocol, for tests that look at a page as a
person would: script errors, the rendered DOM, hover, keyboard focus and a screenshot.

Everything the page logs is collected from before navigation starts: script exceptions
(``Runtime.exceptionThrown``), ``console.error`` calls, and browser log entries — which is where a
Content-Security-Policy violation (a blocked fetch) is reported.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

from fleet.timeline import browser

START_TIMEOUT_S = 60.0  # a cold Chromium on a busy 2-core box; measured ~2 s idle
CALL_TIMEOUT_S = 60.0


class Page:
    def __init__(self, ws: websocket.WebSocket) -> None:
        self.ws = ws
        self.next_id = 0
        self.errors: list[str] = []
        self.events: list[dict[str, Any]] = []

    def _note(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        self.events.append(msg)
        if method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            self.errors.append(
                f"exception: {d.get('text')} {d.get('exception', {}).get('description', '')}"
            )
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(f"console.error: {params.get('args')}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append(f"log: {params['entry'].get('text')}")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mine:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._note(msg)
        raise TimeoutError(method)

    def wait_event(self, method: str) -> dict[str, Any]:
        for msg in self.events:
            if msg.get("method") == method:
                return msg
        deadline = time.monotonic() + CALL_TIMEOUT_S
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            self._note(msg)
            if msg.get("method") == method:
                return msg
        raise TimeoutError(method)

    def js(self, expression: str) -> Any:
        out = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in out:
            raise RuntimeError(f"{expression}: {out['exceptionDetails']}")
        return out["result"].get("value")

    def open(self, url: str) -> None:
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def key(self, key: str, code: str, keycode: int, shift: bool = False) -> None:
        mods = 8 if shift else 0
        for kind in ("rawKeyDown", "keyUp"):
            self.call(
                "Input.dispatchKeyEvent",
                type=kind,
                key=key,
                code=code,
                windowsVirtualKeyCode=keycode,
                modifiers=mods,
            )

    def hover(self, x: float, y: float) -> None:
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return path


class Chromium:
    """``with Chromium() as page: page.open(url)``: one browser, one blank tab, then torn down."""

    def __enter__(self) -> Page:
        binary = browser.find()
        if binary is None:
            raise RuntimeError("no chromium on PATH: `invoke test` installs Debian's package")
        self._profile = tempfile.mkdtemp(prefix="fleet-cdp-")
        args = browser.base_args(binary, self._profile)
        args += ["--remote-debugging-port=0", "--window-size=1600,1000", "about:blank"]
        # Its own session: on exit every helper it started is ended with it (browser.end_group).
        self.proc = subprocess.Popen(
            args, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        port = self._port()
        # Chromium keeps writing to stderr; drain it, or a full pipe stalls the browser.
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()  # type: ignore[union-attr]
        targets = json.load(
            urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10)
        )
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=CALL_TIMEOUT_S)
        return Page(self.ws)

    def _port(self) -> int:
        assert self.proc.stderr is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                return int(m.group(1))
            if not line and self.proc.poll() is not None:
                break
        raise RuntimeError("chromium did not open its DevTools port")

    def __exit__(self, *exc: object) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            browser.end_group(self.proc.pid)
            browser.remove_profile(self._profile)
