"""Counting this process's open descriptors on one test's own files.

Other components' background threads (a test cluster's monitor reading /proc, its sockets, an earlier test's
finalizers) open and close descriptors of their own at any moment, so a count of all of ``/proc/self/fd`` is not a
measure of what the code under test holds: count only those whose target lies under the test's directory."""

from __future__ import annotations

import os
from pathlib import Path


def held_under(root: str | Path) -> int:
    """How many descriptors of this process are open on files under ``root``."""
    prefix = str(root).rstrip(os.sep) + os.sep
    held = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing (the listing's own descriptor, a background thread's)
            continue
        held += target.startswith(prefix)
    return held
