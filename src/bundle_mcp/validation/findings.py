"""Small helpers shared by the validation rules: building findings and locating keys."""

from __future__ import annotations

import re

from ..errors import ERROR, INFO, WARN, Diagnostic
from ..loader.text import split_lines
from ..model import Document


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
