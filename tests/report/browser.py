"""A real headless Chromium for the report's tests: a page rendered to a PNG screenshot, with every console message
the page caused (``--enable-logging=stderr``: each message is a ``:CONSOLE`` line), and a PNG decoder on ``zlib`` and
numpy (no imaging library) to check that the screenshot is not blank."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0", "--hide-scrollbars"]


def browser() -> str:
    """The browser's executable, or skip the test saying why (scripts/setup.sh installs it where apt-get is)."""
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no headless Chromium on this machine (scripts/setup.sh installs Debian's chromium package where "
                "apt-get is available)")
    raise AssertionError  # pragma: no cover  (skip raises)


def render(page: Path, tmp: Path, width: int = 1100, height: int = 900) -> tuple[np.ndarray, list[str]]:
    """Screenshot of ``page`` (pixels as an ``[H, W, channels]`` uint8 array) and its console messages."""
    shot = tmp / f"{page.stem}.png"
    profile = tmp / f"{page.stem}-profile"
    res = subprocess.run([browser(), *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
                          f"--screenshot={shot}", page.resolve().as_uri()],
                         capture_output=True, text=True, timeout=180, check=False)
    assert shot.exists(), f"no screenshot (exit {res.returncode}): {res.stderr[-2000:]}"
    console = [line for line in res.stderr.splitlines() if ":CONSOLE" in line]
    return decode_png(shot.read_bytes()), console


def _paeth_row(line: bytearray, prior: bytes, bpp: int) -> None:
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        b = prior[i]
        c = prior[i - bpp] if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF


def decode_png(data: bytes) -> np.ndarray:
    """The pixels of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + length
    assert header is not None
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and not interlace, header
    bpp = 3 if color == 2 else 4
    stride = width * bpp
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8).reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    prior = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        kind, line = int(raw[y, 0]), raw[y, 1:]
        if kind == 0:
            row = line.copy()
        elif kind == 1:  # Sub: a running sum per channel
            row = np.cumsum(line.reshape(-1, bpp).astype(np.uint64), axis=0).astype(np.uint8).reshape(-1)
        elif kind == 2:  # Up
            row = line + prior
        else:
            buf = bytearray(line.tobytes())
            if kind == 3:  # Average
                for i in range(stride):
                    left = buf[i - bpp] if i >= bpp else 0
                    buf[i] = (buf[i] + ((left + int(prior[i])) >> 1)) & 0xFF
            else:
                _paeth_row(buf, prior.tobytes(), bpp)
            row = np.frombuffer(bytes(buf), dtype=np.uint8)
        out[y] = row
        prior = row
    return out.reshape(height, width, bpp)
