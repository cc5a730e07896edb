"""Bytes kept whole or compressed, handed out in pieces (bundle_mcp.pieces)."""

from __future__ import annotations

import random
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_mcp.pieces import PIECE, PackedBytes, Whole


def _incompressible(size: int) -> bytes:
    return random.Random(size).randbytes(size)


def _json_like(size: int) -> bytes:
    row = b'{"id":"jobs/notice-commit-06826","type":"Service","title":"Notice \\"Commit\\""},'
    return (row * (size // len(row) + 1))[:size]


@pytest.mark.parametrize("data", [
    b"", b"x", _json_like(10_000), _json_like(3 * PIECE + 17), _incompressible(2 * PIECE + 5),
    _incompressible(PIECE), "é漢🙂".encode() * 100_000,
], ids=["empty", "one", "small", "json-several-pieces", "random-several-pieces",
        "random-one-piece", "multibyte"])
def test_packed_bytes_give_back_the_bytes_in_bounded_pieces_on_every_pass(data: bytes) -> None:
    packed = PackedBytes(data)
    assert packed.size == len(data)
    for _ in range(2):  # each pass decompresses anew
        pieces = list(packed)
        assert b"".join(pieces) == data
        assert all(0 < len(piece) <= PIECE for piece in pieces)
    assert packed.joined() == data


def test_json_is_held_compressed_to_a_fraction() -> None:
    data = _json_like(4 * 1024 * 1024)
    assert PackedBytes(data).compressed_size < len(data) // 10


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=4096), st.integers(min_value=1, max_value=200))
def test_any_bytes_repeated_come_back_whole(unit: bytes, times: int) -> None:
    data = unit * times
    packed = PackedBytes(data, level=1)
    assert b"".join(packed) == data and packed.size == len(data)


def test_threads_decompressing_at_once_each_get_the_whole() -> None:
    data = _json_like(2 * 1024 * 1024) + _incompressible(300_000)
    packed = PackedBytes(data)
    results: list[bytes] = []
    lock = threading.Lock()

    def decompress() -> None:
        joined = b"".join(packed)
        with lock:
            results.append(joined)

    threads = [threading.Thread(target=decompress) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [data] * 4


def test_whole_bytes_are_one_piece_and_no_copy() -> None:
    data = _json_like(3 * PIECE)
    whole = Whole(data)
    (piece,) = list(whole)
    assert piece is data and whole.joined() is data and whole.size == len(data)
