"""report.html in a real browser: headless Chromium (Debian's ``chromium``) driven over the
DevTools protocol on a pipe (``--remote-debugging-pipe``: NUL-terminated JSON on fds 3 and 4,
no Python dependency). The page's own Content-Security-Policy is bypassed so that a reference
to anything outside the file would be attempted and seen as a network request.

Set ``FEDPRIV_SCREENSHOT_DIR`` to keep the screenshot.
"""

from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from report_support import synthetic_report

from fedpriv.audit.gallery import AttackView, strip_png
from fedpriv.audit.html_report import render_report_html
from fedpriv.audit.pairing import REMATCHED, Pairing

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
    "--disable-default-apps", "--hide-scrollbars", "--remote-debugging-pipe",
    "--window-size=1280,1000",
]  # fmt: skip
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (/usr/bin/chromium)"),
]


def _above_4(fd: int) -> int:
    """``fd`` moved to a descriptor number of at least 10 (close-on-exec)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class DevTools:
    """A Chromium process and one page session over the DevTools pipe."""

    def __init__(self, profile: Path) -> None:
        # pipe ends kept above fd 4, so that dup2 onto 3 and 4 in the child is never a no-op
        # (a no-op dup2 would leave close-on-exec set, and Chromium would find no pipe)
        cmd_read, self._cmd = (_above_4(fd) for fd in os.pipe())
        self._res, res_write = (_above_4(fd) for fd in os.pipe())

        def pipes() -> None:  # in the child: fd 3 reads commands, fd 4 writes replies
            os.dup2(cmd_read, 3)
            os.dup2(res_write, 4)

        self.proc = subprocess.Popen(
            [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            preexec_fn=pipes, close_fds=False, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(cmd_read)
        os.close(res_write)
        self.events: list[dict[str, Any]] = []
        self._buffer, self._next = b"", 0
        self.session: str | None = None

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._res, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, timeout: float = 60.0, **params: Any) -> dict[str, Any]:
        """Send a command (to the page session once attached); return its result."""
        self._next += 1
        message = {"id": self._next, "method": method, "params": params}
        if self.session is not None:
            message["sessionId"] = self.session
        os.write(self._cmd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, method: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            event = self._read(deadline)
            self.events.append(event)
            if event.get("method") == method:
                return event

    def close(self) -> None:
        os.close(self._cmd)
        os.close(self._res)
        self.proc.kill()  # the process this test started, by its handle
        self.proc.wait(timeout=30)


def _page(path: Path) -> str:
    """A report with every optional field and drawn attacks, written to ``path``."""
    report, _ = synthetic_report(30, 6, optional=True, seed=4)
    rng = np.random.default_rng(4)
    y, x = np.mgrid[0:16, 0:16]
    blobs = np.exp(-((y[None] - rng.uniform(4, 12, (6, 1, 1))) ** 2
                     + (x[None] - rng.uniform(4, 12, (6, 1, 1))) ** 2) / 10)  # fmt: skip
    pairing = Pairing(blobs, np.clip(blobs + rng.normal(0, 0.1, blobs.shape), 0, 1), REMATCHED,
                      "re-matched")  # fmt: skip
    views = [AttackView(r, c, "iga", {"mse": 0.01, "psnr": 21.0, "ssim": 0.8},
                        strip_png(pairing), REMATCHED, "re-matched", 6, True)
             for r, c in ((1, 0), (2, 3))]  # fmt: skip
    page = render_report_html(report, views)
    path.write_text(page, encoding="utf-8")
    return page


def test_report_loads_offline_and_every_figure_renders(tmp_path):
    from PIL import Image

    page = _page(tmp_path / "report.html")
    images_in_source = len(re.findall(r"<img ", page))
    chrome = DevTools(tmp_path / "profile")
    try:
        target = chrome.call("Target.createTarget", url="about:blank")["targetId"]
        chrome.session = chrome.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"]  # fmt: skip
        for domain in ("Page", "Network", "Runtime", "Log"):
            chrome.call(f"{domain}.enable")
        chrome.call("Page.setBypassCSP", enabled=True)  # let any outside reference be tried
        chrome.call("Page.navigate", url=(tmp_path / "report.html").as_uri())
        chrome.wait_for("Page.loadEventFired")
        images = json.loads(chrome.call(
            "Runtime.evaluate", returnByValue=True,
            expression="JSON.stringify([...document.images].map("
                       "i => [i.complete, i.naturalWidth, i.naturalHeight]))",
        )["result"]["value"])  # fmt: skip
        shot = chrome.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
    finally:
        chrome.close()
    urls = [e["params"]["request"]["url"] for e in chrome.events
            if e.get("method") == "Network.requestWillBeSent"]  # fmt: skip
    outside = [u for u in urls if not u.startswith(("file://", "data:"))]
    assert outside == [] and any(u.startswith("file://") for u in urls)
    errors = [e["params"]["entry"] for e in chrome.events if e.get("method") == "Log.entryAdded"
              and e["params"]["entry"]["level"] == "error"]  # fmt: skip
    assert errors == []
    assert len(images) == images_in_source > 8  # every figure and both attack strips
    assert all(complete and width > 100 and height > 50 for complete, width, height in images)
    png = base64.b64decode(shot["data"])
    with Image.open(io.BytesIO(png)) as screenshot:
        assert screenshot.size[0] == 1280 and screenshot.size[1] > 3000  # the whole page
    keep = os.environ.get("FEDPRIV_SCREENSHOT_DIR")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / "report.png").write_bytes(png)
        shutil.copy(tmp_path / "report.html", Path(keep) / "report.html")
