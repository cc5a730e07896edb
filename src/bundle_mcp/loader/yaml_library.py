"""Where yaml-rs's compiled library may be loaded: on the main thread only.

yaml-rs brings its own allocator (mimalloc), which takes the thread that loads the library for
the process's main one. Loaded by a thread that then ended (a dispatcher's worker, whose call
read the first frontmatter), the next block read in another thread crashed the process with a
segmentation fault (``tests/test_yaml_threads.py``; docs/decisions/loading.md). So the library is
loaded by the main thread, and a block read in another thread before that goes to the strict
loader. A module of its own, apart from both loaders: a snapshot cache loads the library as it
is made, and a restarted server's first call must not import PyYAML for it.
"""

from __future__ import annotations

import importlib
import sys
import threading

__all__ = ["may_load", "prepare"]

LIBRARY = "yaml_rs._yaml_rs"


def may_load() -> bool:
    """Whether this thread may use yaml-rs: the library is loaded, or this is the main thread."""
    return LIBRARY in sys.modules or threading.current_thread() is threading.main_thread()


def prepare() -> None:
    """Load the library now if this is the main thread; elsewhere, or without yaml-rs (it is
    optional at run time), nothing happens."""
    if LIBRARY in sys.modules or threading.current_thread() is not threading.main_thread():
        return
    try:
        importlib.import_module("yaml_rs")
    except ImportError:
        pass
