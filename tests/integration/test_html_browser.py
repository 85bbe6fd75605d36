"""The HTML report in a real browser: Debian's chromium, headless, opens the report built from the
real H200 torch.profiler trace, and the rendered page has its charts (SVG with painted bars), tables
and metadata; the browser's own network log shows that the page asked for nothing but itself.

No Docker: this runs wherever chromium is installed (tools/install-host-deps installs it as root or
through sudo); without it the test is skipped by that condition, not unconditionally."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from support import FIXTURES, REPO

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (tools/install-host-deps "
                                                          "installs it as root)")

# Quiet, offline, throw-away profile: the browser's own background traffic is off, and any host a page
# names resolves to nothing, so even a request the page should not make never leaves the machine.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions",
         "--host-resolver-rules=MAP * ~NOTFOUND")


class Elements(HTMLParser):
    """Tags and attributes of a rendered DOM, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def count(self, tag: str, **attrs: str) -> int:
        return sum(1 for name, found in self.tags if name == tag and all(found.get(k) == v for k, v in attrs.items()))


def render(page: Path, workdir: Path) -> tuple[Elements, list[str]]:
    """The DOM chromium built from `page` (scripts run), and the URLs the page itself requested."""
    netlog = workdir / "netlog.json"
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={workdir / 'profile'}", f"--log-net-log={netlog}",
                           "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "<html" in done.stdout, done.stderr[-2000:]
    dom = Elements()
    dom.feed(done.stdout)
    log = json.loads(netlog.read_text())
    names = {number: name for name, number in log["constants"]["logEventTypes"].items()}
    # Requests a page started carry its origin as initiator; the browser's own say "not an origin"
    starts = [event.get("params", {}) for event in log["events"] if names.get(event["type"]) == "URL_REQUEST_START_JOB"]
    requested = [params["url"] for params in starts if "url" in params and params.get("initiator") != "not an origin"]
    return dom, requested


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("html") / "report.html"
    done = subprocess.run([sys.executable, str(REPO / "tools/profilectl"), "report",
                           str(FIXTURES / "nvidia-h200/torch_profiler_trace.json"), "--format", "html", "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return out


def test_the_rendered_report_has_charts_tables_and_metadata(report, tmp_path):
    dom, requested = render(report, tmp_path)
    assert dom.count("svg", **{"aria-label": "top kernels"}) == 1
    assert dom.count("svg", **{"aria-label": "share of GPU time"}) == 1
    assert dom.count("rect") >= 2 and dom.count("table") >= 3 and dom.count("table", **{"class": "metadata"}) == 1
    text = " ".join(dom.text)
    for expected in ("NVIDIA H200 (sm_90)", "2026-11-21 22:48:28 UTC", "torch.profiler", "Top kernels", "API calls",
                     "sm80_xmma_gemm_f32f32", "cudaFuncGetAttributes"):
        assert expected in text, expected
    assert all(url.startswith(("file:", "data:")) for url in requested), requested


def test_the_charts_are_painted(report, tmp_path):
    """Laid out by the browser, not only parsed: a script added to a copy measures the SVG bars."""
    page = tmp_path / "measured.html"
    probe = ("<script>const bars=[...document.querySelectorAll('svg rect')].map(r=>r.getBoundingClientRect());"
             "document.body.dataset.bars=bars.filter(b=>b.width>0&&b.height>0).length;"
             "document.body.dataset.rows=document.querySelectorAll('tr').length;</script></body>")
    page.write_text(report.read_text().replace("</body>", probe))
    dom, _ = render(page, tmp_path)
    body = next(attrs for tag, attrs in dom.tags if tag == "body")
    assert int(body["data-bars"] or 0) >= 2 and int(body["data-rows"] or 0) >= 10, body


def test_the_network_check_sees_a_request_when_there_is_one(tmp_path):
    """The check above can fail: a page that names an image on the network is caught (the host
    resolves to nothing, so nothing is fetched)."""
    page = tmp_path / "online.html"
    page.write_text('<!DOCTYPE html><html><body><img src="https://example.com/chart.png"></body></html>')
    _, requested = render(page, tmp_path)
    assert "https://example.com/chart.png" in requested


def test_the_timeline_and_power_charts_are_painted(tmp_path, monkeypatch):
    """The H200 trace's timeline (GPU busy over time) and a run's power over time, two GPUs sampled
    at 10 Hz (telemetry.csv as the sampler writes it), laid out by the browser."""
    monkeypatch.setenv("PROFILECTL_CACHE_DIR", str(tmp_path / "cache"))
    from profilectl.report.html import to_html
    from profilectl.read.load import load
    from profilectl.telemetry.energy import summarise_file
    from profilectl.telemetry.model import CSV_COLUMNS
    telemetry = tmp_path / "telemetry.csv"
    rows = [",".join(CSV_COLUMNS)]
    for sweep in range(30):
        t = 10**9 + sweep * 10**8
        rows += [f"{t},{t},{gpu},nvml,{100 + 10 * gpu + sweep},,{2**30},{2**34},1980,50,90" for gpu in (0, 1)]
    telemetry.write_text("\n".join(rows) + "\n")
    summary = dataclasses.replace(load(FIXTURES / "nvidia-h200/torch_profiler_trace.json"),
                                  power=summarise_file(telemetry))
    probe = ("<script>const painted=s=>[...document.querySelectorAll(`svg[aria-label='${s}'] *`)]"
             ".filter(e=>{const b=e.getBoundingClientRect();return b.width>0&&b.height>0}).length;"
             "document.body.dataset.busy=painted('GPU busy over time');"
             "document.body.dataset.power=painted('GPU power over time');"
             "document.body.dataset.lines=document.querySelectorAll(\"svg[aria-label='GPU power over time'] polyline\").length;"
             "</script></body>")
    page = tmp_path / "power.html"
    page.write_text(to_html(summary).replace("</body>", probe))
    dom, requested = render(page, tmp_path)
    body = next(attrs for tag, attrs in dom.tags if tag == "body")
    assert int(body["data-busy"] or 0) >= 1 and int(body["data-power"] or 0) >= 3, body
    assert body["data-lines"] == "2", body  # one line per GPU
    text = " ".join(dom.text)
    assert "GPU power and energy" in text and "Timeline" in text
    assert all(url.startswith(("file:", "data:")) for url in requested), requested
