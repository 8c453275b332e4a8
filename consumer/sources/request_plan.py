"""Requests for a batch of byte ranges: close ranges of one object are coalesced into one request, long ones
split, so a batch costs as few requests as its bytes allow (a request to object storage costs a round trip
and, on S3, milliseconds of client CPU; a few KiB more in one answer cost microseconds).

:func:`plan_requests` is pure: the reader sends the requests and copies each one's *parts* into place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["DEFAULT_COALESCE_BYTES", "plan_requests"]

DEFAULT_COALESCE_BYTES = 64 << 10

# one request: (index of a range it serves, start, length, parts); a part is (offset in the body, length,
# offset in the output) and the index stands for the URL, expected ETag and size of every range it serves
Request = tuple[int, int, int, list[tuple[int, int, int]]]


def plan_requests(urls: Sequence[str], etags: Sequence[str | None], starts: np.ndarray, lengths: np.ndarray,
                  offsets: np.ndarray, live: np.ndarray, max_request: int, gap: int | None) -> list[Request]:
    """The requests serving ranges ``live`` (indices into the other arguments; each range ``starts[i] ..
    starts[i] + lengths[i]`` of ``urls[i]`` goes to ``out[offsets[i]:]``).

    Ranges of the same object and expected ETag whose gap is at most ``gap`` bytes (overlapping and adjacent
    ones included) become one request while it stays within ``max_request`` bytes; a range longer than
    ``max_request`` is split into requests of ``max_request`` bytes. ``gap=None`` coalesces nothing.
    """
    order = sorted((int(i) for i in live), key=lambda i: (urls[i], etags[i] or "", int(starts[i])))
    out: list[Request] = []
    cur: list[Any] | None = None  # [index, start, end, parts]
    for i in order:
        s, n, o = int(starts[i]), int(lengths[i]), int(offsets[i])
        if n > max_request or gap is None:
            if cur is not None:
                out.append((cur[0], cur[1], cur[2] - cur[1], cur[3]))
                cur = None
            out.extend((i, s + d, min(max_request, n - d), [(0, min(max_request, n - d), o + d)])
                       for d in range(0, n, max_request))
            continue
        if (cur is not None and urls[cur[0]] == urls[i] and etags[cur[0]] == etags[i] and s <= cur[2] + gap
                and max(cur[2], s + n) - cur[1] <= max_request):
            cur[2] = max(cur[2], s + n)
            cur[3].append((s - cur[1], n, o))
            continue
        if cur is not None:
            out.append((cur[0], cur[1], cur[2] - cur[1], cur[3]))
        cur = [i, s, s + n, [(0, n, o)]]
    if cur is not None:
        out.append((cur[0], cur[1], cur[2] - cur[1], cur[3]))
    return out
