"""How a serving process asks the C allocator to give large freed blocks back to the system.

A warm server builds large, short-lived buffers again and again: a kept answer's encodings
(14 MB for ``get_semantic_graph`` at 10,000 concepts, and the encoder's growing buffer beside
it), a refreshed snapshot's arrays. glibc serves a block of 128 KiB or more with its own
``mmap`` and unmaps it when freed, but its threshold is *dynamic*: the first such block freed
raises the threshold to that block's size (up to 32 MiB), and from then on blocks that large
come from the heap, where a freed one stays in the process as free space unless it happens to
lie at the heap's top. Each rebuild after an edit then left the process larger (measured on
the bench bundle, in process: +40 MiB after one edit's follow-up warm-up, +27 with a fixed
threshold). A fixed threshold (``mallopt(M_MMAP_THRESHOLD, …)``, which also stops the dynamic
adjustment) sends every block of a mebibyte or more to ``mmap``, so freeing it returns its
pages at once. Blocks that large are few; each costs a map and its page faults, well under a
millisecond a mebibyte.

Only where the C library is glibc (Linux); elsewhere nothing is asked and nothing changes.
"""

from __future__ import annotations

import ctypes
import sys

# glibc's <malloc.h>: the mallopt parameter for the mmap threshold.
_M_MMAP_THRESHOLD = -3
LARGE_BLOCK = 1024 * 1024


def return_large_blocks(threshold: int = LARGE_BLOCK) -> bool:
    """Have blocks of ``threshold`` bytes or more mapped on their own and unmapped when freed;
    True when the C library took the setting."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        # The symbols the interpreter is linked with, the C library's among them (no search
        # for the library's file: ctypes.util.find_library runs ldconfig).
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))
