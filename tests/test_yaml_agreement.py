"""The compiled YAML path gives exactly the strict loader's data, or hands the block back.

``loader/yaml_fast.py`` (yaml-rs) serves the hot path; ``loader/strict_yaml.py``'s ``load_yaml``
(libyaml) is the reference. For every frontmatter block checked here the fast path either returns
``None`` (the chooser then loads it with the reference) or the very same data, in the same key
order, for a block the reference loads without an error. Why the fast path exists and where it
declines is in docs/decisions/loading.md (Frontmatter parsing).
"""

from __future__ import annotations

import importlib.util
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bundle_mcp.loader.frontmatter import FrontmatterError, split_frontmatter
from bundle_mcp.loader.strict_yaml import load_yaml
from bundle_mcp.loader.yaml_load import load_frontmatter

yaml_fast = pytest.importorskip("bundle_mcp.loader.yaml_fast")

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CORPUS_SAMPLE = 1500


def reference(raw: str) -> tuple[str, Any]:
    try:
        return "data", load_yaml(raw, 1)
    except FrontmatterError as exc:
        return "error", (exc.code, exc.message, exc.line)


def disagreement(raw: str) -> str | None:
    """``None`` when the paths agree (or the fast path declines), else what differs."""
    fast = yaml_fast.load_yaml_fast(raw)
    if fast is None:
        return None
    kind, expected = reference(raw)
    if kind == "error":
        return f"the reference refuses {raw!r} ({expected}), the fast path loads {fast!r}"
    if fast != expected or list(fast) != list(expected):
        return f"{raw!r}: reference {expected!r}, fast path {fast!r}"
    return None


def blocks(paths: list[Path]) -> Iterator[str]:
    for path in paths:
        try:
            split = split_frontmatter(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, FrontmatterError):
            continue
        if split.raw is not None:
            yield split.raw


def check(paths: list[Path]) -> tuple[int, int]:
    """(blocks checked, blocks the fast path answered); every disagreement fails."""
    checked = answered = 0
    problems = []
    for raw in blocks(paths):
        checked += 1
        if yaml_fast.load_yaml_fast(raw) is not None:
            answered += 1
        problem = disagreement(raw)
        if problem is not None:
            problems.append(problem)
    assert not problems, "\n".join(problems[:10])
    return checked, answered


def markdown_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.md") if "node_modules" not in p.parts)


# -- the project's own files and the shared ones -------------------------------------------------


@pytest.mark.parametrize("folder", ["testdata", "examples"])
def test_project_frontmatter_agrees(folder: str) -> None:
    checked, answered = check(markdown_files(ROOT / folder))
    assert checked > 0 and answered > 0


def test_conformance_fixtures_agree() -> None:
    folder = SHARED / "conformance"
    if not folder.is_dir():
        pytest.skip(f"the shared conformance fixtures are not at {folder}")
    checked, answered = check(markdown_files(folder))
    assert checked > 50 and answered > 0


@pytest.mark.parametrize("corpus", ["cpp-docs", "pnpm-docs", "vcpkg-docs"])
def test_corpus_sample_agrees(corpus: str) -> None:
    folder = SHARED / "corpora" / corpus
    if not folder.is_dir():
        pytest.skip(f"the shared corpora are not at {SHARED / 'corpora'}")
    files = markdown_files(folder)
    sample = random.Random(corpus).sample(files, min(CORPUS_SAMPLE, len(files)))
    checked, answered = check(sample)
    # Real frontmatter is what the fast path is for: nearly every block is answered by it.
    assert checked > 100 and answered >= 0.8 * checked


def test_generated_bundle_agrees_and_declines_only_its_index(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("okf_generate", ROOT / "bench" / "generate.py")
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = generate  # its dataclasses look their module up
    try:
        spec.loader.exec_module(generate)
    finally:
        del sys.modules[spec.name]
    generate.generate(tmp_path, 300)
    checked, answered = check(markdown_files(tmp_path))
    assert checked > 300
    # All but the index, whose okf_version is a quoted number: written plain it would be a
    # float, and whether it was quoted is not in yaml-rs's result.
    declined = [path.relative_to(tmp_path).as_posix() for path in markdown_files(tmp_path)
                if yaml_fast.load_yaml_fast(next(blocks([path]), "k: v")) is None]
    assert declined == ["index.md"]
    assert answered == checked - 1


# -- hostile YAML --------------------------------------------------------------------------------

# Pieces that hit where YAML 1.1 (libyaml) and YAML 1.2 (yaml-rs) read text differently: line
# breaks of 1.1 only, controls, tabs, BOM, block scalars, flow indicators, quotes and escapes,
# document markers, directives, words typed by one and not the other, keys past libyaml's
# 1024-character limit on implicit keys.
PIECES = [
    "a", "key", "x y", "-", " ", "  ", "\t", ":", ": ", "\n", "\n  ", "\n- ", "#", " #c", "'",
    "''", '"', "\\", "\\n", "\\t", "\\x41", "\\u00e9", "\\/", "[", "]", "{", "}", ",", "?", "? ",
    "|", "|-", "|+", ">", ">-", "|2", "%", "@", "`", "---", "...", "é", "\u00a0", "\r", "\r\n",
    "\ufeff", "\x85", "\u2028", "\u2029", "\x00", "\x07", "1", "2026-01-02", "2026-01-02T10:00:00Z",
    "true", "True", "yes", "null", "~", "0x1", "017", "1_0", "1e3", ".5", "=", "<", "<<", "&a",
    "*a", "!!str", "k" * 1030, "é" * 600, "  - ", "k: ", "k2:", "\n k:", "\n  k: v", "'a''b'",
    '"a\\"b"', "a:b", "a :b", "-a", "--", "- - ", ": :", "[a, b]", "{a: b}",
]


@st.composite
def hostile_yaml(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        return "".join(draw(st.lists(st.sampled_from(PIECES), min_size=1, max_size=14)))
    lines = []
    for _ in range(draw(st.integers(1, 5))):
        indent = draw(st.sampled_from(["", " ", "  ", "    "]))
        head = draw(st.sampled_from(["k", "t", "x", "- ", "- k"]))
        colon = draw(st.sampled_from([": ", ":", " : ", ""]))
        tail = "".join(draw(st.lists(st.sampled_from(PIECES), max_size=4)))
        lines.append(indent + head + colon + tail)
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@st.composite
def written_yaml(draw: st.DrawFn) -> str:
    """Well-formed blocks in every scalar style: what the fast path must get right, not just
    decline."""
    words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)

    def scalar(text: str) -> str:
        style = draw(st.sampled_from(["plain", "single", "double"]))
        if style == "single":
            return "'" + text.replace("'", "''") + "'"
        if style == "double":
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return text

    lines = []
    for n in range(draw(st.integers(1, 6))):
        key = f"k{n}"
        kind = draw(st.sampled_from(["scalar", "flow", "block", "map"]))
        if kind == "scalar":
            lines.append(f"{key}: {scalar(draw(words))}")
        elif kind == "flow":
            items = draw(st.lists(words, max_size=4))
            lines.append(f"{key}: [{', '.join(scalar(w) for w in items)}]")
        elif kind == "block":
            lines.append(f"{key}:")
            lines.extend(f"  - {scalar(w)}" for w in draw(st.lists(words, min_size=1, max_size=3)))
        else:
            lines.append(f"{key}:")
            lines.extend(f"  s{i}: {scalar(w)}"
                         for i, w in enumerate(draw(st.lists(words, min_size=1, max_size=3))))
    return "\n".join(lines) + "\n"


def assert_agrees(raw: str) -> None:
    assert disagreement(raw) is None
    kind, expected = reference(raw)
    if kind == "data":
        assert load_frontmatter(raw, 1) == expected
    else:
        with pytest.raises(FrontmatterError) as raised:
            load_frontmatter(raw, 1)
        assert (raised.value.code, raised.value.message, raised.value.line) == expected


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(hostile_yaml(), written_yaml()))
@example("k: \n  k: v:.51\\n\x85yesé")  # U+0085 breaks the line for libyaml only
@example(" t: >\n")  # an empty block scalar keeps its line break for yaml-rs
@example("    k: [|-]")  # a flow token starting with | is refused by libyaml only
@example("...\n  k: v")  # a document end marker before the block
@example("k: 1\x07  'a''b'")  # a control character libyaml refuses
@example("k: " + "é" * 600 + ": v")  # an implicit key past 1024 characters
@example("k0: [?]\n")  # "?" in a flow sequence: an empty key for libyaml, a word for yaml-rs
@example("k: [a:?=? \\]")  # ":" inside a plain scalar in flow: refused by libyaml only
@example("k: {a: b}: c\n")  # a mapping as a key: yaml-rs raises TypeError
def test_hostile_yaml_agrees(raw: str) -> None:
    assert_agrees(raw)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(hostile_yaml(), written_yaml()))
def test_hostile_yaml_agrees_long_run(raw: str) -> None:
    assert_agrees(raw)


# -- each known divergence is declined, not guessed at ------------------------------------------

DIVERGENT = {
    # YAML 1.1 breaks lines at U+0085, U+2028 and U+2029; YAML 1.2 reads them as text.
    "a 1.1 line break": "k: a\u2028b\n",
    # libyaml refuses controls and reads a tab, CR or BOM by 1.1 rules.
    "a control character": "k: a\x07b\n",
    "a tab": "k:\ta\n",
    "a byte order mark": "k: \ufeffa\n",
    # An empty block scalar is "" for libyaml and "\n" for yaml-rs.
    "an empty block scalar": "t: >\n",
    "a block scalar": "t: |\n  text\n",
    # libyaml refuses | at the start of a flow token; yaml-rs reads a plain scalar.
    "| in a flow sequence": "k: [|-]\n",
    # In a flow collection, "?" and ":" start keys for libyaml; quotes there are skipped whole.
    "? in a flow sequence": "k: [?]\n",
    ": in a flow scalar": "k: [a:b]\n",
    "a flow mapping": "k: {a: b}\n",
    "a quote inside a flow word": "k: [it's, a:b, it's]\n",
    "an explicit key": "? a\n: b\n",
    "a mapping as a key": "{a: b}: c\n",
    # A document marker or directive at a line's start.
    "a document end marker": "...\nk: v\n",
    "a directive": "%YAML 1.1\n---\nk: v\n",
    # Typed differently: YAML 1.2 numbers, a quoted word the reference would type written plain.
    "a 1.1 octal": "k: 017\n",
    "an underscore number": "k: 1_000\n",
    "an exponent without a dot": "k: 1e3\n",
    "a quoted number": "k: '017'\n",
    "a quoted boolean": "k: 'true'\n",
    "an empty value": "k:\n",
    "an empty quoted value": "k: ''\n",
    # Node properties: the reference's graph checks and constructors.
    "an anchor and an alias": "a: &x v\nb: *x\n",
    "an explicit tag": "k: !!str 1\n",
    "a merge key": "a: {b: c}\n<<: {d: e}\n",
    # The reference's own errors, word for word.
    "a duplicate key": "k: a\nk: b\n",
    "a sequence at the top": "- a\n- b\n",
    "nesting at the limit": "k: " + "[" * 70 + "]" * 70 + "\n",
}


@pytest.mark.parametrize("raw", DIVERGENT.values(), ids=DIVERGENT.keys())
def test_each_divergence_is_declined(raw: str) -> None:
    assert yaml_fast.load_yaml_fast(raw) is None
    assert_agrees(raw)


def test_flow_sequences_of_quoted_and_plain_words_are_answered() -> None:
    for raw in ('k: ["a:b", \'c?d\', "[e]", plain words]\n', "k: [a,\n  b]\n", "k: []\n"):
        assert yaml_fast.load_yaml_fast(raw) == load_yaml(raw, 1), raw


@pytest.mark.parametrize("raw", [
    "k: [" + " " * 200_000 + ":",
    "k: [" + "a " * 100_000 + ":]",
    "k: [" + '"a", ' * 50_000 + "b:]",
    "k: [" + '"' + "a" * 200_000,
    "k: [" + "[" * 100_000,
    "k: " + "[a, " * 50_000 + "]" * 50_000,
], ids=["spaces", "words", "quoted", "unclosed-quote", "brackets", "nested"])
def test_hostile_flow_text_is_read_in_one_pass(raw: str) -> None:
    """The flow checks' patterns are possessive: text that fails them is not tried again from
    every split (a quadratic pattern would hold this test until the suite's timeout)."""
    assert yaml_fast.load_yaml_fast(raw) is None


def test_plain_frontmatter_is_answered_with_keys_interned() -> None:
    raw = "title: A page\ntags: [a, b]\nsources:\n  - id: s1\n    title: 'Quoted: text'\n"
    data = yaml_fast.load_yaml_fast(raw)
    assert data == load_yaml(raw, 1)
    assert data is not None
    assert all(key is sys.intern(key) for key in data)
    assert all(key is sys.intern(key) for key in data["sources"][0])


def test_without_yaml_rs_every_block_goes_to_the_reference(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    from bundle_mcp.loader import yaml_load

    yaml_load._imported_fast_path.cache_clear()
    monkeypatch.setitem(sys.modules, "bundle_mcp.loader.yaml_fast", None)  # an ImportError
    try:
        assert yaml_load._fast_path() is None
        assert load_frontmatter("title: t\n", 1) == {"title": "t"}
    finally:
        yaml_load._imported_fast_path.cache_clear()
