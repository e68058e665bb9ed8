"""Keep freed heap memory in the process while a long tensor loop runs (glibc only).

glibc serves every allocation above its mmap threshold (at most 32 MiB) with a fresh ``mmap`` and
returns it to the system on ``free``, so a training loop that allocates the same large activation
and gradient buffers every epoch page-faults them in again every epoch (CS, 10 clients × 5 seeds:
about 51,000 minor faults per epoch). :func:`retained_heap` serves large blocks from the heap and
stops trimming it for the duration of the block, then restores glibc's defaults: the loop reuses
its memory and the numbers are bitwise the same. Elsewhere (macOS, musl, Windows) it does nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_DEFAULT_TRIM, _DEFAULT_MMAP_MAX = 128 * 1024, 65536
_lock = threading.Lock()
_depth = 0


def _libc():
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc" or os.environ.get("PACE_NB_MALLOC") == "default":
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:  # pragma: no cover
        return None


@contextmanager
def retained_heap() -> Iterator[bool]:
    """Within the block, large allocations come from the heap and freed memory stays in the process;
    yields whether the setting applies here (glibc; ``PACE_NB_MALLOC=default`` turns it off). Nested
    blocks are fine: the defaults come back when the outermost one ends."""
    global _depth
    libc = _libc()
    if libc is None:
        yield False
        return
    with _lock:
        if _depth == 0:
            libc.mallopt(_M_MMAP_MAX, 0)
            libc.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(2**31 - 1))
        _depth += 1
    try:
        yield True
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                libc.mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
                libc.mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM)
