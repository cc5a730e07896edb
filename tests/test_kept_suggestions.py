"""The 'did you mean' index (okf.suggest) is kept by revision in the parse cache: a restarted
server reads it back, builds no document for it, and suggests what a server that built it
suggests. Work counters and equality, no timing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.okf.suggest import CONCEPT_SUGGESTIONS, build_index, index_of
from restarts import kept_by, kept_rows, replace_row, restart

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory

MISSES = ["tables/Orders", "orders", "Order Items", "ordr-itemz", "caf\u00e9", "nothing-like-it"]


def pages() -> dict[str, str]:
    return {
        "index.md": "# Home\n",
        "tables/orders.md": "---\ntype: Table\ntitle: Orders\n---\n# Orders\n",
        "tables/order_items.md": "---\ntype: Table\ntitle: Order items\n---\n# Items\n",
        "reports/orders.md": "---\ntype: Report\n---\n# Orders report\n",
        "people/caf\u00e9.md": "---\ntitle: Caf\u00e9 staff\n---\n# Staff\n",
        "misc/-.md": "---\ntitle: Dash\n---\n# Dash\n",  # a loose ID of nothing
    }


def suggestions(dispatcher: Dispatcher) -> list[object]:
    return [dispatcher.call("read_concept", {"concept_id": miss}).structured for miss in MISSES]


def kept(bundle: str, cache: Path) -> list[object]:
    return kept_by(bundle, cache, lambda first, _: suggestions(first))


def test_a_restart_reads_the_index_back_without_a_document(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    made = kept(bundle, cache)
    assert any(answer["diagnostics"] for answer in made)  # type: ignore[index]

    restarted, snapshot = restart(bundle, cache)
    index = index_of(snapshot, CancelToken().check)
    assert list(snapshot.documents.built()) == []  # read back: no document built for it
    assert index == build_index(snapshot)  # the same texts, numbers, tables and postings
    assert suggestions(restarted) == made
    assert suggestions(Dispatcher(ServeConfig(bundles=(bundle,)))) == made


@pytest.mark.parametrize("damage", ["garbage", "other concepts", "a number past the texts",
                                    "keys of another shape", "numbers cut short"])
def test_a_damaged_kept_index_is_built_again(
    tmp_bundle: BundleFactory, tmp_path: Path, damage: str
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    made = kept(bundle, cache)
    (rowid, value), = kept_rows(cache, "%concept-suggestions/1")
    line, numbers = value.split(b"\n", 1)
    header = json.loads(line)
    if damage == "other concepts":
        header[4].reverse()
    elif damage == "a number past the texts":
        numbers = numbers[:-2] + (999).to_bytes(2, sys.byteorder)
    elif damage == "keys of another shape":
        header[5][0] = header[5][0][:2]
    elif damage == "numbers cut short":
        numbers = numbers[:-1]
    data = b"[1," if damage == "garbage" else json.dumps(header).encode() + b"\n" + numbers
    replace_row(cache, rowid, data)

    restarted, snapshot = restart(bundle, cache)
    warm = CONCEPT_SUGGESTIONS.warm
    assert warm is not None
    warm(snapshot, CancelToken())
    assert list(snapshot.documents.built())  # built again, from the documents
    assert suggestions(restarted) == made
