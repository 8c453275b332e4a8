"""The report in a real headless Chromium: it renders to a screenshot that is not blank, with no console message;
the checks themselves can fail (a page with a script error and a blank page are caught); and the page's
Content-Security-Policy stops a script or a request even if one were smuggled in."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from consumer import Consumer
from consumer.report import render_report

from ..conftest import write_corpus
from .browser import decode_png, render


def _ink(pixels: np.ndarray) -> tuple[float, float]:
    """Pixel standard deviation and the share of pixels that are not the background (the most common colour)."""
    rgb = pixels[..., :3].reshape(-1, 3)
    values, counts = np.unique(rgb, axis=0, return_counts=True)
    background = values[np.argmax(counts)]
    return float(rgb.std()), float(np.any(rgb != background, axis=1).mean())


def test_the_report_renders_with_ink_and_no_console_message(tmp_path):
    ds = Consumer(write_corpus(tmp_path / "c"), seqlen=64, cache_dir=False)
    page = tmp_path / "report.html"
    page.write_text(render_report(ds, content=True), encoding="utf-8")
    pixels, console = render(page, tmp_path)
    assert console == []
    std, ink = _ink(pixels)
    assert pixels.shape[0] >= 800 and std > 20 and ink > 0.05, (std, ink)


def test_the_checks_can_fail_a_script_error_and_a_blank_page_are_caught(tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><p>text</p><script>undefinedFunction();</script></body></html>")
    _, console = render(broken, tmp_path)
    assert any("Uncaught ReferenceError: undefinedFunction is not defined" in line for line in console), console
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    pixels, console = render(blank, tmp_path)
    assert console == [] and _ink(pixels) == (0.0, 0.0)


class _Counter(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        self.hits.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_the_policy_blocks_a_smuggled_script_and_request(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        ds = Consumer(write_corpus(tmp_path / "c"), seqlen=64, cache_dir=False)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        smuggled = (f'<script>document.title="ran"</script><img src="{url}/img.png">'
                    f'<link rel="stylesheet" href="{url}/style.css"><iframe src="{url}/frame"></iframe>')
        page = tmp_path / "smuggled.html"
        page.write_text(render_report(ds).replace("<main>", "<main>" + smuggled, 1), encoding="utf-8")
        _, console = render(page, tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert _Counter.hits == []  # the browser asked for nothing
    assert any("Content Security Policy" in line for line in console), console  # and said why


def test_the_png_decoder_reads_every_filter(tmp_path):
    import struct
    import zlib

    pixels = np.random.default_rng(0).integers(0, 256, (5, 4, 3), dtype=np.uint8)
    stride = 12
    rows = []
    prior = np.zeros(stride, dtype=np.int64)
    for y, kind in enumerate((0, 1, 2, 3, 4)):
        cur = pixels[y].reshape(-1).astype(np.int64)
        left = np.concatenate([np.zeros(3, dtype=np.int64), cur[:-3]])
        upleft = np.concatenate([np.zeros(3, dtype=np.int64), prior[:-3]])
        if kind == 0:
            pred = np.zeros(stride, dtype=np.int64)
        elif kind == 1:
            pred = left
        elif kind == 2:
            pred = prior
        elif kind == 3:
            pred = (left + prior) // 2
        else:
            p = left + prior - upleft
            pa, pb, pc = abs(p - left), abs(p - prior), abs(p - upleft)
            pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prior, upleft))
        rows.append(bytes([kind]) + ((cur - pred) % 256).astype(np.uint8).tobytes())
        prior = cur

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 5, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))
    assert np.array_equal(decode_png(png), pixels)
