"""Every code a validation finding can carry, with its default severity and its texts.

This is the one table of finding codes: ``--format sarif`` builds its rules from it
(``shortDescription``, ``fullDescription``, ``help``, ``defaultConfiguration.level``), and
``tests/test_finding_codes.py`` checks that every code the loader and the validators can emit is
listed here and that nothing listed is never emitted. A finding's own severity is on the finding;
the severity here is the usual one (``unreadable_entry`` is an ERROR for a Markdown file or a
folder and a WARN for other files).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ERROR, INFO, WARN


@dataclass(frozen=True, slots=True)
class FindingCode:
    severity: str
    short: str  # one line: what is wrong
    full: str  # what the rule checks and why it matters
    help: str  # how to fix it


def _c(severity: str, short: str, full: str, help: str) -> FindingCode:
    return FindingCode(severity, short, full, help)


FINDING_CODES: dict[str, FindingCode] = {
    # --- files that cannot be parsed (conformance errors) ------------------------------------
    "invalid_concept_id": _c(
        ERROR, "The file name cannot be a concept ID.",
        "A concept's ID is its path without '.md'. A name with a control character, '\\', ':', "
        "surrounding whitespace, '//', a '.' or '..' segment, a doubled '.md', or more bytes than "
        "a Linux file system accepts cannot be addressed by any tool, so the file is not served.",
        "Rename the file (and its folder, if the folder name is the problem) to a plain name."),
    "invalid_encoding": _c(
        ERROR, "The file is not valid UTF-8.",
        "OKF files are UTF-8 text. The file holds a byte sequence that is not UTF-8 at the "
        "reported line, so it cannot be read as a concept or a reserved file.",
        "Re-save the file as UTF-8 (without a byte-order mark) or fix the broken characters."),
    "unterminated_frontmatter": _c(
        ERROR, "The frontmatter opened with '---' is never closed.",
        "A file whose first line is '---' starts a YAML frontmatter block, which must end at a "
        "later line that is exactly '---'. Without it the whole file would be YAML.",
        "Add a closing '---' line after the frontmatter keys, or remove the opening line."),
    "invalid_frontmatter": _c(
        ERROR, "The frontmatter is not a valid YAML mapping.",
        "The frontmatter must be one YAML document that is a mapping with scalar, unique keys "
        "and values that fit their tags. A syntax error, a duplicate key (also keys that differ "
        "only in type, such as 1 and \"1\"), a list or scalar at the top, or a Python tag makes "
        "the file unparseable.",
        "Fix the YAML at the reported line; quote values that contain ':' or start with a "
        "special character, and keep each key once."),
    "invalid_yaml_graph": _c(
        ERROR, "The frontmatter's anchors and aliases are unsafe to expand.",
        "YAML aliases can make a small block expand into a huge or endless structure. A "
        "recursive alias, more than 1,000 aliases, an expansion past 100,000 nodes or nesting "
        "past the depth limit is refused.",
        "Write the values out instead of reusing them through anchors and aliases."),
    "resource_limit": _c(
        ERROR, "The frontmatter is larger than 1 MiB.",
        "A frontmatter block is metadata; one larger than 1 MiB is refused so that a single file "
        "cannot exhaust the loader.",
        "Move the bulk of the content into the Markdown body or into separate files."),
    "missing_frontmatter": _c(
        ERROR, "The concept has no YAML frontmatter block.",
        "OKF §11: every concept file starts, on its first line, with a '---' frontmatter block. "
        "A file without one (also one whose '---' is not on line 1) is not a concept.",
        "Start the file with '---', a 'type: …' line and a closing '---'."),
    "missing_type": _c(
        ERROR, "The concept's 'type' is missing or empty.",
        "OKF §11: every concept declares a non-empty string 'type' in its frontmatter; it is "
        "what agents filter and group by.",
        "Add 'type: <kind of thing>' (for example 'type: Process') to the frontmatter."),
    # --- the reserved files index.md and log.md ------------------------------------------------
    "index_frontmatter": _c(
        ERROR, "A nested index.md has frontmatter.",
        "Only the bundle's root index.md may carry frontmatter (its okf_version); a folder's "
        "index.md is a plain catalogue of links.",
        "Remove the frontmatter block from this index.md."),
    "root_index_frontmatter": _c(
        ERROR, "The root index.md frontmatter declares more than okf_version.",
        "The root index.md frontmatter exists to declare the bundle's OKF version and holds "
        "nothing else.",
        "Keep only 'okf_version' in the root index.md frontmatter; move other keys to concepts."),
    "root_index_version": _c(
        ERROR, "The root index.md okf_version is not a non-empty string.",
        "When the root index.md has frontmatter, its okf_version must be a non-empty string "
        "such as \"0.2\"; an unquoted 0.2 is a YAML number, and an empty or structured value "
        "is not a version.",
        "Write 'okf_version: \"0.2\"' in the root index.md frontmatter."),
    "index_without_heading": _c(
        ERROR, "index.md has no heading.",
        "An index.md groups a folder's concepts under Markdown headings; one without any "
        "heading has no structure an agent or a person can navigate.",
        "Add a heading (for example '# Concepts') above the list of links."),
    "index_without_entries": _c(
        ERROR, "index.md has no linked list entry.",
        "An index.md lists a folder's concepts as list entries that link to them; the root "
        "index.md always needs at least one.",
        "Add list entries such as '- [Title](concept.md) - one-line description'."),
    "index_section_empty": _c(
        ERROR, "An index.md section has no entries.",
        "Every heading of an index.md either lists linked entries or groups sub-headings that "
        "do; an empty section is a catalogue hole.",
        "List the section's concepts under the heading, or remove the heading."),
    "index_entry_before_heading": _c(
        ERROR, "An index.md list entry comes before any heading.",
        "Entries of an index.md belong to the heading above them; an entry above the first "
        "heading belongs to no section.",
        "Move the entry under a heading, or add a heading above it."),
    "index_entry_without_link": _c(
        ERROR, "An index.md list entry has no Markdown link.",
        "Each top-level entry of an index.md names a concept through a Markdown link; an entry "
        "without one cannot be followed.",
        "Turn the entry into '- [Title](path/to/concept.md) - description'."),
    "index_description_mismatch": _c(
        WARN, "An index.md entry's description differs from the concept's.",
        "With --strict, an entry written '[Title](x.md) - description' should repeat the "
        "target's frontmatter description, so that the catalogue and the concept agree.",
        "Copy the concept's 'description' into the entry, or update the concept."),
    "log_frontmatter": _c(
        ERROR, "log.md has frontmatter under OKF v0.1.",
        "Under OKF v0.1 log.md is a dated list of changes with no frontmatter; OKF v0.2 allows "
        "frontmatter in a log file. It is an ERROR when the bundle declares 0.1 (or the run "
        "targets 0.1), a WARN when the bundle declares no version (read as 0.1, but it may be "
        "a v0.2 bundle that never said so), and nothing under 0.2.",
        "Remove the frontmatter block from log.md, or declare the bundle OKF v0.2 with "
        "'okf_version: \"0.2\"' in the root index.md frontmatter."),
    "log_heading_level": _c(
        ERROR, "A log.md date heading is not level 2.",
        "log.md groups its entries under '## YYYY-MM-DD' headings; a date at another heading "
        "level does not start a group.",
        "Write the date heading as '## YYYY-MM-DD'."),
    "log_heading_date": _c(
        ERROR, "A log.md level-2 heading is not an ISO-8601 date.",
        "Each '##' heading of log.md is a calendar date written YYYY-MM-DD that exists.",
        "Write the heading as a real date, for example '## 2026-03-01'."),
    "log_order": _c(
        ERROR, "log.md date headings are not newest first.",
        "log.md lists its date groups in strictly descending order, so the latest change is on "
        "top and each date appears once.",
        "Reorder the date groups newest first and merge repeated dates."),
    "log_group_empty": _c(
        ERROR, "A log.md date heading has no entries.",
        "Every date group of log.md holds at least one list entry describing a change.",
        "Add a '- …' entry under the date, or remove the heading."),
    "log_non_list_entry": _c(
        ERROR, "A log.md date group holds something other than list entries.",
        "Inside a date group, log.md holds only top-level '-' list entries; paragraphs, "
        "sub-headings, nested lists, code blocks and rules are not log entries.",
        "Turn the text into a '- …' entry of its own, or move it out of log.md."),
    # --- concept guidance ----------------------------------------------------------------------
    "invalid_status": _c(
        WARN, "'status' is not draft, stable or deprecated.",
        "A concept's 'status' is one of draft, stable or deprecated (lower case). Any other "
        "value is reported and read as no status.",
        "Set 'status' to draft, stable or deprecated, or remove it."),
    "invalid_sources": _c(
        WARN, "'sources' is not a list.",
        "'sources' lists where a concept's knowledge comes from, as a YAML list of mappings.",
        "Write 'sources:' as a list of '- id: …' / 'resource: …' mappings."),
    "invalid_source": _c(
        WARN, "A 'sources' entry is not a mapping.",
        "Each entry of 'sources' is a mapping with at least a 'resource'; a bare string or list "
        "cannot carry an id or a resource.",
        "Write the entry as '- id: s1' with 'resource: <URI or path>' below it."),
    "source_without_resource": _c(
        WARN, "A 'sources' entry has no 'resource'.",
        "A source names what it points to in 'resource' (a URI or a path); without it the "
        "citation cannot be followed.",
        "Add 'resource: <URI or path>' to the entry."),
    "footnote_without_source": _c(
        WARN, "A footnote matches no sources[].id.",
        "In a concept that declares 'sources', each footnote reference [^label] cites the source "
        "whose 'id' is that label, so an unmatched footnote cites nothing.",
        "Add a source with that 'id', or change the footnote label to an existing source id."),
    "invalid_relation": _c(
        WARN, "A typed relation entry is malformed and was skipped.",
        "'relations' maps relation types (matching [A-Za-z][A-Za-z0-9_]*, not a reserved "
        "name) to lists of {target: <concept reference>} mappings. An entry that breaks this "
        "is skipped, never guessed at.",
        "Fix the entry at the reported field, for example 'relations: {depends_on: "
        "[{target: other/concept}]}'."),
    "unresolved_relation": _c(
        WARN, "A typed relation targets a concept that does not exist.",
        "A relation's target names a concept ID of the bundle; this one names none, so the "
        "edge leads nowhere in the graph.",
        "Correct the target ID (IDs are case-sensitive and have no '.md'), or add the concept."),
    "stale_concept": _c(
        INFO, "The concept is stale at the requested --as-of.",
        "A concept whose 'stale_after' lies before the reference time given with --as-of is "
        "stale; the clock is never read, so this appears only when --as-of is given.",
        "Review the concept and move 'stale_after' forward, or mark it deprecated."),
    "mixed_temporal_kinds": _c(
        WARN, "The bundle mixes calendar dates and RFC 3339 instants.",
        "Temporal fields (stale_after, usage_window, sources' last_modified) are compared under "
        "one temporal profile for the whole bundle; files that use instants while others use "
        "dates are reported so that the choice is deliberate.",
        "Use one kind throughout, or migrate with preview_temporal_upgrade / "
        "apply_temporal_upgrade."),
    "missing_recommended_field": _c(
        WARN, "A recommended frontmatter field is missing.",
        "With --strict, concepts should carry 'title', 'description' and 'tags' (and "
        "'timestamp' under OKF 0.1, which v0.2 supersedes with 'generated.at'; in a bundle "
        "that declares no version the finding says how to declare 0.2): they are what search "
        "and catalogues show.",
        "Add the named field to the frontmatter."),
    "invalid_tags": _c(
        WARN, "'tags' is not a list of strings.",
        "With --strict, 'tags' should be a YAML list of strings.",
        "Write 'tags: [a, b]' or one '- tag' per line."),
    "invalid_timestamp": _c(
        WARN, "'timestamp' is not an RFC 3339 instant.",
        "With --strict, 'timestamp' should be an RFC 3339 date-time such as "
        "2026-03-01T09:00:00Z.",
        "Write the timestamp as an RFC 3339 string, quoted."),
    "invalid_resource": _c(
        WARN, "'resource' is not a URI.",
        "With --strict, a concept's 'resource' should be one URI string with a scheme (https:, "
        "bq:, file: …).",
        "Write 'resource' as a single URI such as 'https://…'."),
    "examples_not_concrete": _c(
        WARN, "The '# Examples' section has no concrete example.",
        "With --strict, an '# Examples' section should hold something concrete: a code block, "
        "inline code, a list or table, or an explicit 'for example'.",
        "Add a real example (a code block, a list of cases) to the section."),
    "missing_schema_section": _c(
        WARN, "A BigQuery Table concept has no '# Schema' section.",
        "With --strict, concepts of type 'BigQuery Table' should describe their columns in a "
        "top-level '# Schema' section.",
        "Add a '# Schema' section listing the table's columns."),
    "citations_section_missing": _c(
        WARN, "Citation markers have no bottom '# Citations' section.",
        "With --strict (OKF 0.1 convention), numbered markers such as [1] in prose refer to a "
        "'# Citations' list that is the last top-level section of the file.",
        "Add a final '# Citations' section listing '[1] <link>' entries."),
    "invalid_citation_target": _c(
        WARN, "A citation entry's target is not a URL or a Markdown file.",
        "With --strict, each '# Citations' entry points to an http(s) URL or to a '.md' file of "
        "the bundle.",
        "Point the entry at an https:// URL or a relative '.md' path."),
    "citation_numbering": _c(
        WARN, "Citation entries are not numbered 1, 2, 3 ….",
        "With --strict, the '# Citations' entries are numbered contiguously from 1 so that "
        "every marker finds its entry.",
        "Renumber the entries from 1 without gaps and update the markers."),
    # --- path-valued fields (OKF v0.2 §6.2) ---------------------------------------------------
    "field_path_outside_bundle": _c(
        WARN, "A path-valued field climbs above the bundle root.",
        "resource, sources[].resource, computation, executor.resource and attester.resource "
        "name a URL or a path inside the bundle; a relative path whose '..' segments leave the "
        "bundle names nothing a consumer of the bundle can open.",
        "Point the field at a file inside the bundle (a '/'-rooted path is safest), or use a "
        "URL."),
    "field_path_root_relative": _c(
        WARN, "A relative field path names nothing, but the same path from the root does.",
        "A path without a leading '/' is read relative to the file that holds the field "
        "(§6.2). This one names nothing there, while read from the bundle root it names a "
        "file: most likely a bundle-root path written without its '/'. It is never read the "
        "other way silently.",
        "Add the leading '/' the message suggests (or write the path relative to the file)."),
    "contract_path_missing": _c(
        WARN, "A contract path of an Attested Computation names nothing.",
        "An Attested Computation's computation, executor.resource and attester.resource name "
        "the computation file, the run instructions and the attester code. When one names "
        "nothing in the bundle, a consumer cannot run or attest the computation.",
        "Correct the path (relative to the concept, or '/'-rooted), or add the missing file."),
    "field_path_missing": _c(
        INFO, "A resource or sources[].resource path names nothing in the bundle.",
        "With --check-links, a bundle path in resource or sources[].resource must name a file "
        "or folder of the bundle. Like a broken link (§6.1) it is tolerated: it may be "
        "knowledge not written yet. URLs and scope descriptors are never checked.",
        "Correct the path, add the file it names, or write a URL."),
    # --- Attested Computations (OKF v0.2 §10) --------------------------------------------------
    "computation_runtime_missing": _c(
        WARN, "An Attested Computation has no runtime.",
        "§10.2 makes 'runtime' required for an Attested Computation: it says how to run the "
        "computation and what its parameters mean. Its absence is guidance, not a conformance "
        "error (§11).",
        "Add 'runtime: <engine>' (for example 'runtime: bigquery') to the frontmatter."),
    "computation_contract_invalid": _c(
        WARN, "A contract field of an Attested Computation is malformed.",
        "The contract is the frontmatter: runtime a string, parameters a list of {name, type, "
        "required} with unique names, executor {resource, receipt: [field names]}, attester "
        "{resource}, computation a path. The malformed part is ignored; the rest is read.",
        "Fix the field the message names to the shape above."),
    "computation_missing": _c(
        WARN, "An Attested Computation has no computation.",
        "§10.3: the computation is one code block under the body's '# Computation' heading, "
        "or the file the computation field names. Without it there is nothing sanctioned to "
        "run.",
        "Put the computation in one code block under '# Computation', or name its file in "
        "the computation field."),
    "computation_ambiguous": _c(
        WARN, "An Attested Computation has more than one candidate computation.",
        "The sanctioned computation must be exactly one text: a computation field and a body "
        "code block, two '# Computation' sections or two code blocks leave it open which one "
        "is sanctioned, so none is picked.",
        "Keep exactly one computation: one code block, or the computation field alone."),
    "computation_not_in_bundle": _c(
        WARN, "The computation field names something outside the bundle.",
        "The computation field names a URL, which is never fetched, so the sanctioned text "
        "cannot be read from the bundle or compared with what ran.",
        "Keep the computation file in the bundle and name it by its path."),
    "computation_unreadable": _c(
        WARN, "The computation file cannot be read.",
        "The file the computation field names is in the bundle but could not be read as text: "
        "it is a symlink or over the file caps, is not UTF-8, or is a Markdown file that does "
        "not parse.",
        "Make it a regular UTF-8 file within the bundle's caps, or fix its frontmatter."),
    "computation_too_large": _c(
        WARN, "The computation is larger than 1 MiB.",
        "A computation is handed to an agent whole or not at all; one larger than 1 MiB is "
        "refused rather than cut.",
        "Split the computation into smaller sanctioned computations."),
    "computation_parameter_unused": _c(
        WARN, "A declared parameter is never bound by the SQL computation.",
        "For a SQL runtime, each declared parameter is a bind variable of the computation "
        "(@name, :name, $name, or $1 and ? by position). One the SQL never binds cannot "
        "influence the result, which usually means a value was written into the SQL.",
        "Bind the parameter in the SQL, or remove it from 'parameters'."),
    "computation_parameter_undeclared": _c(
        WARN, "The SQL computation binds a variable that is not a declared parameter.",
        "The agent may supply values only for the declared parameters (§10.3); a bind "
        "variable outside 'parameters' has no declared type and cannot be bound by a consumer.",
        "Declare it in 'parameters' as {name, type, required}, or remove it from the SQL."),
    "computation_receipt_missing": _c(
        WARN, "The executor declares no receipt.",
        "executor.receipt lists the fields a run returns (a job id, the SQL that ran): the "
        "evidence the attester inspects. An executor without one returns nothing to attest.",
        "Add 'receipt: [job_id, executed_sql, result]' (the fields your runner returns)."),
    "computation_executor_missing": _c(
        INFO, "An Attested Computation has no executor.",
        "Without executor.resource a consumer is not told how to run the computation; it can "
        "still read the contract and the sanctioned text.",
        "Add 'executor: {resource: <run instructions>, receipt: [...]}'."),
    "computation_attester_missing": _c(
        INFO, "An Attested Computation has no attester.",
        "Without attester.resource a consumer has no deterministic check of a run's receipt, "
        "so a value computed from it cannot be attested.",
        "Add 'attester: {resource: <path to the checking code>}'."),
    "contract_field_ignored": _c(
        INFO, "A computation contract key sits on a concept of another type.",
        "runtime, parameters, computation, executor and attester are defined only for type "
        "'Attested Computation' (§10.1); on another type they are producer extensions that no "
        "consumer reads as a contract.",
        "Move the computation into its own Attested Computation concept and link to it, or "
        "fix the type."),
    # --- links and orphans (--check-links, --check-orphans) ------------------------------------
    "broken_link": _c(
        INFO, "A link points to nothing in the bundle.",
        "With --check-links, a relative or bundle-rooted link must reach a concept, a file or a "
        "folder of the bundle; IDs are case-sensitive and a leading '/' starts at the bundle "
        "root. Links to symlinks count as broken, since symlinks are never followed.",
        "Correct the link (the message names a probable target when there is one), or create "
        "the target."),
    "missing_anchor": _c(
        WARN, "A link's #fragment names no heading of its target.",
        "With --check-links, a '#fragment' must match a heading anchor of the target file, "
        "made with GitHub's heading-slug rule.",
        "Use the target heading's slug (lower case, spaces as '-') or fix the heading."),
    "orphan": _c(
        WARN, "The concept is not linked from its folder's index.md.",
        "With --check-orphans, every concept is listed by the index.md of its own folder, so "
        "that a reader walking the catalogue can reach it.",
        "Add a '- [Title](file.md) - description' entry to the folder's index.md."),
    "missing_index": _c(
        INFO, "A folder with concepts has no index.md.",
        "With --check-orphans, a folder that holds concepts should have an index.md; without "
        "one its concepts are not checked for orphans.",
        "Add an index.md listing the folder's concepts under a heading."),
    # --- names and collisions ------------------------------------------------------------------
    "id_case_collision": _c(
        WARN, "Two concept IDs differ only by letter case.",
        "IDs are case-sensitive, but such files collide on case-insensitive file systems "
        "(macOS, Windows) and confuse readers.",
        "Rename or merge one of the concepts."),
    "unicode_name_collision": _c(
        WARN, "Two file names differ only by Unicode normalisation.",
        "The names are the same text in NFC and NFD forms. IDs are not normalised, so both "
        "exist separately, but many tools and file systems treat them as one.",
        "Rename one of the files, preferably keeping the NFC form."),
    # --- the walk of the bundle's folders ------------------------------------------------------
    "symlink_skipped": _c(
        WARN, "A symlink was skipped.",
        "Symlinks are never followed or served, so that nothing outside the bundle can be read "
        "through it.",
        "Replace the symlink with the real file or folder, or exclude it in .okfignore."),
    "special_file_skipped": _c(
        WARN, "An entry that is not a regular file or folder was skipped.",
        "Sockets, pipes and device files are never opened, since reading one can block or "
        "have effects; the entry is left out of the bundle.",
        "Remove the entry from the bundle or exclude it in .okfignore."),
    "invalid_path_encoding": _c(
        WARN, "A file name is not valid UTF-8 and was skipped.",
        "Concept IDs are UTF-8 text; an entry whose name is not UTF-8 cannot be given one.",
        "Rename the entry to a UTF-8 name."),
    "unreadable_entry": _c(
        ERROR, "An entry could not be examined, opened, listed or read.",
        "The operating system refused access (permissions, I/O error). A Markdown file or a "
        "folder that cannot be read is an ERROR, since it may hold concepts; another file is a "
        "WARN, since it is never opened.",
        "Fix the permissions (or the disk), or exclude the entry in .okfignore."),
    "path_changed": _c(
        WARN, "An entry vanished or was replaced while the bundle was read.",
        "Something changed the bundle during the walk; the entry was skipped rather than read "
        "half-changed.",
        "Run the validation again once the bundle is no longer being written."),
    "pending_write_unresolved": _c(
        ERROR, "An interrupted write could be neither completed nor undone.",
        "A write through bundle-mcp left a journal in .bundle-mcp/ that recovery could not "
        "resolve; the files are each wholly old or wholly new, but writes are refused until "
        "it is resolved.",
        "Follow the recovery step in the message, then load the bundle again."),
}

SEVERITY_LEVELS: dict[str, str] = {ERROR: "error", WARN: "warning", INFO: "note"}


def describe(code: str, severity: str) -> FindingCode:
    """The table's entry, or plain texts for a code the table does not know yet."""
    known = FINDING_CODES.get(code)
    if known is not None:
        return known
    words = code.replace("_", " ")
    return FindingCode(
        severity, f"okf {words}.", f"bundle-mcp reported '{code}' ({words}).",
        "See the finding's message for what to change.",
    )
