"""Shared fixtures: small real corpora written into ``tmp_path``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from consumer import Consumer

# sizes chosen to hit every tail length for n_bytes 1..3, empty files and one long file
SIZES = {
    "cat": [0, 1, 2, 3, 4, 5, 7, 100, 301],
    "dog": [6, 8, 9, 31, 64, 1000],
    "eel": [2500, 11],
}


def write_corpus(root: Path, sizes: dict[str, list[int]] = SIZES, seed: int = 0) -> dict[str, list[str]]:
    """Write class folders of files with random bytes (some text-like) and return the F3 dict."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[str]] = {}
    for cls, lengths in sizes.items():
        (root / cls).mkdir(parents=True, exist_ok=True)
        out[cls] = []
        for i, n in enumerate(lengths):
            p = root / cls / f"{cls}_{i:03d}.dat"
            if i % 2:
                data = bytes(rng.integers(32, 127, size=n, dtype=np.uint8))  # text-like
            else:
                data = bytes(rng.integers(0, 256, size=n, dtype=np.uint8))
            p.write_bytes(data)
            out[cls].append(str(p))
    return out


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory):
    """The default cache directory of the whole session is a temporary one: nothing goes to the home."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CONSUMER_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture
def corpus(tmp_path: Path) -> dict[str, list[str]]:
    """F3 dict of a three-class corpus in ``tmp_path/data``."""
    return write_corpus(tmp_path / "data")


@pytest.fixture
def corpus_dir(tmp_path: Path, corpus) -> str:
    """The directory holding :func:`corpus` (sub-folders are classes)."""
    return str(tmp_path / "data")


def documents_from_samples(ds: Consumer) -> list[np.ndarray]:
    """Rebuild every document's token stream from all samples (concat or diff windows): one list per class
    stream, split at EOF. Checks along the way that PAD only ever follows the real tokens of a row."""
    out = ds.fetch_numpy(np.arange(len(ds)), ["input_array", "length"])
    rows, lengths = out["input_array"], out["length"]
    assert (rows[np.arange(rows.shape[1])[None, :] >= lengths[:, None]] == ds.vocab.pad).all()
    stream = np.concatenate([r[:n] for r, n in zip(rows, lengths)])
    cut = np.flatnonzero(stream == ds.vocab.eof)
    return np.split(stream, cut + 1)[:-1]


def content_of(document: np.ndarray, ds: Consumer) -> np.ndarray:
    """The content tokens of one document (between SEP, if any, and the final EOF)."""
    assert document[-1] == ds.vocab.eof
    body = document[:-1]
    if ds.documents.with_header:
        sep = np.flatnonzero(body == ds.vocab.sep)
        assert sep.size == 1
        body = body[sep[0] + 1:]
    return body


def file_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


os.environ.setdefault("HYPOTHESIS_PROFILE", "ci")


def write(path, data: bytes) -> str:
    """Write ``data`` to ``path``; its path as a str."""
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def identity(paths) -> tuple[np.ndarray, np.ndarray]:
    """Sizes and change stamps (``max(mtime, ctime)``, ns) of ``paths``, as the catalog's rows are keyed."""
    st = [os.stat(p) for p in paths]
    return (np.array([s.st_size for s in st], dtype=np.int64),
            np.array([max(s.st_mtime_ns, s.st_ctime_ns) for s in st], dtype=np.int64))


def interrupted_child(code: str, *args: str) -> str:
    """Run ``python -c code args...`` from the repository root, wait for it to print ``running``, send it SIGINT
    and return what it printed after; it must exit with status 0 (it catches the KeyboardInterrupt itself)."""
    root = str(Path(__file__).resolve().parents[1])
    proc = subprocess.Popen([sys.executable, "-c", code, root, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=root)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "running"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    return out


def without_chunk_sums(prefix: Path) -> None:
    """Make the packed store at ``prefix`` a store as packed before per-chunk sums: no sidecar field, no sums
    file."""
    side_path = Path(f"{prefix}.consumer.json")
    side = json.loads(side_path.read_text())
    del side["chunksums"]
    side_path.write_text(json.dumps(side))
    Path(f"{prefix}.consumer.sums").unlink()


@pytest.fixture
def magic_calls():
    """The paths of every real libmagic call (python-magic's ``Magic.from_file`` and ``from_descriptor``, which
    still run), in order (:func:`tests.helpers.magic_counter.wrap_libmagic`)."""
    from .helpers.magic_counter import wrap_libmagic

    calls: list[str] = []
    undo = wrap_libmagic(calls.append)
    yield calls
    undo()
