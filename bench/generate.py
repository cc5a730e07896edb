"""Deterministic synthetic OKF v0.2 bundles for the benchmarks.

``generate(root, concepts, seed)`` writes the same bytes for the same arguments on every machine:
all randomness comes from one ``random.Random(seed)`` and no value is read from the wall clock.

Shape of a bundle (about 6 KiB per concept, so 10,000 concepts come to about 60 MiB):

- ``index.md`` (frontmatter ``okf_version: "0.2"``) linking every folder's ``index.md``;
- ``log.md``: ``## YYYY-MM-DD`` groups, newest first, each a list of entries;
- about 20 folders, each with an ``index.md`` listing its concepts as
  ``* [Title](file.md) - description`` under one heading per concept type;
- ``core/hub.md``: the concept that about 10% of the others link to (neighbour benchmarks);
- every concept has the full v0.2 frontmatter (type, title, description, tags, resource, sources,
  generated, verified on some, status on some, stale_after on some, 2-3 typed top-level
  ``relations`` and one nested ``{id, relations}``), an h1, five h2 sections of prose, about ten
  links (relative and root-absolute, some with a ``#fragment`` naming a heading of the target),
  a fenced code block holding a fake link, and footnotes whose labels are its source IDs.

Search hooks: every concept body holds one rare word ``zq<number>`` (fixed width, so no rare word
is a substring of another, and it never appears in frontmatter) and most bodies hold the common
word ``pipeline``.

The generated bundle is clean: ``validate`` with ``check_links`` and ``check_orphans`` reports no
errors and no warnings (``tests`` never depend on that; ``bench/run.py`` reports the counts).

CLI: ``python bench/generate.py OUT_DIR --concepts N --seed S``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

FOLDERS = (
    "core", "tables", "flows", "dashboards", "metrics", "services", "jobs", "reports",
    "models", "feeds", "teams", "runbooks", "schemas", "events", "queues", "apis", "exports",
    "alerts", "experiments", "glossary",
)
TYPES = ("Table", "Pipeline", "Dashboard", "Metric", "Service", "Runbook")
TAGS = (
    "finance", "sales", "ops", "security", "growth", "platform", "billing", "support",
    "marketing", "logistics", "privacy", "quality", "realtime", "batch", "legacy", "core",
)
HEADINGS = (
    "Overview", "Inputs", "Outputs", "Schedule", "Ownership", "Failure modes", "Data quality",
    "Lineage", "Retention", "Access control", "Cost", "Monitoring", "Change history",
    "Known issues", "Dependencies", "Backfills", "Usage notes", "Service levels",
)
RELATION_TYPES = ("depends_on", "feeds", "owned_by", "see_also", "supersedes", "derived_from")
NESTED_RELATION_TYPES = ("monitored_by", "validated_by", "alerts_to")
PEOPLE = ("alice", "bruno", "chen", "dara", "emeka", "farah", "goran", "hana")
PROCESSES = ("process:ci-schema-check", "process:lineage-scan", "process:freshness-probe")
GENERATORS = ("process:okf-bench-generate", "process:doc-writer", "human:import-bot")

# Prose vocabulary. It must not contain "pipeline" (the common search word, placed on purpose)
# or anything starting with "zq" (the rare words).
WORDS = tuple(
    """
    account active adapter aggregate alert amount analysis archive audit average balance batch
    bucket budget buffer cache calendar capacity catalog channel checkpoint client cluster column
    commit compact config consumer contract counter customer daily dataset date deadline delta
    deploy detail device digest dimension discount domain driver duplicate edge encode endpoint
    entry error estimate event export extract factor feature field filter flag forecast format
    frame freshness gateway grain graph group growth handler hash header history host hourly
    identity import incident index input insight install interval inventory invoice journal
    key label latency layer ledger level limit lineage load locale lookup margin market measure
    merge message method metric migrate mirror model module monitor monthly network node notice
    offset order origin output owner package page parent partition partner payload payment peak
    period policy pool portal prefix price primary process product profile project quota range
    rate ratio reader record region release replica report request reserve result retry revenue
    review rollup route row runtime sample scale schema scope score segment sensor session shard
    signal snapshot source span stage status storage stream summary supplier table target task
    tenant threshold ticket tier timeline token topic total trace traffic trend trigger update
    upstream usage user value vendor version view volume warehouse weekly window worker zone
    accurate stable quick careful daily nightly regional global partial complete internal
    external shared private primary secondary late early steady rising falling
    """.split()
)
VERBS = tuple(
    """
    reads writes joins filters merges checks publishes tracks stores loads refreshes validates
    exports summarises ranks groups flags retries archives samples computes
    """.split()
)

BASE_DATE = datetime.date(2024, 1, 1)
TARGET_BYTES = (5_400, 6_900)  # per concept file, uniform: mean about 6 KiB
HUB_SHARE = 0.10
PIPELINE_SHARE = 0.9


@dataclass(frozen=True, slots=True)
class _Concept:
    index: int
    folder: str
    name: str  # file name without .md
    title: str
    description: str
    type: str
    headings: tuple[str, ...]  # the five h2 headings

    @property
    def concept_id(self) -> str:
        return f"{self.folder}/{self.name}"

    @property
    def path(self) -> str:
        return f"{self.folder}/{self.name}.md"

    def anchors(self) -> tuple[str, ...]:
        return (slug(self.title),) + tuple(slug(h) for h in self.headings)


def slug(text: str) -> str:
    """GitHub's anchor for the ASCII letters, digits and spaces this generator writes."""
    return text.lower().replace(" ", "-")


def folder_count(concepts: int) -> int:
    return max(1, min(len(FOLDERS), concepts // 10))


def reserved_files(concepts: int) -> int:
    """How many ``index.md``/``log.md`` files a bundle of ``concepts`` concepts has."""
    return folder_count(concepts) + 2


def generate(root: Path, concepts: int, seed: int = 42) -> dict:
    """Write a bundle of ``concepts`` concept files under ``root``; return its stats.

    ``root`` may exist but must be empty. Returns ``files`` and ``bytes`` (all ``.md`` files) plus
    details a benchmark may want (the hub ID, how many concepts link to it, a rare word).
    """
    if concepts < 1:
        raise ValueError("concepts must be at least 1")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise ValueError(f"{root} is not empty")
    rng = random.Random(seed)
    plan = _plan(rng, concepts)
    width = max(5, len(str(concepts)))
    by_folder: dict[str, list[_Concept]] = {}
    for c in plan:
        by_folder.setdefault(c.folder, []).append(c)

    files: dict[str, str] = {}
    hub_inbound = 0
    pipeline_docs = 0
    for c in plan:
        text, links_hub, has_pipeline = _concept_text(rng, c, plan, by_folder, width)
        files[c.path] = text
        hub_inbound += links_hub
        pipeline_docs += has_pipeline
    for folder, members in by_folder.items():
        files[f"{folder}/index.md"] = _folder_index(folder, members)
    files["index.md"] = _root_index(by_folder)
    files["log.md"] = _log(rng, plan)

    total = 0
    for rel in sorted(files):
        data = files[rel].encode("utf-8")
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        total += len(data)
    return {
        "files": len(files),
        "bytes": total,
        "concepts": concepts,
        "folders": len(by_folder),
        "seed": seed,
        "hub": plan[0].concept_id,
        "hub_inbound": hub_inbound,
        "pipeline_docs": pipeline_docs,
        "rare_word_example": _rare_word(plan[-1].index, width),
    }


def _plan(rng: random.Random, concepts: int) -> list[_Concept]:
    folders = FOLDERS[: folder_count(concepts)]
    plan = [
        _Concept(0, "core", "hub", "Hub", "the central map of this bundle", "Runbook",
                 ("Overview", "Dependencies", "Ownership", "Usage notes", "Change history"))
    ]
    for i in range(1, concepts):
        folder = folders[i % len(folders)]
        a, b = rng.sample(WORDS, 2)
        plan.append(_Concept(
            index=i,
            folder=folder,
            name=f"{a}-{b}-{i:05d}",
            title=f"{a.capitalize()} {b.capitalize()} {i}",
            description=_sentence(rng, 8, 14, period=False).lower(),
            type=rng.choice(TYPES),
            headings=tuple(rng.sample(HEADINGS, 5)),
        ))
    return plan


def _rare_word(index: int, width: int) -> str:
    return f"zq{index:0{width}d}"


def _day(rng: random.Random, lo: int = 0, hi: int = 700) -> datetime.date:
    return BASE_DATE + datetime.timedelta(days=rng.randrange(lo, hi))


def _sentence(rng: random.Random, lo: int = 8, hi: int = 18, period: bool = True) -> str:
    n = rng.randint(lo, hi)
    words = [rng.choice(WORDS) for _ in range(n)]
    words.insert(rng.randrange(1, n), rng.choice(VERBS))
    text = " ".join(words)
    return text[0].upper() + text[1:] + ("." if period else "")


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON strings of ASCII text are valid YAML)."""
    return json.dumps(text)


def _link_dest(rng: random.Random, src: _Concept, dst: _Concept, fragment: bool) -> str:
    if dst.folder == src.folder and rng.random() < 0.6:
        dest = f"{dst.name}.md"
    elif rng.random() < 0.5:
        dest = f"../{dst.folder}/{dst.name}.md" if src.folder != dst.folder else f"./{dst.name}.md"
    else:
        dest = f"/{dst.path}"
    if fragment:
        dest += "#" + rng.choice(dst.anchors())
    return dest


def _pick_targets(
    rng: random.Random, c: _Concept, plan: list[_Concept], by_folder: dict[str, list[_Concept]],
    count: int,
) -> list[_Concept]:
    """Distinct link targets, never ``c`` itself: half from its own folder when possible."""
    chosen: dict[int, _Concept] = {}
    siblings = by_folder[c.folder]
    attempts = 0
    while len(chosen) < count and attempts < count * 20:
        attempts += 1
        pool = siblings if rng.random() < 0.5 and len(siblings) > 1 else plan
        t = rng.choice(pool)
        if t.index != c.index and t.index != 0:
            chosen.setdefault(t.index, t)
    return list(chosen.values())


def _concept_text(
    rng: random.Random, c: _Concept, plan: list[_Concept], by_folder: dict[str, list[_Concept]],
    width: int,
) -> tuple[str, bool, bool]:
    """One concept file; also whether it links the hub and whether it says "pipeline"."""
    # Frontmatter.
    generated_at = _day(rng)
    sources = [
        {
            "id": f"s{n}",
            "resource": f"https://sources.example.com/{c.folder}/{rng.randrange(10**6)}",
            "title": _sentence(rng, 3, 6, period=False),
            "last_modified": _day(rng).isoformat(),
        }
        for n in range(1, rng.randint(1, 3) + 1)
    ]
    fm = [
        "---",
        f"type: {c.type}",
        f"title: {_q(c.title)}",
        f"description: {_q(c.description)}",
        "tags: [" + ", ".join(sorted(rng.sample(TAGS, rng.randint(1, 4)))) + "]",
        f"resource: https://data.example.com/{c.concept_id}",
    ]
    if rng.random() < 0.3:
        fm.append(f"status: {rng.choice(('draft', 'stable', 'deprecated'))}")
    if rng.random() < 0.4:
        stale_after = generated_at + datetime.timedelta(days=rng.randrange(90, 900))
        fm.append(f"stale_after: {stale_after.isoformat()}")
    fm.append("sources:")
    for s in sources:
        fm += [
            f"  - id: {s['id']}",
            f"    resource: {s['resource']}",
            f"    title: {_q(s['title'])}",
            f"    last_modified: {s['last_modified']}",
        ]
    fm += [
        "generated:",
        f"  by: {rng.choice(GENERATORS)}",
        f"  at: {generated_at.isoformat()}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:00Z",
    ]
    roll = rng.random()
    if roll < 0.6:
        actors = [rng.choice(PROCESSES)] if roll < 0.25 else []
        if roll >= 0.15:
            actors.append(f"human:{rng.choice(PEOPLE)}")
        fm.append("verified:")
        for actor in actors:
            at = generated_at + datetime.timedelta(days=rng.randrange(1, 60))
            fm += [f"  - by: {actor}", f"    at: {at.isoformat()}T12:00:00Z"]
    # 2-3 top-level relations plus one nested; the hub links to a random sample too.
    related = _pick_targets(rng, c, plan, by_folder, rng.randint(2, 3) + 1)
    if len(related) >= 2:
        fm.append("relations:")
        types = rng.sample(RELATION_TYPES, len(related) - 1)
        for rel_type, target in zip(types, related[:-1], strict=True):
            ref = target.concept_id
            if rng.random() < 0.2:
                ref += "#" + rng.choice(target.anchors())
            fm += [f"  {rel_type}:", f"    - target: {ref}"]
    if related:
        fm += [
            "checks:",
            f"  - id: {rng.choice(('freshness', 'row-count', 'schema-drift'))}",
            "    relations:",
            f"      {rng.choice(NESTED_RELATION_TYPES)}:",
            f"        - target: {related[-1].concept_id}",
        ]
    fm.append("---")

    # Body: h1, five h2 sections of prose, about ten links, a fenced code block, footnotes.
    targets = _pick_targets(rng, c, plan, by_folder, rng.randint(8, 11))
    links = [
        f"See [{t.title}]({_link_dest(rng, c, t, rng.random() < 0.4)})." for t in targets
    ]
    links_hub = c.index != 0 and rng.random() < HUB_SHARE
    if links_hub:
        hub = plan[0]
        links.append(f"Start from the [{hub.title}]({_link_dest(rng, c, hub, False)}).")
    links.append(f"Upstream notes live at [the vendor site](https://vendor.example.com/{c.name}).")
    rng.shuffle(links)
    has_pipeline = c.index == 0 or rng.random() < PIPELINE_SHARE
    specials = [f"This {rng.choice(WORDS)} carries the marker {_rare_word(c.index, width)}."]
    if has_pipeline:
        specials.append(f"The pipeline {rng.choice(VERBS)} every {rng.choice(WORDS)}.")
    sections: list[list[str]] = [[] for _ in c.headings]
    for n, sentence in enumerate(links + specials):
        sections[n % len(sections)].append(sentence)
    for n, s in enumerate(sources):
        sections[(n + 1) % len(sections)].append(f"It cites its source.[^{s['id']}]")
    for section in sections:
        rng.shuffle(section)
    fence = "\n".join([
        "```markdown",
        f"Copy this, it is not a link: [example](/{c.folder}/not-a-concept-{c.index}.md)",
        f"okf fetch {c.concept_id} --section {slug(c.headings[2])}",
        "```",
    ])
    footnotes = "\n".join(f"[^{s['id']}]: {s['title']}, {s['resource']}" for s in sources)

    def render() -> str:
        parts = ["\n".join(fm), "", f"# {c.title}", "", c.description.capitalize() + ".", ""]
        for n, (heading, sentences) in enumerate(zip(c.headings, sections, strict=True)):
            parts.append(f"## {heading}")
            for start in range(0, len(sentences), 4):
                parts += ["", " ".join(sentences[start : start + 4])]
            parts.append("")
            if n == 2:
                parts += [fence, ""]
        parts += [footnotes, ""]
        return "\n".join(parts)

    target_size = rng.randint(*TARGET_BYTES)
    size = len(render())
    while size < target_size:
        sentence = _sentence(rng)
        section = rng.choice(sections)
        section.insert(rng.randrange(len(section) + 1), sentence)
        size += len(sentence) + 1
    return render(), links_hub, has_pipeline


def _folder_index(folder: str, members: list[_Concept]) -> str:
    lines = [f"# {folder.capitalize()}", ""]
    by_type: dict[str, list[_Concept]] = {}
    for c in members:
        by_type.setdefault(c.type, []).append(c)
    for type_name in sorted(by_type):
        lines += [f"## {type_name}", ""]
        lines += [f"* [{c.title}]({c.name}.md) - {c.description}" for c in by_type[type_name]]
        lines.append("")
    return "\n".join(lines)


def _root_index(by_folder: dict[str, list[_Concept]]) -> str:
    lines = ["---", 'okf_version: "0.2"', "---", "# Benchmark bundle", "", "## Folders", ""]
    for folder in sorted(by_folder):
        lines.append(f"* [{folder.capitalize()}]({folder}/index.md) - "
                     f"{len(by_folder[folder])} concepts")
    lines.append("")
    return "\n".join(lines)


def _log(rng: random.Random, plan: list[_Concept]) -> str:
    days = sorted({_day(rng) for _ in range(30)}, reverse=True)
    lines = ["# Log", ""]
    for day in days:
        lines += [f"## {day.isoformat()}", ""]
        for c in rng.sample(plan, min(len(plan), rng.randint(2, 6))):
            verb = rng.choice(("Added", "Updated", "Reviewed"))
            lines.append(f"- {verb} [{c.title}]({c.path})")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a deterministic synthetic OKF bundle.")
    parser.add_argument("out_dir", type=Path, help="folder to create (must be empty or absent)")
    parser.add_argument("--concepts", type=int, default=1000, help="number of concept files")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    try:
        stats = generate(args.out_dir, args.concepts, args.seed)
    except ValueError as exc:
        print(f"generate: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(stats, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
