"""Small helpers shared by the validation rules: building findings and locating keys."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import ERROR, INFO, WARN, Diagnostic
from ..loader.text import split_lines
from ..model import Document

DECLARE_V02 = 'declare okf_version: "0.2" in the root index.md'


@dataclass(frozen=True, slots=True)
class VersionRules:
    """Which OKF version's rules a validation applies, and whether that version was chosen.

    ``effective`` is ``"0.1"`` or ``"0.2"`` (``okf.versions.resolve_version``); ``chosen`` is
    true when it comes from the root declaration or ``--target-version``, false when the bundle
    declares nothing usable and 0.1 is only the default reading.
    """

    effective: str
    chosen: bool

    @classmethod
    def of(cls, version: dict[str, object]) -> VersionRules:
        """From ``resolve_version``'s answer."""
        effective = version["effective"] if version["effective"] == "0.2" else "0.1"
        return cls(str(effective), version["resolution"] != "default")

    @property
    def legacy(self) -> bool:
        return self.effective == "0.1"

    def dropped_in_v02(self, finding: Diagnostic) -> Iterator[Diagnostic]:
        """A finding of a rule OKF v0.1 has and v0.2 dropped (§13), at the version's firmness.

        Under a chosen 0.1 it stands as built. Under 0.2 there is no such rule. A bundle that
        declares no version is read as 0.1, but it may well be a v0.2 bundle that never said so
        (the spec's own samples are): the finding is at most a WARN there, and says how to
        declare 0.2. One rule for every such finding, so none of them can make an undeclared
        bundle non-conformant.
        """
        if not self.legacy:
            return
        if self.chosen:
            yield finding
            return
        yield dataclasses.replace(
            finding,
            severity=INFO if finding.severity == INFO else WARN,
            message=f"{finding.message} (a rule of OKF v0.1 only, which a bundle that declares "
                    f"no version is read as; if this bundle is v0.2, {DECLARE_V02})",
        )


def error(doc_path: str | None, code: str, message: str, line: int | None = None,
          field: str | None = None, spec_ref: str | None = None) -> Diagnostic:
    return Diagnostic(code=code, severity=ERROR, file=doc_path, line=line, field=field,
                      message=message, spec_ref=spec_ref)


def warn(doc_path: str | None, code: str, message: str, line: int | None = None,
         field: str | None = None, spec_ref: str | None = None) -> Diagnostic:
    return Diagnostic(code=code, severity=WARN, file=doc_path, line=line, field=field,
                      message=message, spec_ref=spec_ref)


def info(doc_path: str | None, code: str, message: str, line: int | None = None,
         field: str | None = None) -> Diagnostic:
    return Diagnostic(code=code, severity=INFO, file=doc_path, line=line, field=field,
                      message=message)


def key_line(doc: Document, key: str) -> int | None:
    """The 1-based file line of a top-level frontmatter key, when it can be found."""
    if doc.frontmatter_raw is None:
        return None
    pattern = re.compile(r"(?:['\"]?)" + re.escape(key) + r"(?:['\"]?)[ \t]*:")
    for n, line in enumerate(split_lines(doc.frontmatter_raw)):
        if pattern.match(line):
            return n + 2
    return 2
