"""A whole concept file composed from frontmatter and body, and checked before it is written.

The file is ``---\\n<frontmatter>---\\n<body>`` with the frontmatter's line ends made LF. It is
parsed exactly as the loader will read it back and must conform (a mapping with a non-empty
``type``) and round-trip: reading it back gives the same frontmatter and body, which fails when
the frontmatter holds a ``---`` line.
"""

from __future__ import annotations

from ..errors import (
    ERROR,
    INVALID_YAML_GRAPH,
    OPERATION_REJECTED,
    RESOURCE_LIMIT,
    BundleError,
    Diagnostic,
    recovery_step,
)
from ..loader.document import parse_document
from ..model import Document
from ..validation.concepts import conformance

__all__ = ["checked_concept_file", "normalised_frontmatter", "require_valid"]


def checked_concept_file(path: str, frontmatter: str, body: str) -> tuple[Document, str]:
    """The parsed new file and its text.

    Raises:
        BundleError: as :func:`require_valid`.
    """
    normalised = normalised_frontmatter(frontmatter)
    text = "---\n" + normalised + "---\n" + body
    doc = parse_document(path, text.encode("utf-8"))
    require_valid(doc, normalised, body)
    return doc, text


def normalised_frontmatter(text: str) -> str:
    """LF line ends, ending in exactly the one newline that precedes the closing fence."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text if not text or text.endswith("\n") else text + "\n"


def require_valid(doc: Document, frontmatter: str, body: str) -> None:
    """The new file must parse, conform, and read back as exactly the frontmatter and body given.

    Raises:
        BundleError: ``operation_rejected`` (``resource_limit`` / ``invalid_yaml_graph`` for
            those parse failures) with one diagnostic per problem.
    """
    problems = list(conformance(doc))
    if (
        doc.parse_error is None
        and problems == []
        and (doc.frontmatter_raw != frontmatter or doc.body != body)
    ):
        # a line '---' inside the frontmatter would close the block early and change both parts
        problems.append(
            Diagnostic(
                code="frontmatter_fence",
                severity=ERROR,
                file=doc.path,
                field="$.frontmatter",
                message="the frontmatter contains a '---' line, which would end the block early",
            )
        )
    if not problems:
        return
    code = OPERATION_REJECTED
    if doc.parse_error is not None and doc.parse_error.code in (RESOURCE_LIMIT, INVALID_YAML_GRAPH):
        code = doc.parse_error.code
    raise BundleError(
        code,
        f"the new version of {doc.path} is not a valid concept; nothing was written",
        (
            *problems,
            recovery_step(
                "fix the frontmatter (a YAML mapping with a non-empty 'type') and call again"
            ),
        ),
    )
