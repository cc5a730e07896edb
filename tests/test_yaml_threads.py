"""yaml-rs is loaded by the main thread only: a library it loads in a thread that ends crashes.

yaml-rs brings its own allocator (mimalloc), which takes the thread that loads the library for
the process's main one. Loaded in a worker thread that then ended, the next block read in
another thread crashed the process (a segmentation fault inside yaml-rs; found when the suite
ran one file alone, whose first frontmatter was read by a dispatcher's worker thread). Each
case runs in a child process: a crash must fail the test, not end the suite.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("yaml_rs")

_THREADS = """
import sys, threading
from bundle_mcp.loader.yaml_load import load_frontmatter

BLOCK = "type: ingredient\\ntitle: Beans\\ndescription: Green coffee.\\n"
EXPECTED = {"type": "ingredient", "title": "Beans", "description": "Green coffee."}

def read(times):
    for _ in range(times):
        assert load_frontmatter(BLOCK, 1) == EXPECTED

def in_threads(rounds):
    for _ in range(rounds):
        threads = [threading.Thread(target=read, args=(5,)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

first = threading.Thread(target=read, args=(50,))  # a thread that reads first, then ends
first.start()
first.join()
print("loaded off the main thread:", "yaml_rs._yaml_rs" in sys.modules)
in_threads(300)
if sys.argv[1] == "prepare":
    from bundle_mcp.loader.yaml_library import prepare
    prepare()
    print("loaded by prepare:", "yaml_rs._yaml_rs" in sys.modules)
    in_threads(300)
read(10)
print("done")
"""


def _run(mode: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _THREADS, mode], capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": ":".join(sys.path)})
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    return done.stdout.splitlines()


def test_a_thread_that_reads_first_and_ends_never_loads_yaml_rs() -> None:
    assert _run("threads") == ["loaded off the main thread: False", "done"]


def test_once_the_main_thread_loads_it_threads_come_and_go_safely() -> None:
    assert _run("prepare") == ["loaded off the main thread: False", "loaded by prepare: True",
                               "done"]


def test_a_snapshot_cache_made_on_the_main_thread_loads_it_and_not_pyyaml() -> None:
    """Loaded as the cache is made; PyYAML is not (a restarted server's first call reads its
    document from the parse cache and must not wait for it)."""
    code = ("import sys; from bundle_mcp.snapshots import SnapshotCache; SnapshotCache(); "
            "print('yaml_rs._yaml_rs' in sys.modules, 'yaml' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": ":".join(sys.path)}, check=True)
    assert done.stdout.strip() == "True False"
