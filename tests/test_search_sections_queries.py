"""search_sections: the input contract and the tool agree on which queries are valid.

A query the schema accepts must never be refused by the tool (it used to answer ``">"`` with
``invalid_request``); a query without words matches nothing instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.errors import BundleError
from bundle_mcp.loader import load_bundle
from bundle_mcp.okf.folding import fold
from bundle_mcp.tools import _section_index, search_sections
from toolcall import run_tool

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = str(REPO / "examples" / "coffee-roastery")
SCHEMA: dict[str, Any] = json.loads(
    (REPO / "contracts" / "search_sections.input.schema.json").read_text(encoding="utf-8")
)
QUERIES = [">", "¶", "a", "é", "日本", "--", "  x ", "   ", "\u0301"]


def schema_verdicts(query: str) -> tuple[bool, bool]:
    """(jsonschema, jsonschema-rs): the two validators the project runs."""
    arguments = {"query": query}
    reference = jsonschema.Draft202012Validator(SCHEMA).is_valid(arguments)
    fast = jsonschema_rs.validator_for(SCHEMA).is_valid(arguments)
    return reference, fast


def tool_verdict(query: str) -> bool:
    """Whether the tool itself accepts the query (no contract check in front of it)."""
    snapshot, _ = load_bundle(EXAMPLE)
    try:
        run_tool(search_sections, snapshot, {"query": query}, CancelToken())
    except BundleError:
        return False
    return True


def server_verdict(query: str) -> bool:
    """Whether a call succeeds through the real dispatch path (contract check, then tool)."""
    outcome = Dispatcher(ServeConfig(bundles=(EXAMPLE,))).call(
        "search_sections", {"query": query}
    )
    return not outcome.is_error


@pytest.mark.parametrize("query", QUERIES)
def test_schema_and_code_agree(query: str) -> None:
    reference, fast = schema_verdicts(query)
    assert reference == fast, query
    assert server_verdict(query) == reference, query
    if reference:
        assert tool_verdict(query), f"{query!r} passes the contract but the tool refuses it"


@pytest.mark.parametrize("query", [">", "¶", "--"])
def test_a_query_without_words_matches_nothing(query: str) -> None:
    outcome = Dispatcher(ServeConfig(bundles=(EXAMPLE,))).call(
        "search_sections", {"query": query}
    )
    assert not outcome.is_error, outcome.structured
    assert outcome.structured["terms"] == []
    assert outcome.structured["total"] == 0
    assert outcome.structured["hits"] == []
    assert outcome.structured["truncated"] is False


def test_blank_query_is_still_refused_by_the_contract() -> None:
    outcome = Dispatcher(ServeConfig(bundles=(EXAMPLE,))).call("search_sections", {"query": "  "})
    assert outcome.is_error
    assert outcome.structured["code"] == "invalid_request"


# The ASCII fast path of the tokenizer must find exactly the words of the full Unicode class.
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F)) | st.text())
def test_ascii_word_fast_path_agrees_with_the_unicode_class(text: str) -> None:
    folded = fold(text)
    assert _section_index.tokens(text) == _section_index.word_pattern().findall(folded)


# A snippet of ASCII text finds its words with a small class, never building the full one; both
# must start the window at the same word.
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F)),
       st.sets(st.sampled_from(["a", "b1", "pipe", "x", "zz", "9"]), min_size=1))
def test_snippet_ascii_words_agree_with_the_unicode_class(raw: str, wanted: set[str]) -> None:
    full = [m.span() for m in _section_index.word_pattern().finditer(raw)]
    assert [m.span() for m in _section_index._ASCII_WORD_ANY_CASE.finditer(raw)] == full
    assert _section_index.snippet(raw, wanted) == raw[_first_hit(raw, wanted):][:512]


def _first_hit(raw: str, wanted: set[str]) -> int:
    for match in _section_index.word_pattern().finditer(raw):
        if any(word in wanted for word in _section_index.tokens(match.group())):
            return max(0, match.start() - 80)
    return 0


# Sections of an ASCII body are counted in the folded body by offsets; other documents keep
# each section's words. Both must give the same answer, byte for byte.
_WORDS = st.sampled_from(["alpha", "Beta", "gamma", "pipe", "pipeline", "x1", "Straße", "ǅemal",
                          "café", "K", "a_b", "α"])
_LINE = st.lists(_WORDS, min_size=0, max_size=6).map(" ".join)
_SECTION = st.tuples(st.sampled_from(["# ", "## ", "### "]), _LINE,
                     st.lists(_LINE, min_size=0, max_size=4))


# The patch is undone inside each example, so the function-scoped fixture is safe to share.
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.lists(_SECTION, min_size=0, max_size=4), min_size=1, max_size=4),
    st.sampled_from(["\n", "\r\n"]),
    st.lists(_WORDS, min_size=1, max_size=3).map(" ".join),
)
def test_offset_counts_agree_with_kept_words(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    docs: list[list[tuple[str, str, list[str]]]],
    newline: str,
    query: str,
) -> None:
    root = tmp_path_factory.mktemp("agree")
    for n, sections in enumerate(docs):
        lines = ["---", "type: note", f"title: Doc {n} alpha", "---", "intro pipe alpha"]
        for mark, heading, body in sections:
            lines += [f"{mark}{heading}".rstrip(), *body, ""]
        (root / f"d{n}.md").write_bytes(newline.join(lines).encode("utf-8"))
    with monkeypatch.context() as patched:
        patched.setattr(_section_index, "counts_in_folded_body", lambda doc: False)
        kept = run_tool(search_sections, load_bundle(str(root))[0], {"query": query})
    by_offset = run_tool(search_sections, load_bundle(str(root))[0], {"query": query})
    assert by_offset == kept
