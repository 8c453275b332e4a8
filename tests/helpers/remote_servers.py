"""Real servers on 127.0.0.1 for the remote tests: moto's S3 API in a subprocess, and a file server
(``http.server``) with byte ranges, ETags, If-Match, a directory listing and fault injection.

Fault injection in :class:`Faults` is deterministic: the first ``n`` GETs of a path fail in the chosen
way, later ones succeed, so a test knows exactly how many retries a read needs.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["Faults", "FileServer", "moto_server", "file_server", "faulty_proxy", "free_port", "etag_of_bytes",
           "stop_process"]


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc: subprocess.Popen, timeout_s: float = 10) -> None:
    """Terminate a server subprocess, killing it if it has not exited after ``timeout_s``."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_port(port: int, proc: subprocess.Popen | None, deadline_s: float = 30.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server on port {port} did not start")


@contextmanager
def moto_server(delay_s: float = 0.0) -> Iterator[str]:
    """Run ``moto`` in server mode (a subprocess) on a free port; yields its endpoint URL; stopped after.
    With ``delay_s``, every GET waits that long first (a round trip to a distant store), inside moto."""
    for _ in range(3):
        port = free_port()
        argv = ([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)] if not delay_s else
                [sys.executable, "-m", "tests.helpers.remote_servers", "moto", str(delay_s), str(port)])
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                cwd=str(Path(__file__).resolve().parents[2]))
        try:
            _wait_port(port, proc)
        except RuntimeError:
            proc.kill()
            proc.wait()
            continue
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_process(proc)
        return
    raise RuntimeError("moto server did not start on three free ports")


@contextmanager
def s3_with_files(local: Path) -> Iterator[tuple[dict, object]]:
    """A moto S3 server holding every file under ``local`` at ``s3://data/corpus/<path below local>``; yields the
    ``storage_options`` that reach it and its fsspec file system."""
    from consumer.sources.urls import open_filesystem

    with moto_server() as endpoint:
        so = {"endpoint_url": endpoint, "key": "test", "secret": "test"}
        fs, _ = open_filesystem("s3://data", so)
        fs.mkdir("data")
        for f in sorted(local.rglob("*")):
            if f.is_file():
                fs.pipe(f"data/corpus/{f.relative_to(local)}", f.read_bytes())
        yield so, fs


def etag_of_bytes(data: bytes) -> str:
    """The ETag the file server gives a body (content-derived, so a change of content changes it)."""
    return hashlib.md5(data).hexdigest()


class Faults:
    """What the file server does wrong, per path (``"/cls/name.bin"``), for the first ``n`` GETs of it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.error: dict[str, tuple[int, int]] = {}   # path -> (status, how many times)
        self.drop: dict[str, int] = {}                # path -> times: headers, half the body, then close
        self.slow: dict[str, tuple[float, int]] = {}  # path -> (seconds, times) before answering
        self.status: dict[str, int] = {}              # path -> status for every request (403, ...)
        self.delay = 0.0                              # every GET waits this long (to make requests overlap)
        self.in_flight = 0
        self.max_in_flight = 0
        self.gets = 0
        self.gets_by_path: dict[str, int] = {}
        self.heads = 0
        self.bytes_sent = 0                           # body bytes of every GET answered
        self.largest = 0                              # the longest GET body

    def sent(self, n: int) -> None:
        """Count a GET body of ``n`` bytes."""
        with self.lock:
            self.bytes_sent += n
            self.largest = max(self.largest, n)

    def take(self, table: dict, path: str):
        """Use one of the remaining faults of ``path`` in ``table``; returns its value or None."""
        with self.lock:
            entry = table.get(path)
            if entry is None:
                return None
            if isinstance(entry, tuple):
                value, times = entry
                if times <= 0:
                    return None
                table[path] = (value, times - 1)
                return value
            if entry <= 0:
                return None
            table[path] = entry - 1
            return True


class _Handler(SimpleHTTPRequestHandler):
    faults: Faults
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def do_HEAD(self) -> None:
        with self.faults.lock:
            self.faults.heads += 1
        self._serve(head=True)

    def do_GET(self) -> None:
        f = self.faults
        with f.lock:
            f.in_flight += 1
            f.max_in_flight = max(f.max_in_flight, f.in_flight)
            f.gets += 1
            f.gets_by_path[self.path] = f.gets_by_path.get(self.path, 0) + 1
        try:  # counted as in flight until the answer starts: a client slot is free only after that
            if f.delay:
                time.sleep(f.delay)
        finally:
            with f.lock:
                f.in_flight -= 1
        self._serve(head=False)

    def _serve(self, head: bool) -> None:
        f = self.faults
        path = self.translate_path(self.path)
        if os.path.isdir(path):
            if not head:
                listing = self.list_directory(path)
                if listing is not None:
                    f.sent(len(listing.getvalue()))
                    self.copyfile(listing, self.wfile)
                    listing.close()
            return
        forced = f.status.get(self.path)
        if forced:
            return self._empty(forced)
        if not head:
            status = f.take(f.error, self.path)
            if status:
                return self._empty(status)
            slow = f.take(f.slow, self.path)
            if slow:
                time.sleep(slow)
        if not os.path.isfile(path):
            return self._empty(404)
        with open(path, "rb") as fh:
            data = fh.read()
        etag = '"' + etag_of_bytes(data) + '"'
        match = self.headers.get("If-Match")
        if match and match.strip() not in ("*", etag):
            return self._empty(412)
        start, end, status = 0, len(data), 200
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            start = int(a)
            end = min(len(data), int(b) + 1) if b else len(data)
            if start >= len(data):
                return self._empty(416, {"Content-Range": f"bytes */{len(data)}"})
            status = 206
        body = data[start:end]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", formatdate(os.path.getmtime(path), usegmt=True))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        if not head and f.take(f.drop, self.path):
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.end_headers()
        if not head:
            self.wfile.write(body)
            f.sent(len(body))

    def _empty(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", "0")
        self.end_headers()


class _QuietServer(ThreadingHTTPServer):
    # the stock backlog of 5 drops the SYNs of a client opening 64 connections at once: each waits 1-3 s
    request_queue_size = 512

    def get_request(self):
        """Accept with Nagle's algorithm off: a handler writes the headers and the body separately, and the
        client's delayed ACK would hold the body back 40 ms."""
        conn, addr = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr

    def handle_error(self, request, client_address) -> None:
        # expected: a client that gave up (timeout), or moto already stopped when a slow answer is forwarded
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FileServer:
    """A threading HTTP server for ``root`` on 127.0.0.1 with :class:`Faults`; ``url`` ends in ``/``."""

    def __init__(self, root: str | Path) -> None:
        self.faults = Faults()
        handler = type("Handler", (_Handler,), {"faults": self.faults})
        self.root = Path(root)
        root = str(root)

        def make(*args, **kwargs):
            return handler(*args, directory=root, **kwargs)

        self.httpd = _QuietServer(("127.0.0.1", 0), make)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


@contextmanager
def file_server(root: str | Path) -> Iterator[FileServer]:
    """Serve ``root`` over HTTP on 127.0.0.1 (see :class:`FileServer`); stopped after."""
    with FileServer(root) as server:
        yield server


class _ProxyHandler(BaseHTTPRequestHandler):
    """Forwards every request to ``upstream`` (moto) unchanged, except for the faults of its :class:`Faults`."""

    faults: Faults
    upstream: tuple[str, int]
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _forward(self) -> None:
        f = self.faults
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        key = self.path.split("?", 1)[0]
        if f.delay:  # a round trip to a distant server
            time.sleep(f.delay)
        if self.command == "GET":
            with f.lock:
                f.gets += 1
                f.gets_by_path[key] = f.gets_by_path.get(key, 0) + 1
            status = f.take(f.error, key)
            if status:
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            slow = f.take(f.slow, key)
            if slow:
                time.sleep(slow)
        conn = http.client.HTTPConnection(*self.upstream, timeout=30)
        try:
            conn.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
            resp = conn.getresponse()
            data = resp.read()
            headers = resp.getheaders()
            status = resp.status
        finally:
            conn.close()
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in ("content-length", "connection", "transfer-encoding", "server", "date"):
                self.send_header(k, v)
        upstream_length = next((v for k, v in headers if k.lower() == "content-length"), None)
        # a HEAD answer has no body: its Content-Length is the object's, as upstream said
        self.send_header("Content-Length", upstream_length if self.command == "HEAD" and upstream_length else
                         str(len(data)))
        if self.command == "GET" and f.take(f.drop, key):
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.end_headers()
        if self.command == "HEAD":
            with f.lock:
                f.heads += 1
        else:
            self.wfile.write(data)
            if self.command == "GET":
                f.sent(len(data))

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward


@contextmanager
def faulty_proxy(upstream_url: str) -> Iterator[tuple[str, Faults]]:
    """An HTTP proxy on 127.0.0.1 in front of ``upstream_url`` (e.g. moto) injecting :class:`Faults` into GETs;
    yields ``(endpoint URL, faults)``; faults are keyed by request path (``/bucket/key``)."""
    host, port = upstream_url.split("://", 1)[1].rsplit(":", 1)
    faults = Faults()
    handler = type("Proxy", (_ProxyHandler,), {"faults": faults, "upstream": (host, int(port))})
    httpd = _QuietServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", faults
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@contextmanager
def file_server_process(root: str | Path, delay_s: float = 0.0, proxy: bool = False) -> Iterator[str]:
    """:class:`FileServer` for ``root`` in a subprocess (its own interpreter, so it does not share the GIL with
    the client), every GET delayed by ``delay_s``; yields its URL; stopped after. With ``proxy``, ``root`` is
    the URL of a server (moto) and the subprocess is a :func:`faulty_proxy` in front of it delaying every
    request by ``delay_s``."""
    argv = [sys.executable, "-m", "tests.helpers.remote_servers", str(root), str(delay_s)]
    argv += ["proxy"] if proxy else []
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=str(Path(__file__).resolve().parents[2]))
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"file server did not start: {url!r}")
        yield url
    finally:
        stop_process(proc)


def _serve_moto(delay_s: float, port: int) -> None:
    """moto's server (as ``python -m moto.server`` runs it) with every GET delayed by ``delay_s``."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    app = DomainDispatcherApplication(create_backend_app)

    def delayed(environ, start_response):
        if environ.get("REQUEST_METHOD") == "GET":
            time.sleep(delay_s)
        return app(environ, start_response)

    run_simple("127.0.0.1", port, delayed, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":  # python -m tests.helpers.remote_servers ROOT|UPSTREAM|moto DELAY_S [proxy|PORT]: serve
    if sys.argv[1] == "moto":
        _serve_moto(float(sys.argv[2]), int(sys.argv[3]))
        sys.exit(0)
    if sys.argv[3:] == ["proxy"]:
        with faulty_proxy(sys.argv[1]) as (_url, _faults):
            _faults.delay = float(sys.argv[2])
            print(_url, flush=True)
            threading.Event().wait()
    with FileServer(sys.argv[1]) as _server:
        _server.faults.delay = float(sys.argv[2])
        print(_server.url, flush=True)
        _server.thread.join()
