"""The parse cache's compressed form (bundle_mcp.zstd_frames): what goes in comes out, whole or
in pieces, and anything cut, damaged or claiming another length is refused, never shortened."""

from __future__ import annotations

import os
import struct
import threading

import pytest
import zstandard

from bundle_mcp.zstd_frames import MAX_BYTES, DamagedFrame, packed, unpacked

VALUES = [b"", b"a", b'{"words": [1, 2, 3]}' * 500, os.urandom(70_000), b"x" * 3_000_000]


@pytest.mark.parametrize("data", VALUES, ids=lambda d: f"{len(d)} bytes")
def test_bytes_come_back_whole_or_from_pieces(data: bytes) -> None:
    assert unpacked(packed(data)) == data
    pieces = [data[i:i + 4096] for i in range(0, len(data), 4096)]
    assert unpacked(packed(iter(pieces))) == data


def _damaged(form: bytes) -> list[bytes]:
    length, frame = form[:8], form[8:]
    (size,) = struct.unpack("<Q", length)
    return [
        b"",
        length[:5],  # shorter than its length
        form[:-1],  # the frame cut short
        form[:len(form) // 2],
        struct.pack("<Q", size + 1) + frame,  # more than the frame holds
        struct.pack("<Q", size - 1) + frame,  # less
        struct.pack("<Q", MAX_BYTES + 1) + frame,
        length + b"not a frame at all",
        length + zstandard.ZstdCompressor().compress(b"0" * size),  # says its own size
    ]


@pytest.mark.parametrize("data", VALUES[1:], ids=lambda d: f"{len(d)} bytes")
def test_a_cut_damaged_or_mislabelled_form_is_refused(data: bytes) -> None:
    for bad in _damaged(packed(data)):
        with pytest.raises(DamagedFrame):
            unpacked(bad)


def test_threads_packing_and_unpacking_at_once_each_get_their_own() -> None:
    """Each thread has its own contexts (a context must not serve two threads at once)."""
    failures: list[str] = []

    def work(seed: int) -> None:
        for n in range(200):
            data = bytes([seed]) * (n * 37 + seed)
            if unpacked(packed(data)) != data:
                failures.append(f"{seed}/{n}")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(1, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
