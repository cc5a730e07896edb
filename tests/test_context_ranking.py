"""context's ranking for questions people ask: stop words, contractions and stems; a page's own
fields as evidence; link, table and code sections discounted; copies counted once (also_in).

Every bundle here is written into a temporary folder by the test itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.tools._context_index import stem
from bundle_mcp.tools._context_rank import dated_folders
from bundle_mcp.tools._extraction import token_cost
from bundle_mcp.tools._section_index import query_terms
from bundle_mcp.tools.context import MAX_ALSO_IN, content_terms, without_contractions


def write(root: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return str(root)


def page(title: str, body: str, description: str = "") -> str:
    extra = f"description: {description}\n" if description else ""
    return f"---\ntype: Guide\ntitle: {title}\n{extra}---\n# {title}\n\n{body}\n"


def call(root: str, arguments: dict[str, Any]) -> dict[str, Any]:
    outcome = Dispatcher(ServeConfig(bundles=(root,))).call("context", arguments)
    assert not outcome.is_error, outcome.structured
    return outcome.structured


def pointed(answer: dict[str, Any]) -> list[str]:
    return [item["parent_id"] for item in answer["items"]]


# -- the question's words ---------------------------------------------------------------------


def test_contractions_leave_no_fragments() -> None:
    # "won't" must not search for "won" and "t"; a clitic leaves its word.
    assert query_terms(without_contractions("Why won't it build? I'm sure the project's fine")) \
        == ["why", "it", "build", "i", "sure", "the", "project", "fine"]
    assert query_terms(without_contractions("don’t can't isn't shouldn't")) == []
    assert query_terms(without_contractions("rock'n'roll")) == ["rock", "n", "roll"]


def test_conversational_words_are_dropped() -> None:
    words = query_terms("I want to keep something like the cache instead, much later")
    assert content_terms(words) == ["cache"]
    # Words that headings say ("Use Git CLI", "Show the tree") are the question's own.
    assert content_terms(query_terms("use the git cli to show the tree")) \
        == ["use", "git", "cli", "show", "tree"]
    assert content_terms(["instead", "like"]) == ["instead", "like"]  # nothing else: all kept


def test_the_answer_lists_the_content_words_and_never_a_fragment(tmp_path: Path) -> None:
    root = write(tmp_path, {"threads.md": page("Threads", "Worker threads share one pool.")})
    answer = call(root, {"question": "Why won't my thread keep running instead?"})
    assert answer["terms"] == ["thread", "running"]


def test_words_are_stemmed_on_both_sides(tmp_path: Path) -> None:
    assert stem("threads") == stem("thread") == "thread"
    assert stem("caching") == stem("cached")
    assert stem("c4700") == "c4700"  # a name with a digit stays as it is
    root = write(tmp_path, {
        "pool.md": page("Pool", "Each worker thread takes a job from the queue."),
        "other.md": page("Other", "Nothing about workers here."),
    })
    answer = call(root, {"question": "how many threads take jobs"})
    assert pointed(answer)[0] == "pool"


# -- evidence -----------------------------------------------------------------------------------


def test_a_page_whose_title_and_description_say_it_wins_over_one_repeated_word(
    tmp_path: Path,
) -> None:
    prose = " ".join(f"Step {n} of the walk-through explains one more setting." for n in range(40))
    root = write(tmp_path, {
        "a-prune.md": page(
            "Pruning the store", f"{prose}\n\nRun the command once a month.",
            description="Free disk space by removing unreferenced packages from the store."),
        "b-notes.md": page("Release notes", "## Store\n\nThe store, the store, the store: "
                           "packages moved."),
    })
    answer = call(root, {"question": "free disk space used by the package store"})
    assert pointed(answer)[0] == "a-prune"


def test_link_lists_tables_and_code_count_less_than_prose(tmp_path: Path) -> None:
    links = "\n".join(f"- [Cache {n}](cache-{n}.md)" for n in range(6))
    table = "\n".join(["| flag | meaning |", "| --- | --- |"]
                      + [f"| --cache-{n} | cache {n} |" for n in range(6)])
    root = write(tmp_path, {
        "a-see-also.md": page("Related pages", f"## See also the cache pages\n\n{links}"),
        "b-flags.md": page("Flags", f"## Cache flags\n\n{table}"),
        "c-code.md": page("Samples", "## Cache sample\n\n```\ncache cache cache prune\n```"),
        "d-prose.md": page("Storage", "## Pruning\n\nThe cache grows with every install; prune "
                           "it to free disk space and keep only what the projects use."),
    })
    answer = call(root, {"question": "how do I prune the cache?"})
    assert pointed(answer)[0] == "d-prose"


# -- copies -----------------------------------------------------------------------------------


def versioned_bundle(root: Path, extra: dict[str, str] | None = None) -> str:
    """The same pages under docs/ and two sibling release folders, plus one unrelated page."""
    pages = {
        "install": ("Install", "Run the installer, then add the tool to your PATH."),
        "cache": ("Cache", "The download cache keeps archives in one folder; prune it to "
                           "free disk space."),
        "config": ("Configuration", "Settings are read from the project file first."),
        "filters": ("Filters", "Select packages with a filter expression."),
    }
    files = {}
    for folder in ("docs", "releases/v1", "releases/v2"):
        for name, (title, body) in pages.items():
            note = "" if folder == "docs" else f" (Release {folder[-2:]}.)"
            files[f"{folder}/{name}.md"] = page(title, body + note)
    files["guide.md"] = page("Guide", "Start with the installer, then the cache.")
    files.update(extra or {})
    return write(root, files)


def test_copies_under_sibling_version_folders_count_once(tmp_path: Path) -> None:
    answer = call(versioned_bundle(tmp_path), {"question": "where is the download cache?"})
    items = answer["items"]
    cache = [item for item in items if item["title"] == "Cache"]
    assert len(cache) == 1  # one page, not three
    (kept,) = cache
    # The fullest folder's copy is kept (all three hold four pages: the shallowest path).
    assert kept["parent_id"] == "docs/cache"
    assert kept["also_in"] == ["releases/v1/cache", "releases/v2/cache"]
    assert all("also_in" not in item for item in items if item is not kept)
    assert answer["total"] == len({item["parent_id"] for item in items})


def test_the_kept_copy_is_from_the_fullest_folder(tmp_path: Path) -> None:
    # The release folders lack a page docs/ has: docs/ is the fuller copy and is kept even
    # when a release's copy scores higher.
    root = versioned_bundle(tmp_path, {
        "docs/new-feature.md": page("New feature", "Only in the current docs."),
        "releases/v2/cache.md": page("Cache", "The download cache, the download cache: the "
                                              "download cache keeps archives; prune it."),
    })
    answer = call(root, {"question": "download cache"})
    first = answer["items"][0]
    assert first["parent_id"] == "docs/cache"
    assert "releases/v2/cache" in first["also_in"]


def test_a_page_only_an_older_copy_folder_has_ranks_below_a_current_one(
        tmp_path: Path) -> None:
    # releases/v1 is a copy folder behind docs/ (docs/ holds one page more); its own page on
    # proxies has no copy in docs/ (the setting moved), and says "proxy" more often than the
    # current page does. The current page comes first; the old one stays in the pack.
    root = versioned_bundle(tmp_path, {
        "docs/new-feature.md": page("New feature", "Only in the current docs."),
        "docs/network.md": page("Proxy and network", "Set the proxy for every request in the "
                                                     "network settings."),
        "releases/v1/proxy.md": page("Proxy", "The proxy for every request, and the proxy "
                                              "URL."),
    })
    answer = call(root, {"question": "proxy for every request"})
    assert pointed(answer)[:2] == ["docs/network", "releases/v1/proxy"]


def test_a_heading_that_is_the_question_puts_its_section_first(tmp_path: Path) -> None:
    # The question is a heading's own words (a known item): its section comes first, ahead
    # of a page that repeats the same words all over.
    root = write(tmp_path, {
        "faq.md": page("FAQ", "Questions people ask.\n\n## How do I update libraries?\n\n"
                              "Run the upgrade command with the new baseline.\n\n"
                              "## Where are logs kept?\n\nIn the build tree."),
        "versions.md": page("Update the versions database",
                            "Update libraries: each library update writes a new version of "
                            "the libraries database, so update libraries often."),
    })
    answer = call(root, {"question": "how do I update libraries"})
    first = answer["items"][0]
    assert (first["parent_id"], first["heading"]) == ("faq", "How do I update libraries?")


def test_folders_of_dated_posts_are_found_from_the_names() -> None:
    # A folder whose pages are mostly named after a version or a date holds posts; a folder
    # with a few such names among others (OpenMP's 2-0 pages, say) does not, nor one of four.
    ids = [f"blog/releases/10.{n}" for n in range(6)] + [
        "blog/2025-12-29-year", "blog/2026-01-02-news", "blog/2026-02-03-more",
        "blog/2026-03-04-again", "blog/about",
        "docs/a", "docs/b", "docs/2-0-api", "docs/3-0-api", "docs/c", "docs/d",
        "notes/1.0", "notes/1.1", "notes/1.2", "notes/1.3"]
    assert dated_folders(ids) == {"blog/releases", "blog"}


def dated_bundle(tmp_path: Path, headed_post: bool = False) -> str:
    posts = {
        f"blog/releases/1.{n}.md": page(
            f"Release 1.{n}", f"## Patch Changes\n\nThe proxy for every request is read from "
                              f"the proxy settings (release {n}).")
        for n in range(5)
    }
    if headed_post:
        posts["blog/releases/1.2.md"] = page(
            "Release 1.2", "## Proxy for every request now honours NO_PROXY\n\nThe proxy for "
                           "every request, and the proxy URL, now skip hosts in NO_PROXY.")
    return write(tmp_path, {
        **posts,
        "docs/network.md": page("Network settings", "Set the proxy for every request in the "
                                                    "network settings."),
        "docs/other.md": page("Other", "Nothing about networks."),
    })


def test_a_dated_post_ranks_below_the_page_that_answers(tmp_path: Path) -> None:
    # The release notes repeat the question's words more often than the settings page; a
    # question about how things are now is answered by the page, the posts follow.
    answer = call(dated_bundle(tmp_path), {"question": "proxy for every request"})
    assert pointed(answer)[0] == "docs/network"
    assert any(cid.startswith("blog/releases/") for cid in pointed(answer))


def test_a_dated_post_asked_by_its_own_heading_keeps_its_rank(tmp_path: Path) -> None:
    # A heading that is what was asked (a known item) keeps its post where it would rank: the
    # post scores as its twin outside the folder of posts does, not half of it.
    root = dated_bundle(tmp_path, headed_post=True)
    # (one word that is not asked differs, or the two sections would be one copy)
    (tmp_path / "docs" / "twin.md").write_text(
        (tmp_path / "blog" / "releases" / "1.2.md").read_text(encoding="utf-8")
        .replace("URL", "URI"), encoding="utf-8")
    answer = call(root, {"question": "proxy for every request now honours NO_PROXY"})
    heading = "Proxy for every request now honours NO_PROXY"
    scores = {item["parent_id"]: item["score"] for item in answer["items"]
              if item["heading"] == heading}
    assert scores["blog/releases/1.2"] == scores["docs/twin"] > 0
    # Asked otherwise, the same post ranks at half its twin.
    answer = call(root, {"question": "hosts listed in NO_PROXY"})
    scores = {item["parent_id"]: item["score"] for item in answer["items"]
              if item["heading"] == heading}
    assert scores["blog/releases/1.2"] == pytest.approx(0.5 * scores["docs/twin"], rel=1e-4)


def test_folders_sharing_few_paths_are_not_copies(tmp_path: Path) -> None:
    # Two folders that share one file name (index-like pages) are not versions of each other.
    root = write(tmp_path, {
        "alpha/overview.md": page("Alpha overview", "The cache of alpha."),
        "alpha/setup.md": page("Alpha setup", "Install alpha."),
        "alpha/usage.md": page("Alpha usage", "Run alpha."),
        "beta/overview.md": page("Beta overview", "The cache of beta."),
        "beta/tuning.md": page("Beta tuning", "Tune beta."),
        "beta/limits.md": page("Beta limits", "Limits of beta."),
    })
    answer = call(root, {"question": "overview of the cache"})
    assert {"alpha/overview", "beta/overview"} <= set(pointed(answer))
    assert all("also_in" not in item for item in answer["items"])


def test_sections_with_the_same_text_count_once(tmp_path: Path) -> None:
    notice = ("## Support\n\nAsk about the download cache in the community forum, or open an "
              "issue in the tracker.")
    root = write(tmp_path, {
        "a-faq.md": page("FAQ", f"Common questions.\n\n{notice}"),
        "b-errors.md": page("Errors", f"What failed.\n\n{notice}"),
    })
    answer = call(root, {"question": "download cache forum"})
    support = [item for item in answer["items"] if item["heading"] == "Support"]
    assert len(support) == 1
    assert support[0]["also_in"] == ["b-errors" if support[0]["parent_id"] == "a-faq"
                                     else "a-faq"]


def test_also_in_is_bounded(tmp_path: Path) -> None:
    files = {}
    for n in range(12):
        for name in ("cache", "install", "config"):
            files[f"v{n:02d}/{name}.md"] = page(name.title(), f"The {name} page of v{n}.")
    answer = call(write(tmp_path, files), {"question": "cache page"})
    cache = [item for item in answer["items"] if item["title"] == "Cache"]
    assert len(cache) == 1 and len(cache[0]["also_in"]) == MAX_ALSO_IN


# -- determinism and budget ------------------------------------------------------------------


def test_the_answer_is_a_function_of_the_bundle_and_the_arguments(tmp_path: Path) -> None:
    root = versioned_bundle(tmp_path)
    arguments = {"question": "prune the download cache", "max_tokens": 600}
    first = Dispatcher(ServeConfig(bundles=(root,)))
    second = Dispatcher(ServeConfig(bundles=(root,)))
    # Another order of calls builds the index's parts in another order: same bytes.
    second.call("context", {"question": "filter expression settings"})
    second.call("search_sections", {"query": "cache"})
    one = json.dumps(first.call("context", arguments).structured, sort_keys=True)
    two = json.dumps(second.call("context", arguments).structured, sort_keys=True)
    assert one == two
    assert one == json.dumps(first.call("context", arguments).structured, sort_keys=True)


def test_the_first_call_builds_the_index_and_later_calls_reuse_it(tmp_path: Path) -> None:
    from bundle_mcp import derived

    root = versioned_bundle(tmp_path)
    dispatcher = Dispatcher(ServeConfig(bundles=(root,)))
    dispatcher.call("context", {"question": "download cache"})
    snapshot = dispatcher.served_snapshot(root, CancelToken())
    built = derived.built(snapshot)
    assert built["context_words"] == len(snapshot.concepts)
    assert built["context_index"] >= 3  # totals, postings, holders (and copies)
    dispatcher.call("context", {"question": "installer settings"})
    assert derived.built(snapshot)["context_words"] == built["context_words"]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    budget=st.integers(min_value=0, max_value=9000),
    words=st.lists(st.sampled_from(["cache", "download", "install", "settings", "filter",
                                    "release", "won't", "using", "prune"]),
                   min_size=1, max_size=4),
)
def test_the_pack_never_exceeds_its_budget_with_copies(
    tmp_path_factory: Any, budget: int, words: list[str]
) -> None:
    root = versioned_bundle(tmp_path_factory.mktemp("versioned"))
    answer = call(root, {"question": " ".join(words), "max_tokens": budget})
    items = answer["items"]
    assert answer["tokens"] == sum(token_cost(item) for item in items) <= answer["max_tokens"]
    kept = [item["parent_id"] for item in items]
    listed = [cid for item in items for cid in item.get("also_in", [])]
    assert not set(kept) & set(listed)  # a copy is never also an item of its own
    assert len(listed) == len(set(listed))



def test_the_holders_of_a_stem_are_a_compact_array_in_concept_order(tmp_path: Path) -> None:
    # 2 bytes a holder up to 65,536 concepts, not a tuple of pointers: the index of a
    # 9,978-concept bundle is about 26 MiB smaller than with tuples
    # (bench/results/2026-12-04-context-known-items.md), and 2 bytes instead of 4 a holder
    # saved about 5 MiB more (docs/decisions/memory-texts.md).
    from array import array

    from bundle_mcp.tools._context_index import holder_code, holders

    root = versioned_bundle(tmp_path)
    dispatcher = Dispatcher(ServeConfig(bundles=(root,)))
    snapshot = dispatcher.served_snapshot(root, CancelToken())
    index = holders(snapshot, CancelToken())
    assert all(isinstance(at, array) and at.typecode == "H" for at in index.by_stem.values())
    assert (holder_code(1 << 16), holder_code((1 << 16) + 1)) == ("H", "i")
    cache = [index.concepts[n][0] for n in index.by_stem[stem("cache")]]
    assert cache == [cid for cid, _ in index.concepts if cid.endswith("cache") or cid == "guide"]
