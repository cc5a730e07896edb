"""How a document holds its text (``bundle_mcp.packed_text``, issue 29). A document the loader
built from a bundle folder keeps none of it: each read takes the file's bytes again, checked
against the snapshot's record (bytes that moved raise ``FileMoved``), parsed or read back from
the parse cache. A text with no file behind it is held compressed: read back whole and exact,
held in fewer bytes than the text, from any thread. A call reads only the texts of the
documents its answer reads."""

from __future__ import annotations

import gc
import threading
import tracemalloc
import types
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bundle_mcp import packed_text
from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.errors import FileMoved
from bundle_mcp.loader import facts_codec, load_bundle
from bundle_mcp.loader.document import parse_document
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.packed_text import MIN_PACKED, FileText, HeldText, PackedText
from toolcall import every_document_built

# A page of prose as documentation has it: words repeat, so it compresses to well under half.
_WORDS = ("the pipeline retries each stage when its input is late and records the latency of "
          "every run in the nightly report so that owners see slow stages early").split()


def _page(n: int, words: int = 900) -> str:
    body = " ".join(_WORDS[(n + k * 7) % len(_WORDS)] for k in range(words))
    return f"---\ntype: Runbook\ntitle: Page {n}\n---\n# Page {n}\n\n{body}\n"


@given(st.text())
def test_a_packed_text_reads_back_exactly(text: str) -> None:
    packed = PackedText(text)
    assert packed.text() == text
    assert len(packed) == len(text)
    assert packed.ascii == text.isascii()
    assert packed == PackedText(text)
    assert hash(packed) == hash(PackedText(text))


@given(st.text(min_size=MIN_PACKED), st.text(min_size=MIN_PACKED))
def test_packed_texts_are_equal_when_their_texts_are(a: str, b: str) -> None:
    assert (PackedText(a) == PackedText(b)) == (a == b)


def test_a_short_text_is_kept_as_it_is_and_a_long_one_compressed() -> None:
    short, long = "# Title\n", _page(1)
    assert PackedText(short).packed_size == len(short)
    assert PackedText(long).packed_size * 2 < len(long.encode())


def test_a_packed_text_holds_fewer_bytes_than_its_text() -> None:
    """What is held, counted by the allocator: the compressor's own output object keeps a
    block as large as its input, so keeping it would save nothing (a copy of its length is
    kept)."""
    texts = [_page(n) for n in range(50)]
    size = sum(len(t) for t in texts)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        packed = [PackedText(t) for t in texts]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held * 2 < size, (held, size)
    assert [p.text() for p in packed] == texts


def test_texts_read_back_from_many_threads_at_once() -> None:
    """Each thread decompresses with its own context (Zstandard's are not to be shared)."""
    packed = [(PackedText(_page(n)), _page(n)) for n in range(40)]
    wrong: list[int] = []

    def read() -> None:
        for _ in range(20):
            wrong.extend(n for n, (p, text) in enumerate(packed) if p.text() != text)

    threads = [threading.Thread(target=read) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


def _bundle(root: Path, pages: int = 30) -> str:
    root.mkdir()
    (root / "index.md").write_text('---\nokf_version: "0.2"\n---\n# Bundle\n', encoding="utf-8")
    (root / "p").mkdir()
    for n in range(pages):
        (root / "p" / f"c{n}.md").write_text(_page(n), encoding="utf-8")
    return str(root)


def _dispatcher(bundle: str, monkeypatch: pytest.MonkeyPatch) -> Dispatcher:
    """A dispatcher with no parse cache: no background save runs after the test (it would
    read texts, and allocate, in other tests' time)."""
    monkeypatch.setenv("BUNDLE_MCP_CACHE_DIR", "off")
    return Dispatcher(ServeConfig(bundles=(bundle,)))


@pytest.mark.parametrize("how", ["parsed", "read back"])
def test_a_built_document_holds_no_copy_of_its_text(tmp_path: Path, how: str) -> None:
    bundle = _bundle(tmp_path / "b")
    first, _ = load_bundle(bundle)
    every_document_built(first.documents)
    snapshot = first
    if how == "read back":
        cache = ParseCache(tmp_path / "cache")
        cache.save(bundle, first.documents)
        snapshot, _ = load_bundle(bundle, cached=cache.load(bundle))
        every_document_built(snapshot.documents)
    for path, doc in snapshot.documents.items():
        text = (Path(bundle) / path).read_text(encoding="utf-8")
        assert doc.text == text
        assert isinstance(doc.held, FileText)
        assert len(doc.held) == len(text) and doc.held.ascii == text.isascii()
        assert not any(isinstance(value, str | bytes) for value in _slots(doc.held)), path
        doc.markdown  # noqa: B018 (built and kept)
        doc.folded  # noqa: B018
        doc.lines  # noqa: B018 (made on each read, never kept)
        held = [value for value in vars(doc).values() if isinstance(value, str)]
        assert not any(len(value) >= MIN_PACKED for value in held), path
        # Lines kept would keep the text (a LineView holds the text it was cut from).
        assert "lines" not in vars(doc), path
        assert doc.lines is not doc.lines


def _slots(held: HeldText) -> list[object]:
    return [getattr(held, name) for name in type(held).__slots__]


def test_a_text_whose_file_changed_is_not_read_as_another(tmp_path: Path) -> None:
    """The document keeps the snapshot's bytes' record: once its file holds other bytes, or is
    gone, reading its text raises (a call is then answered again from a new capture) instead of
    giving the new text under the old snapshot."""
    bundle = _bundle(tmp_path / "b")
    snapshot, _ = load_bundle(bundle)
    doc = snapshot.documents["p/c3.md"]
    assert doc.text == _page(3)
    changed = _page(3).replace("Page 3", "Page 9")  # as long, other bytes
    (Path(bundle) / "p" / "c3.md").write_text(changed, encoding="utf-8")
    assert doc.text == _page(3)  # the thread's last text read: kept, and the snapshot's
    other = snapshot.documents["p/c4.md"]
    assert other.text == _page(4)  # now the last one read
    with pytest.raises(FileMoved):
        doc.text  # noqa: B018
    (Path(bundle) / "p" / "c3.md").write_text(_page(3), encoding="utf-8")
    assert doc.text == _page(3)  # the same bytes again: the same text
    (Path(bundle) / "p" / "c3.md").unlink()
    assert other.text == _page(4)
    with pytest.raises(FileMoved):
        doc.body  # noqa: B018
    assert hash(doc.held) == hash(PackedText(_page(3)))  # hashed without reading the file


def test_a_document_with_no_file_keeps_its_text_compressed() -> None:
    """Bytes that were never a bundle's file (a write's planned bytes, a test's document)."""
    doc = parse_document("p/c1.md", _page(1).encode())
    assert isinstance(doc.held, PackedText)
    assert doc.held.packed_size * 2 < len(_page(1))
    assert doc.text == _page(1)
    assert doc.held == FileText(_page(1), "p/c1.md", lambda _path: _page(1).encode())


def test_a_call_decompresses_only_the_texts_its_answer_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading one concept decompresses that concept's text alone, and its Markdown facts'
    text (kept packed too), in the calling thread (a feature that scans every text in a small
    call fails here)."""
    bundle = _bundle(tmp_path / "b", pages=60)
    dispatcher = _dispatcher(bundle, monkeypatch)
    token = CancelToken()
    arguments = {"bundle_path": bundle, "concept_id": "p/c7"}
    dispatcher.call("read_concept", arguments, token)  # loads the snapshot
    read: list[str] = []
    facts: list[str] = []
    caller = threading.get_ident()  # a background save reads texts too: not the call's

    def counting(real: Callable[[HeldText], str]) -> Callable[[HeldText], str]:
        def counted(self: HeldText) -> str:
            text = real(self)
            if threading.get_ident() == caller:
                if text.startswith("---\n"):
                    read.append(text.split("\n", 3)[2])  # its title line
                else:
                    facts.append(text)  # a document's Markdown facts, as JSON
            return text
        return counted

    for holder in (packed_text.PackedText, packed_text.FileText):
        monkeypatch.setattr(holder, "text", counting(holder.text))
    # The facts are held by their own codec (as the parse cache stores them).
    real_facts_text = facts_codec.facts_text

    def facts_counted(data: str | bytes) -> str:
        text = real_facts_text(data)
        if threading.get_ident() == caller:
            facts.append(text)
        return text

    monkeypatch.setattr(facts_codec, "facts_text", facts_counted)
    outcome = dispatcher.call("read_concept", arguments, token)
    assert not outcome.is_error
    assert read and set(read) == {"title: Page 7"}
    assert facts and all('"Page 7"' in text for text in facts)  # its own heading's


def test_a_context_pack_cuts_the_texts_of_the_items_it_can_hold_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sixty pages answer the question; a small pack holds a few. An item that cannot fit even
    with no text is left out before its section is cut from its document's text, so the
    call decompresses a few texts, not one per ranked candidate."""
    bundle = _bundle(tmp_path / "b", pages=60)
    dispatcher = _dispatcher(bundle, monkeypatch)
    token = CancelToken()
    arguments = {"bundle_path": bundle, "question": "which stage retries when input is late",
                 "max_tokens": 256}
    dispatcher.call("context", arguments, token)  # builds the index and the snapshot
    read: list[int] = []
    caller = threading.get_ident()

    def counting(real: Callable[[HeldText], str]) -> Callable[[HeldText], str]:
        def counted(self: HeldText) -> str:
            if threading.get_ident() == caller:
                read.append(id(self))
            return real(self)
        return counted

    for holder in (packed_text.PackedText, packed_text.FileText):
        monkeypatch.setattr(holder, "text", counting(holder.text))
    answer = dispatcher.call("context", arguments, token).structured
    assert answer is not None
    assert len(answer["items"]) + answer["omitted"] >= 30
    assert len(set(read)) <= len(answer["items"]) + 2, (len(set(read)), answer["omitted"])


def test_a_threads_kept_compression_context_stays_small() -> None:
    """A long text is compressed with a context of its own: the thread's kept one keeps the
    workspace of the largest input it compressed, and every thread keeps one."""

    def kept_after(text: str) -> int:
        sizes: list[int] = []

        def work() -> None:
            PackedText(text)
            sizes.append(packed_text._CONTEXTS.compressor.memory_size())

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        return sizes[0]

    page = _page(3)
    assert len(page.encode()) <= packed_text.KEPT_CONTEXT_MAX
    long = page * 200  # about a megabyte
    assert PackedText(long).text() == long
    assert kept_after(long) <= kept_after(page)


def test_a_checked_file_keeps_neither_its_bytes_nor_its_text(tmp_path: Path) -> None:
    """Every file of a cold bundle is checked before the first answer and built later: until
    then the cell keeps what the build needs (the frontmatter, where the split fell, how to
    read the file again), not the captured bytes nor the decoded text, nor its body."""
    bundle = _bundle(tmp_path / "b")
    snapshot, _ = load_bundle(bundle)
    cells = snapshot.documents.cells
    assert all(cell.parse_error() is None for cell in cells.values())
    for path, cell in cells.items():
        data = (Path(bundle) / path).read_bytes()
        text = data.decode("utf-8")
        body = text.split("---\n", 2)[-1]
        seen: set[int] = set()
        pending: list[object] = [cell]
        found: list[object] = []
        while pending:
            item = pending.pop()
            if id(item) in seen or isinstance(item, type | types.ModuleType | types.CodeType):
                continue
            seen.add(id(item))
            if isinstance(item, dict) and ("__builtins__" in item or "__import__" in item):
                continue  # a function's module globals or builtins: not what the cell keeps
            if item == data or item == text or (isinstance(item, str) and item == body):
                found.append(item)
            pending.extend(gc.get_referents(item))
        assert not found, path
