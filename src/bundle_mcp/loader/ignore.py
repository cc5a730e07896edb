"""``.okfignore``: the subset of gitignore that bundles use.

Supported: blank lines and ``#`` comments, ``*`` / ``?`` / ``[...]`` globs that stay within one
path segment, ``**`` across segments, a leading ``/`` or an inner ``/`` anchoring the pattern to
the bundle root, a trailing ``/`` matching folders only, and ``!`` re-including a path. The last
matching pattern wins, as in git. A path inside an ignored folder is never re-included, because the
walk does not enter ignored folders (git behaves the same way).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IgnoreRule:
    pattern: re.Pattern[str]
    negated: bool
    dir_only: bool


@dataclass(frozen=True, slots=True)
class IgnoreRules:
    rules: tuple[IgnoreRule, ...]

    @classmethod
    def parse(cls, text: str) -> IgnoreRules:
        rules = []
        for raw in text.splitlines():
            line = raw.rstrip()
            if line.endswith("\\") and raw.endswith(" "):
                line += " "
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            if negated:
                line = line[1:]
            if line.startswith("\\"):
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            if not line:
                continue
            anchored = "/" in line
            line = line.lstrip("/")
            rules.append(IgnoreRule(_compile(line, anchored), negated, dir_only))
        return cls(tuple(rules))

    def ignored(self, path: str, *, is_dir: bool) -> bool:
        verdict = False
        for rule in self.rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.pattern.fullmatch(path):
                verdict = not rule.negated
        return verdict


def _compile(glob: str, anchored: bool) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(glob):
        ch = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("/**", i) and i + 3 == len(glob):
            out.append("/.*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif ch == "*":
            out.append("[^/]*")
            i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            end = glob.find("]", i + 2 if glob[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end == -1:
                out.append(re.escape(ch))
                i += 1
            else:
                body = glob[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        elif ch == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(ch))
            i += 1
    body = "".join(out)
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(prefix + body)
