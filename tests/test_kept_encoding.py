"""A kept answer is encoded a part at a time and deflated as it goes (dispatch._packed_encoding),
never whole, and means the same bytes as the whole encoding would."""

from __future__ import annotations

import dataclasses
import threading
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import to_json as pydantic_json

from bundle_mcp import dispatch
from bundle_mcp.dispatch import JsonStringPieces, Outcome, _packed_encoding, to_json
from bundle_mcp.pieces import PackedBytes
from conftest import FakeTools

SCALARS = (st.none() | st.booleans() | st.integers() | st.text(max_size=12)
           | st.sampled_from([0.5, 2.0, -3.25, 1e16]))
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=4),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=6), JSON | st.lists(JSON, max_size=6), max_size=6))
def test_the_parts_make_the_whole_encoding(result: dict[str, Any]) -> None:
    made = _packed_encoding(result)
    assert made is not None  # no float here is spelled apart, nothing is refused
    encoding, quoted = made
    whole = pydantic_json(result)
    assert encoding.joined() == whole == to_json(result).encode("utf-8")
    assert encoding.size == len(whole)
    assert b"".join(quoted) == pydantic_json(to_json(result)) and quoted.size == len(
        pydantic_json(to_json(result)))


@pytest.mark.parametrize("result", [
    {"nodes": [{"weight": 1e-07}]},  # to_json writes 1e-07, the SDK's encoder 1e-7
    {"when": [1, 2, 1e-05]},
])
def test_a_result_the_encoders_write_apart_is_left_to_the_whole(result: dict[str, Any]) -> None:
    assert _packed_encoding(result) is None


def test_a_key_that_is_not_a_string_is_left_to_the_whole() -> None:
    assert _packed_encoding({1: "a"}) is None  # type: ignore[dict-item]


def test_text_that_cannot_be_utf8_fails_as_the_whole_did() -> None:
    with pytest.raises(UnicodeEncodeError):
        _packed_encoding({"items": ["fine", "lone \ud800 surrogate"]})
    for odd in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="JSON compliant"):
            _packed_encoding({"items": [odd]})


def test_the_whole_encoding_is_never_held() -> None:
    """Issue 29: made whole, a kept answer's text, its encoding and the encoder's growing
    buffer were the highest point of an edit's warm-up. Made in parts, what is traced at the
    highest point is a small share of the encoding."""
    result = {"@context": {"x": "y"},
              "@graph": [{"id": f"tables/item-{n:05d}", "title": f"Item {n}", "tags": ["a", "b"],
                          "links": [f"tables/item-{m:05d}" for m in range(n, n + 5)]}
                         for n in range(20_000)]}
    size = len(pydantic_json(result))
    assert size > 3_000_000
    # The allocator is traced in every thread: an earlier test's background writes (a kept
    # part, a stored answer) are waited for first.
    for thread in threading.enumerate():
        if thread.name.startswith(("bundle-mcp-kept-part", "bundle-mcp-warm-up")):
            thread.join(30)
    tracemalloc.start()
    try:
        made = _packed_encoding(result)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert made is not None and made[0].joined() == pydantic_json(result)
    assert peak < size // 4


def _kept_echo(fake_tools: FakeTools, **attrs: Any) -> None:
    spec = fake_tools.modules["echo"]
    fake_tools.modules["echo"] = dataclasses.replace(spec, cache_results=True, **attrs)


def test_a_kept_answer_is_the_answer_it_keeps(fake_tools: FakeTools, simple_bundle: str) -> None:
    plain = fake_tools.dispatcher(bundles=(simple_bundle,)).call("echo", {"word": "é\"\\"})
    _kept_echo(fake_tools)
    dispatcher = fake_tools.dispatcher(bundles=(simple_bundle,))
    kept = dispatcher.call("echo", {"word": "é\"\\"})
    assert dispatcher.call("echo", {"word": "é\"\\"}) is kept
    assert kept == plain and kept.text == plain.text
    assert kept.wire is not None and isinstance(kept.wire.structured, PackedBytes)
    assert isinstance(kept.wire.text, JsonStringPieces)
    assert b"".join(kept.wire.text) == pydantic_json(plain.text)


def test_a_kept_answer_over_its_budget_is_refused_as_any_answer(
    fake_tools: FakeTools, simple_bundle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _kept_echo(fake_tools, output_budget=256)
    dispatcher = fake_tools.dispatcher(bundles=(simple_bundle,))
    assert not dispatcher.call("echo", {"size": 10}).is_error
    over = dispatcher.call("echo", {"size": 300})
    assert over.is_error and over.structured["code"] == "resource_limit"
    assert over.structured["message"] == "the structured result is larger than its 256-byte budget"
    _kept_echo(fake_tools, output_budget=100_000)
    monkeypatch.setattr(dispatch, "TEXT_BUDGET", 200)
    text = fake_tools.dispatcher(bundles=(simple_bundle,)).call("echo", {"size": 190})
    assert text.structured["message"] == "the text block is larger than its 200-byte budget"


@pytest.mark.parametrize("text_block", ["the result's JSON", "a text of its own"])
def test_a_kept_answer_over_its_budget_is_kept_as_that_refusal(
    fake_tools: FakeTools, simple_bundle: str, text_block: str
) -> None:
    """Issue 29: the same snapshot and arguments are refused again without running the tool
    (at 50,000 concepts get_semantic_graph made and encoded its whole answer at every call to
    find it over its budget), and every call gets the same error envelope."""
    runs: list[dict[str, Any]] = []
    spec = fake_tools.modules["echo"]

    def counted(call: Any, params: dict[str, Any]) -> dict[str, Any]:
        runs.append(params)
        return spec.run(call, params)

    _kept_echo(fake_tools, output_budget=256, run=counted,
               **({} if text_block == "the result's JSON" else {"text": lambda r, s: "x"}))
    dispatcher = fake_tools.dispatcher(bundles=(simple_bundle,))
    first = dispatcher.call("echo", {"size": 300})
    again = dispatcher.call("echo", {"size": 300})
    assert first.is_error and first.structured["code"] == "resource_limit"
    assert again.structured == first.structured and again.text == first.text
    assert len(runs) == 1
    assert not dispatcher.call("echo", {"size": 10}).is_error and len(runs) == 2


def test_a_kept_answer_breaking_its_contract_is_an_internal_error(
    fake_tools: FakeTools, simple_bundle: str
) -> None:
    spec = fake_tools.modules["bad"]
    fake_tools.modules["bad"] = dataclasses.replace(spec, cache_results=True)
    outcome = fake_tools.dispatcher(bundles=(simple_bundle,)).call("bad", {})
    assert isinstance(outcome, Outcome) and outcome.structured["code"] == "internal_error"
