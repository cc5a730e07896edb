"""MCP prompts: the search → read → widen loop, a freshness review, one concept explained.

Transport-free. Each prompt names the tools it expects and is offered only when the server serves
them (``serve --tools`` may leave some out); optional widening tools are mentioned only when
served. Arguments are checked before anything renders: a missing required argument, an unknown
argument, a bundle this server does not serve, a malformed ``as_of`` or a concept that does not
exist is a :class:`PromptError` (the server answers ``-32602``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from .errors import BundleMcpError
from .model import Snapshot
from .okf.ids import concept_id_problem
from .okf.temporal import INSTANT_PROFILE, parse_date, parse_instant
from .resources import MIME_TYPE, ServedBundle, concept_uri

__all__ = [
    "ANSWER",
    "EXPLAIN",
    "PROMPTS",
    "REVIEW",
    "Message",
    "PromptArgument",
    "PromptError",
    "PromptRequest",
    "PromptSpec",
    "Rendered",
    "arguments_of",
    "find_prompt",
    "render",
    "served_prompts",
    "validate",
]

MAX_ARGUMENT_CHARS = 16_384
BUNDLE = "bundle"
CONCEPT_ID = "concept_id"


class PromptError(BundleMcpError, ValueError):
    """Arguments a prompt cannot be rendered from; the message names the argument."""


@dataclass(frozen=True, slots=True)
class PromptArgument:
    name: str
    description: str
    required: bool
    completes: str | None = None  # "concept_id" or "bundle": completion/complete offers values


@dataclass(frozen=True, slots=True)
class PromptSpec:
    name: str
    title: str
    description: str
    arguments: tuple[PromptArgument, ...]
    required_tools: tuple[str, ...]
    optional_tools: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PromptRequest:
    """Validated arguments: the prompt, the bundle it is about, and every argument's value."""

    spec: PromptSpec
    bundle: ServedBundle
    values: Mapping[str, str]
    single_bundle: bool


@dataclass(frozen=True, slots=True)
class Message:
    """One user message: text, or an embedded resource (``uri``, MIME type and text)."""

    text: str | None = None
    resource: tuple[str, str, str] | None = None


@dataclass(frozen=True, slots=True)
class Rendered:
    description: str
    messages: tuple[Message, ...]


ANSWER = PromptSpec(
    name="answer_from_bundle",
    title="Answer a question from the bundle",
    description=(
        "Answer a question from the bundle only: search, read the selected concepts, widen at "
        "most twice, and cite the concept IDs (parent_id) the answer rests on."
    ),
    arguments=(
        PromptArgument("question", "The question to answer from the bundle.", required=True),
    ),
    required_tools=("search_concepts", "read_concept"),
    optional_tools=("search_sections", "get_neighbors", "expand_neighbors", "fetch_slice"),
)

REVIEW = PromptSpec(
    name="review_freshness",
    title="Review stale and unverified concepts",
    description=(
        "List the concepts that are stale (as_of on or after stale_after), unverified or only "
        "machine-confirmed, or draft/deprecated, as of a date, with what to do about each."
    ),
    arguments=(
        PromptArgument(
            "as_of",
            "The date staleness is judged at: YYYY-MM-DD, or an RFC 3339 date-time with Z or "
            "+HH:MM (then the instant-0b87c52 profile is used).",
            required=True,
        ),
    ),
    required_tools=("list_concepts",),
    optional_tools=("validate_bundle", "read_concept", "get_neighbors"),
)

EXPLAIN = PromptSpec(
    name="explain_concept",
    title="Explain a concept with its neighbours",
    description=(
        "Explain one concept (its file is attached) and how it relates to the concepts it links "
        "to and that link to it, citing concept IDs."
    ),
    arguments=(
        PromptArgument(
            CONCEPT_ID,
            "The concept to explain: its ID, the bundle path without .md (tables/orders).",
            required=True,
            completes=CONCEPT_ID,
        ),
    ),
    required_tools=("read_concept", "get_neighbors"),
    optional_tools=("expand_neighbors", "fetch_slice"),
)

PROMPTS: tuple[PromptSpec, ...] = (ANSWER, EXPLAIN, REVIEW)


def served_prompts(
    tools: Collection[str], bundles: Sequence[ServedBundle]
) -> tuple[PromptSpec, ...]:
    """The prompts this server offers: its tools include theirs, and it serves a bundle."""
    if not bundles:
        return ()
    return tuple(p for p in PROMPTS if all(t in tools for t in p.required_tools))


def find_prompt(name: str, offered: Sequence[PromptSpec]) -> PromptSpec:
    for spec in offered:
        if spec.name == name:
            return spec
    known = ", ".join(p.name for p in offered) or "none"
    raise PromptError(f"unknown prompt {name[:128]!r}; this server offers: {known}")


def arguments_of(spec: PromptSpec, bundles: Sequence[ServedBundle]) -> tuple[PromptArgument, ...]:
    """The advertised arguments: ``bundle`` joins them (required) when several are served."""
    if len(bundles) < 2:
        return spec.arguments
    names = ", ".join(b.label for b in bundles)
    bundle = PromptArgument(
        BUNDLE, f"Which served bundle, by its URI name: {names}.", True, completes=BUNDLE
    )
    return (*spec.arguments, bundle)


def validate(
    spec: PromptSpec, arguments: Mapping[str, str] | None, bundles: Sequence[ServedBundle]
) -> PromptRequest:
    """Check the arguments of a ``prompts/get``.

    Raises:
        PromptError: a missing, unknown, empty or malformed argument, or an unknown bundle.
    """
    given = dict(arguments or {})
    known = {a.name for a in arguments_of(spec, bundles)} | {BUNDLE}
    unknown = sorted(set(given) - known)
    if unknown:
        allowed = ", ".join(sorted(a.name for a in arguments_of(spec, bundles)))
        raise PromptError(f"unknown argument {unknown[0][:128]!r}; {spec.name} takes {allowed}")
    for argument in arguments_of(spec, bundles):
        value = given.get(argument.name)
        if value is None or not value.strip():
            if argument.required:
                raise PromptError(f"argument {argument.name!r} is required: {argument.description}")
            continue
        if len(value) > MAX_ARGUMENT_CHARS:
            raise PromptError(f"argument {argument.name!r} is longer than {MAX_ARGUMENT_CHARS}")
    bundle = _bundle(given.get(BUNDLE), bundles)
    if "as_of" in given and not _as_of_ok(given["as_of"]):
        raise PromptError(
            "argument 'as_of' must be a date YYYY-MM-DD or an RFC 3339 date-time with Z or "
            "+HH:MM (upper-case T and Z), such as 2026-11-30 or 2026-11-30T12:00:00Z"
        )
    if CONCEPT_ID in given:
        problem = concept_id_problem(given[CONCEPT_ID])
        if problem is not None:
            raise PromptError(f"argument 'concept_id' is not a concept ID: {problem}")
    values = {k: v for k, v in given.items() if k != BUNDLE}
    return PromptRequest(spec, bundle, values, single_bundle=len(bundles) == 1)


def _bundle(label: str | None, bundles: Sequence[ServedBundle]) -> ServedBundle:
    if label is None or not label.strip():
        if len(bundles) == 1:
            return bundles[0]
        raise PromptError(
            "argument 'bundle' is required: this server serves "
            + ", ".join(b.label for b in bundles)
        )
    for served in bundles:
        if served.label == label.strip().lower():
            return served
    raise PromptError(
        f"no served bundle is named {label[:128]!r}; choose "
        + ", ".join(b.label for b in bundles)
    )


def _as_of_ok(value: str) -> bool:
    if parse_date(value) is not None:
        return True
    # The tools' contracts spell the instant with upper-case T and Z only.
    return parse_instant(value) is not None and value == value.upper()


def render(request: PromptRequest, tools: Collection[str], snapshot: Snapshot | None) -> Rendered:
    """The prompt's messages. ``snapshot`` is the bundle's, needed by :data:`EXPLAIN` only.

    Raises:
        PromptError: ``explain_concept`` for a concept the bundle does not have.
    """
    spec = request.spec
    bundle_note = _bundle_note(request)
    widen = [t for t in spec.optional_tools if t in tools]
    if spec is ANSWER:
        return Rendered(spec.description, (Message(text=_answer(request, widen, bundle_note)),))
    if spec is REVIEW:
        return Rendered(spec.description, (Message(text=_review(request, widen, bundle_note)),))
    if spec is EXPLAIN:
        concept_id = request.values[CONCEPT_ID]
        doc = snapshot.concepts.get(concept_id) if snapshot is not None else None
        if doc is None:
            raise PromptError(
                f"argument 'concept_id': the bundle {request.bundle.label} has no concept "
                f"{concept_id[:256]!r} (complete the argument to see the IDs it has)"
            )
        uri = concept_uri(request.bundle.label, concept_id)
        text = _explain(request, widen, bundle_note, uri)
        return Rendered(
            spec.description, (Message(text=text), Message(resource=(uri, MIME_TYPE, doc.text)))
        )
    raise PromptError(f"unknown prompt {spec.name!r}")  # pragma: no cover - PROMPTS is closed


def _bundle_note(request: PromptRequest) -> str:
    if request.single_bundle:
        return "This server serves one bundle: omit bundle_path in every call."
    return f'Pass bundle_path "{request.bundle.path}" in every call.'


def _listed(tools: Sequence[str]) -> str:
    return ", ".join(tools)


def _answer(request: PromptRequest, widen: Sequence[str], bundle_note: str) -> str:
    question = request.values["question"]
    search = "search_concepts with ONE distinctive literal from the question (an ID, title, "
    search += "tag or phrase; not several words: it matches one caseless substring)"
    if "search_sections" in widen:
        search += ", or search_sections with the documents' own words for passages"
    steps = [
        f"1. Search: {search}.",
        "2. Read: read_concept only for the concept IDs you picked from the hits.",
    ]
    walk = [t for t in widen if t != "search_sections"]
    if walk:
        steps.append(
            f"3. Widen at most twice, only if the concepts read do not answer it: {_listed(walk)} "
            "from the concepts you already hold, then read what you pick. Never walk the whole "
            "graph."
        )
    else:
        steps.append("3. Search again at most twice with another literal if the reads fall short.")
    return "\n".join(
        [
            f"Answer the question below from the OKF bundle {request.bundle.label} only, with "
            "this server's tools. " + bundle_note,
            "",
            "Question:",
            question,
            "",
            *steps,
            "",
            "Answer from what you read, nothing else. After each claim cite the concept it rests "
            "on by its ID (parent_id: for a passage from search_sections or fetch_slice, the "
            "concept that holds it; a locator changes when a file is edited). If a result says "
            "truncated, say which limit cut it instead of claiming you saw everything. If the "
            "bundle does not answer the question, say so and name the searches you made.",
        ]
    )


def _review(request: PromptRequest, widen: Sequence[str], bundle_note: str) -> str:
    as_of = request.values["as_of"]
    profile = ""
    if parse_date(as_of) is None:
        profile = f' and temporal_profile "{INSTANT_PROFILE}"'
    steps = [
        f'1. Call list_concepts with as_of "{as_of}"{profile}. Every card has stale (true when '
        "as_of is on or after stale_after; null when stale_after is missing or unusable), "
        "stale_after, trust (unverified, machine-confirmed, human-reviewed), status (draft, "
        "stable, deprecated) and generated_at.",
        "2. Select the concepts that are stale: true, trust unverified or machine-confirmed, or "
        "status draft or deprecated; note the ones whose stale is null (no usable stale_after).",
    ]
    n = 3
    if "validate_bundle" in widen:
        steps.append(
            f'{n}. Call validate_bundle with as_of "{as_of}"{profile} for the findings that go '
            "with them (stale concepts, malformed dates)."
        )
        n += 1
    if "read_concept" in widen:
        steps.append(
            f"{n}. read_concept only for the selected concepts whose verified entries, sources "
            "(last_modified) or generated block you need to judge; at most a handful."
        )
        n += 1
    if "get_neighbors" in widen:
        steps.append(
            f"{n}. For a stale or deprecated concept, get_neighbors direction in shows what "
            "still links to it."
        )
    return "\n".join(
        [
            f"Review the OKF bundle {request.bundle.label} for knowledge that is stale or "
            f"unverified as of {as_of}. " + bundle_note,
            "",
            *steps,
            "",
            "Report a table sorted by concept ID: ID, reason (stale since <stale_after>, "
            "unverified, machine-confirmed only, draft, deprecated), trust, stale_after, and the "
            "action to take (re-verify, update, retire). Then say how many concepts the list had "
            "and how many you read. Judge staleness only by the tools' answers: never by today's "
            "date.",
        ]
    )


def _explain(request: PromptRequest, widen: Sequence[str], bundle_note: str, uri: str) -> str:
    concept_id = request.values[CONCEPT_ID]
    steps = [
        f"1. The concept's file ({uri}) is attached: what it says, its type, status, trust "
        f'and sources. read_concept concept_id "{concept_id}" gives the same file with the '
        "fields projected.",
        f'2. Call get_neighbors concept_id "{concept_id}" direction both: its links and typed '
        "relations, in and out.",
        "3. read_concept for the few neighbours the explanation needs (at most five).",
    ]
    if widen:
        steps.append(
            f"4. Widen at most twice more if needed: {_listed(widen)}. Never walk the whole graph."
        )
    return "\n".join(
        [
            f'Explain the concept "{concept_id}" of the OKF bundle {request.bundle.label} to '
            "someone new to it. " + bundle_note,
            "",
            *steps,
            "",
            "Explain what it is, then how it relates to each neighbour you used (name the "
            "relation type or 'links to', and the direction), then what is uncertain about it "
            "(unverified, stale, draft or deprecated). Cite every concept by its ID.",
        ]
    )
