"""The transport-free halves of the MCP surfaces: okf:// URIs, bundle names, cursors, completion
ranking and prompt arguments (resources.py, completion.py, prompts.py)."""

from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING

import pytest
from mcp.shared.uri_template import UriTemplate

from bundle_mcp import completion, prompts, resources
from bundle_mcp.cancel import CancelToken
from bundle_mcp.loader import load_bundle
from bundle_mcp.model import Snapshot

if TYPE_CHECKING:
    from conftest import BundleFactory

TRICKY_IDS = [
    "beans",
    "tables/orders",
    "a b/c d",
    "hash#name",
    "100%/done",
    "q?x&y=z",
    "café/crème",
    "日本/語",
    "plus+comma,semi;",
    "tilde~dot.under_score-dash",
    "emoji 😀",
]


@pytest.mark.parametrize("concept_id", TRICKY_IDS)
def test_a_concept_uri_round_trips_to_exactly_its_id(concept_id: str) -> None:
    """Contract: one URI per ID, and parsing it gives that ID back."""
    uri = resources.concept_uri("shop", concept_id)
    assert uri.isascii() and uri.count("/") == 3  # okf:// + one path segment
    target = resources.parse_uri(uri)
    assert (target.label, target.concept_id) == ("shop", concept_id)
    assert target.path == concept_id + ".md"


@pytest.mark.parametrize("concept_id", TRICKY_IDS)
def test_the_template_expands_to_the_listed_uri(concept_id: str) -> None:
    """A client expanding the advertised template itself (RFC 6570) reaches the same URI."""
    template = UriTemplate.parse(resources.template_uri("shop"))
    assert template.expand({"concept_id": concept_id}) == resources.concept_uri("shop", concept_id)


def test_reserved_files_have_uris_no_concept_can_have() -> None:
    """index.md/log.md are named by their path, which ends in .md; an ID never does."""
    uri = resources.file_uri("shop", "tables/index.md")
    assert uri == "okf://shop/tables%2Findex.md"
    target = resources.parse_uri(uri)
    assert (target.concept_id, target.path) == (None, "tables/index.md")
    assert resources.parse_uri("okf://shop/log.md").path == "log.md"


def test_scheme_and_bundle_name_are_case_insensitive_the_id_is_not() -> None:
    """RFC 3986: scheme and host compare caselessly; the path exactly."""
    assert resources.parse_uri("OKF://Shop/Beans").label == "shop"
    assert resources.parse_uri("OKF://Shop/Beans").concept_id == "Beans"


@pytest.mark.parametrize(
    "uri",
    [
        "file:///etc/passwd",
        "https://shop/beans",
        "okf://shop",
        "okf://shop/",
        "okf://shop/tables/orders",  # a raw '/': the ID is one segment
        "okf://shop/..%2Fsecret",  # a dot-segment escape, encoded
        "okf://shop/a%2F..%2F..%2Fetc%2Fpasswd",
        "okf://shop/%2E%2E%2Fsecret",  # '.' needs no escape: not canonical
        "okf://shop/..",
        "okf://shop/%2Fetc%2Fpasswd",  # an absolute path
        "okf://shop/beans#frag",
        "okf://shop/beans?x=1",
        "okf://shop/%zz",
        "okf://shop/caf%c3%a9",  # lower-case hex: not canonical
        "okf://shop/%FF",  # not UTF-8
        "okf://shop/a b",  # an unescaped space
        "okf://shop/secret.md",  # only index.md and log.md are files
        "okf://shop/..%2Findex.md",
        "okf://shop/index",  # a reserved stem is not a concept
        "okf://shop/a%5Cb",  # a backslash
        "okf://shop/a%3Ab",  # a colon
        "okf://shop/%00",
    ],
)
def test_uris_that_name_no_concept_are_refused(uri: str) -> None:
    with pytest.raises(resources.UriError):
        resources.parse_uri(uri)


def test_bundle_names_come_from_folder_names_and_shared_ones_get_a_path_digest() -> None:
    """Stable whatever the order of the command line; no path in the name."""
    first = resources.serve_bundles(["/srv/Coffee Roastery", "/a/docs", "/b/docs", "/c/Ünïcode"])
    again = resources.serve_bundles(["/b/docs", "/c/Ünïcode", "/a/docs", "/srv/Coffee Roastery"])
    assert first == again
    labels = {b.path: b.label for b in first}
    assert labels["/srv/Coffee Roastery"] == "coffee-roastery"
    assert labels["/c/Ünïcode"] == "unicode"
    digest = hashlib.sha256(b"/a/docs").hexdigest()[:8]
    assert labels["/a/docs"] == f"docs-{digest}"
    assert labels["/b/docs"].startswith("docs-") and labels["/b/docs"] != labels["/a/docs"]
    assert [b.label for b in first] == sorted(labels.values())
    assert resources.serve_bundles(["/日本"])[0].label == "bundle"


def _snapshot(tmp_bundle: BundleFactory, files: dict[str, str]) -> Snapshot:
    return load_bundle(tmp_bundle(files), CancelToken())[0]


def test_cursors_page_through_a_listing_and_refuse_forgery_and_staleness(
    tmp_bundle: BundleFactory,
) -> None:
    files = {f"c{i}.md": f"---\ntype: t\n---\n# {i}\n" for i in range(7)}
    snapshot = _snapshot(tmp_bundle, files)
    served = resources.ServedBundle("shop", "/x")
    catalog = resources.Catalog((served,), page_size=3, cursor_key=b"k" * 32)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = catalog.page([(served, snapshot)], cursor)
        seen += [e.name for e in page.entries]
        pages += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [f"c{i}" for i in range(7)] and pages == 3
    first = catalog.page([(served, snapshot)], None).next_cursor
    assert first is not None and first == catalog.page([(served, snapshot)], None).next_cursor
    # Another server's key, an altered byte, garbage: forged.
    other = resources.Catalog((served,), page_size=3, cursor_key=b"j" * 32)
    raw = bytearray(base64.urlsafe_b64decode(first + "=" * (-len(first) % 4)))
    raw[-3] ^= 1
    altered = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
    for bad, cat in ((first, other), (altered, catalog), ("not a cursor!", catalog), ("", catalog)):
        with pytest.raises(resources.CursorError, match="not issued"):
            cat.page([(served, snapshot)], bad)
    # The bundle changed: the cursor is stale.
    changed = _snapshot(tmp_bundle, {**files, "c9.md": "---\ntype: t\n---\n"})
    with pytest.raises(resources.CursorError, match="changed"):
        catalog.page([(served, changed)], first)


def test_changes_name_edited_and_removed_uris_and_flag_a_changed_set() -> None:
    old = {"okf://s/a": "1", "okf://s/b": "2", "okf://s/c": "3"}
    assert resources.changes_between(old, dict(old)) == resources.Changes(frozenset(), False)
    edited = resources.changes_between(old, {**old, "okf://s/b": "9"})
    assert edited == resources.Changes(frozenset({"okf://s/b"}), False)
    grown = resources.changes_between(old, {**old, "okf://s/d": "4"})
    assert grown == resources.Changes(frozenset(), True)
    shrunk = resources.changes_between(old, {"okf://s/a": "1", "okf://s/b": "2"})
    assert shrunk == resources.Changes(frozenset({"okf://s/c"}), True)


def test_completion_ranks_prefix_then_substring_caselessly_with_id_ties() -> None:
    ids = ["roast", "Roast-log", "beans/roast", "pre-roast", "ROASTER", "beans", "cupping"]
    result = completion.complete(completion.folded_candidates(ids), "RoA")
    assert result.values == ("roast", "Roast-log", "ROASTER", "beans/roast", "pre-roast")
    assert (result.total, result.has_more) == (5, False)
    assert completion.complete(completion.folded_candidates(ids), "").values == tuple(
        sorted(ids, key=lambda v: (v.lower(), v))
    )
    assert completion.complete(completion.folded_candidates(ids), "zzz").values == ()


def test_completion_is_capped_at_100_values_with_total_and_has_more() -> None:
    ids = [f"doc-{i:03d}" for i in range(150)] + [f"x/doc-{i}" for i in range(10)]
    result = completion.complete(completion.folded_candidates(ids), "DOC")
    assert len(result.values) == completion.MAX_VALUES == 100
    assert result.values[0] == "doc-000" and result.values[-1] == "doc-099"
    assert (result.total, result.has_more) == (160, True)


def test_prompt_arguments_are_checked() -> None:
    one = resources.serve_bundles(["/srv/shop"])
    two = resources.serve_bundles(["/srv/shop", "/srv/docs"])
    answer = prompts.ANSWER
    assert prompts.validate(answer, {"question": "why?"}, one).bundle.label == "shop"
    for args, bundles in (
        ({}, one),  # missing question
        ({"question": "  "}, one),  # blank
        ({"question": "q", "extra": "1"}, one),  # unknown argument
        ({"question": "q"}, two),  # which bundle?
        ({"question": "q", "bundle": "nope"}, two),
    ):
        with pytest.raises(prompts.PromptError):
            prompts.validate(answer, args, bundles)
    assert prompts.validate(answer, {"question": "q", "bundle": "Docs"}, two).bundle.label == "docs"
    review = prompts.REVIEW
    for good in ("2026-11-30", "2026-11-30T12:00:00Z", "2026-11-30T12:00:00+02:00"):
        prompts.validate(review, {"as_of": good}, one)
    for bad in ("yesterday", "2026-02-30", "2026-11-30t12:00:00z", "2026-11-30T12:00:00-00:00"):
        with pytest.raises(prompts.PromptError):
            prompts.validate(review, {"as_of": bad}, one)
    with pytest.raises(prompts.PromptError):
        prompts.validate(prompts.EXPLAIN, {"concept_id": "../etc/passwd"}, one)


def test_prompts_are_offered_only_with_their_tools() -> None:
    bundles = resources.serve_bundles(["/srv/shop"])
    everything = {"search_concepts", "read_concept", "get_neighbors", "list_concepts"}
    assert [p.name for p in prompts.served_prompts(everything, bundles)] == [
        "answer_from_bundle",
        "explain_concept",
        "review_freshness",
    ]
    assert [p.name for p in prompts.served_prompts({"list_concepts"}, bundles)] == [
        "review_freshness"
    ]
    assert prompts.served_prompts(everything, ()) == ()
