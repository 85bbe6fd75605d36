"""The roofline chart in a real browser: Debian's chromium, headless, takes a screenshot of the chart
built from the real H100 capture, and at the centre of every kernel's point the pixel has that
point's colour (on the ring, for kernels without FLOP, drawn hollow): one painted point per kernel.

No Docker: runs wherever chromium is installed; skipped by that condition only."""

from __future__ import annotations

import dataclasses
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from profilectl import countersets
from profilectl.formats.ncu import NcuCsvReader
from profilectl.report.roofline_chart import HEIGHT, WIDTH, roofline_html
from profilectl.report.sections.roofline import roofline_section
from profilectl.read.summary import RunMetadata, SourceInfo, build
from support import FIXTURES

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (tools/install-host-deps "
                                                          "installs it as root)")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-extensions", "--hide-scrollbars",
         "--force-device-scale-factor=1", "--host-resolver-rules=MAP * ~NOTFOUND")


def png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGB(A) bytes of an 8-bit, non-interlaced PNG (what chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0
    channels = 4 if colour == 6 else 3
    raw, stride, rows, previous = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, [bytes(r[i:i + 3]) for r in rows for i in range(0, stride, channels)]


def test_every_kernel_is_a_painted_point(tmp_path):
    h100 = FIXTURES / "nvidia-h100-roofline"
    summary = build(NcuCsvReader().read_file(h100 / "roofline_ncu_metrics.csv"), SourceInfo(kind="x", path=str(h100)),
                    countersets.load("roofline", "nvidia", "sm_90").derived)
    summary = dataclasses.replace(summary, metadata=RunMetadata(gpu="NVIDIA H100 80GB HBM3 (sm_90)"))
    section = roofline_section(summary)
    assert section is not None
    page = tmp_path / "roofline.html"
    page.write_text(roofline_html(section))
    shot = tmp_path / "shot.png"
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={WIDTH},{HEIGHT}",
                           f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    width, height, pixels = png_pixels(shot)
    assert (width, height) == (WIDTH, HEIGHT)
    circles = re.findall(r'<circle class="(kernel-point[^"]*)" data-kernel="([^"]+)" data-verdict="[^"]+" '
                         r'cx="([\d.]+)" cy="([\d.]+)" r="([\d.]+)" (?:fill="(#\w+)" stroke="#000000"|'
                         r'fill="#ffffff" stroke="(#\w+)")', page.read_text())
    assert len(circles) == len(summary.kernels) == 5
    for kind, name, cx, cy, r, fill, ring in circles:
        x, y = round(float(cx)), round(float(cy))
        if kind == "kernel-point":
            expected, probe = fill, (x, y)
        else:  # hollow: the ring, 3 px wide, just inside the radius
            expected, probe = ring, (round(float(cx) + float(r) - 0.5), y)
        colour = bytes.fromhex(expected[1:])
        found = pixels[probe[1] * width + probe[0]]
        assert max(abs(a - b) for a, b in zip(found, colour)) <= 24, (name, expected, found.hex())
