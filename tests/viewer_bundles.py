"""Bundles the viewer tests share: a hostile one, a small one with every kind of problem, and the
deterministic 1,000-concept bundle of bench/generate.py."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "coffee-roastery"

# Every way bundle content might try to run script in the page. A flag each attempt would set:
# the browser test checks window.__pwned stays unset and no dialog opens.
HOSTILE_MD = """---
type: "<img src=x onerror=window.__pwned='type'>"
title: "Evil </script><script>window.__pwned='title'</script><!--"
description: "<b onmouseover=window.__pwned='desc'>d</b> & <!-- <script>"
tags: ["<script>window.__pwned='tag'</script>", "javascript:alert(1)"]
resource: "javascript:window.__pwned='resource'"
sources:
  - id: s1
    title: "<img src=x onerror=window.__pwned='source'>"
    resource: "javascript:window.__pwned='source-resource'"
verified:
  - by: "human:<script>window.__pwned='verifier'</script>"
    at: "2026-01-01T00:00:00Z"
relations:
  "<b>rel</b>":
    - target: target
---

# Evil <script>window.__pwned='heading'</script>

<script>window.__pwned = 'script'</script>

<img src="x" onerror="window.__pwned='img'">

<iframe src="javascript:window.__pwned='iframe'"></iframe>

<svg onload="window.__pwned='svg'"></svg>

<a href="javascript:window.__pwned='raw-a'">raw a</a>

[click](javascript:window.__pwned='link')
[entity](jav&#x09;ascript:window.__pwned='entity')
<javascript:window.__pwned='autolink'>
[data](data:text/html,<script>window.__pwned='data'</script>)
[vb](vbscript:msgbox)
[proto](//evil.example/x)
[upper](JAVASCRIPT:window.__pwned='upper')
[target](target.md)
[quote](https://example.com/"onmouseover="window.__pwned='attr')

![pic](x.png "t\\" onerror=\\"window.__pwned='img-title'")

```html
<script>window.__pwned='code'</script>
```

Footnote[^x].

[^x]: <script>window.__pwned='footnote'</script>
"""

HOSTILE: dict[str, str] = {
    "index.md": '---\nokf_version: "0.2"\n---\n# Concepts\n\n* [Evil](evil.md) - hostile\n'
                "* [Target](target.md) - plain\n",
    "evil.md": HOSTILE_MD,
    "target.md": "---\ntype: Note\ntitle: Target\n---\n# Target\n\nA plain concept.\n",
}

# One of each thing the detail pane reports: broken links, a missing anchor, a relation to no
# concept, a field naming no file, an orphan, a stale and an instant-valued stale_after.
PROBLEMS: dict[str, str] = {
    "index.md": '---\nokf_version: "0.2"\n---\n# Notes\n\n* [A](notes/a.md) - a\n',
    "notes/index.md": "# Notes\n\n* [A](a.md) - the first\n",
    "notes/a.md": (
        "---\ntype: Note\ntitle: Alpha\nstatus: draft\nstale_after: 2026-01-01\n"
        "verified:\n  - by: process:bot\n    at: \"2026-01-01T00:00:00Z\"\n"
        "resource: ../missing/file.csv\n"
        "relations:\n  depends_on:\n    - target: notes/nowhere\n  see_also:\n"
        "    - target: notes/b\n---\n"
        "# Alpha\n\nSee [b](b.md#no-such-heading), [gone](gone.md), [folder](../notes/),\n"
        "[asset](data.csv) and [mail](mailto:a@example.com).\n"
    ),
    "notes/b.md": (
        "---\ntype: Note\ntitle: Beta\nstatus: bogus\nstale_after: \"2027-01-01T00:00:00Z\"\n"
        "---\n# Beta\n\n## Details\n\nBack to [Alpha](a.md#alpha).\n"
    ),
    "notes/data.csv": "a,b\n1,2\n",
}


def write_bundle(root: Path, files: dict[str, str]) -> Path:
    # realpath: bundle paths must not contain a symlink, and some systems link their tmp dir.
    root = Path(os.path.realpath(root))
    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


def _bench_generate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_generate", REPO / "bench" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules.get(spec.name)
    if module is None:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    return module


def generated_bundle(root: Path, concepts: int = 1000) -> tuple[Path, dict[str, Any]]:
    """bench/generate.py's bundle (seed 42): the same bytes on every machine."""
    root = Path(os.path.realpath(root))
    stats = _bench_generate().generate(root, concepts, seed=42)
    return root, stats
