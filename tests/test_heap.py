"""A serving process gives large freed blocks back to the system (bundle_mcp.heap).

Measured in a child process, so the test's own interpreter keeps its allocator as it was: a
block of a few mebibytes is freed, one just as large is made and pinned below a small one at
the heap's top, and freed again. With glibc's dynamic threshold the second block comes from
the heap and stays in the process when freed; with the fixed one it is unmapped.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from bundle_mcp.heap import return_large_blocks

_CHILD = r"""
import sys
from bundle_mcp.heap import return_large_blocks

def rss_kib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

fixed = sys.argv[1] == "fixed" and return_large_blocks()
size = 24 * 1024 * 1024
first = bytearray(size)
del first                     # mapped on its own, unmapped; raises the dynamic threshold
second = bytearray(size)      # with the dynamic threshold: from the heap now
pins = [bytearray(64 * 1024) for _ in range(8)]  # above it, so the heap's top cannot shrink
before = rss_kib()
del second
after = rss_kib()
print(int(fixed), before - after)
"""


def _freed_kib(mode: str) -> tuple[bool, int]:
    done = subprocess.run([sys.executable, "-c", _CHILD, mode], capture_output=True,
                          text=True, timeout=60, check=True)
    fixed, freed = done.stdout.split()
    return fixed == "1", int(freed)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_a_freed_large_block_leaves_the_process() -> None:
    fixed, freed = _freed_kib("fixed")
    if not fixed:
        pytest.skip("the C library took no mmap threshold (not glibc)")
    assert freed >= 20 * 1024  # the 24 MiB block's pages went back
    _, kept = _freed_kib("dynamic")
    assert kept < 4 * 1024  # without it they stayed: the test can tell the two apart


def test_elsewhere_nothing_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert return_large_blocks() is False
