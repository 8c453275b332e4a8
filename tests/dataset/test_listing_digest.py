"""``files_sha256`` written with numpy is the sha256 of the JSON listing, byte for byte, or declines."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from consumer.dataset.build import files_listing, listing_sha256
from consumer.dataset.listing_digest import files_sha256
from consumer.tokens.documents import build_documents
from consumer.tokens.vocab import Vocab

_printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=20)
_any = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), min_size=1, max_size=12)


def _docs(paths: list[str], sizes: list[int], classes: int):
    codes = np.sort(np.arange(len(paths)) % classes)
    return build_documents(paths, codes, np.array(sizes, dtype=np.int64), [""] * len(paths), Vocab(1),
                           with_header=False)


@settings(max_examples=80, deadline=None)
@given(paths=st.lists(_printable, min_size=1, max_size=60),
       sizes=st.lists(st.integers(0, 2**62), min_size=60, max_size=60),
       names=st.lists(_any, min_size=3, max_size=3, unique=True))
def test_the_numpy_digest_is_the_json_listings(paths, sizes, names):
    docs = _docs(paths, sizes[:len(paths)], 3)
    want = listing_sha256(files_listing(docs, names))
    got = files_sha256(docs, names)
    if any(c in p for p in paths for c in '"\\'):
        assert got is None  # the encoder escapes those: it is asked instead
    else:
        assert got == want


@settings(max_examples=40, deadline=None)
@given(paths=st.lists(_any, min_size=1, max_size=20))
def test_paths_the_encoder_escapes_are_left_to_it(paths):
    docs = _docs(paths, [1] * len(paths), 1)
    got = files_sha256(docs, ["c"])
    escaped = any(ord(ch) > 0x7E or ord(ch) < 0x20 or ch in '"\\' for p in paths for ch in p)
    assert (got is None) == escaped
    if got is not None:
        assert got == listing_sha256(files_listing(docs, ["c"]))


def test_many_chunks_and_wide_sizes():
    n = 150_001
    paths = [f"/corpus/part{i % 7}/doc-{i:07d}.txt" for i in range(n)]
    sizes = (np.arange(n, dtype=np.int64) * 7919) ** 2 % (10**18)
    docs = _docs(paths, sizes.tolist(), 5)
    names = ["a", "b", "c", "d", "e"]
    assert files_sha256(docs, names) == listing_sha256(files_listing(docs, names))
