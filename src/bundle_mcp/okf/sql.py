"""SQL canonicalisation for attestation (OKF v0.2 §10.3, §10.5 step 5).

Two SQL texts are the same computation when their canonical token streams are equal: comments
and white space dropped, keywords and common function names upper-cased, a trailing ``;``
dropped, and every bind variable replaced by the declared parameter it stands for, whatever its
spelling (``@year``, ``:year``, ``$year``, or positional ``$1``/``?``/``:1`` mapped to the
declared parameters in order). String literals and quoted identifiers are kept exactly; unquoted
identifiers keep their case, since some engines (BigQuery table names) are case-sensitive.

The tokenizer is deliberately dialect-light: it knows the comment and quoting forms of the six
runtimes in :data:`~bundle_mcp.okf.computations.SQL_RUNTIMES`, and nothing of their grammars,
because the comparison needs only to be exact on what it keeps.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import BundleMcpError
from .computations import SQL_RUNTIMES

# Token kinds.
WORD = "word"  # keyword or unquoted identifier
QUOTED = "quoted"  # a quoted identifier: `x`, "x" (where it is an identifier), [x]
STRING = "string"  # a string literal
NUMBER = "number"
PARAM = "param"  # a bind variable, text = the parameter name it binds
OP = "op"  # punctuation and operators

_HASH_COMMENTS = frozenset({"bigquery", "mysql"})  # where `#` starts a line comment
_DOUBLE_QUOTE_STRINGS = frozenset({"bigquery", "mysql"})  # where "…" is a string, not a name

_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_OPERATORS = ("<=>", "::", "<=", ">=", "<>", "!=", "||", "=>", "->>", "->", "<<", ">>", "**")

# Upper-cased wherever they appear unquoted: SQL keywords and the common functions, whose case
# is insignificant in every runtime here.
KEYWORDS = frozenset(
    """
    ALL AND ANY ARRAY AS ASC ASSERT_ROWS_MODIFIED AT BETWEEN BY CASE CAST COLLATE CONTAINS
    CREATE CROSS CUBE CURRENT CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP DEFAULT DEFINE DESC
    DISTINCT ELSE END ENUM ESCAPE EXCEPT EXCLUDE EXISTS EXTRACT FALSE FETCH FILTER FIRST
    FOLLOWING FOR FROM FULL GROUP GROUPING GROUPS HASH HAVING IF IGNORE ILIKE IN INNER
    INTERSECT INTERVAL INTO IS JOIN LAST LATERAL LEFT LIKE LIMIT LOOKUP MERGE NATURAL NEW NO
    NOT NULL NULLS OF OFFSET ON OR ORDER OUTER OVER PARTITION PRECEDING PROTO QUALIFY RANGE
    RECURSIVE RESPECT RIGHT ROLLUP ROW ROWS SELECT SET SOME STRUCT TABLESAMPLE THEN TO TOP
    TREAT TRUE UNBOUNDED UNION UNNEST USING VALUES WHEN WHERE WINDOW WITH WITHIN
    DATE DATETIME TIME TIMESTAMP DAY HOUR MINUTE SECOND WEEK MONTH QUARTER YEAR
    INT INT64 INTEGER BIGINT SMALLINT NUMERIC DECIMAL FLOAT FLOAT64 REAL DOUBLE PRECISION
    STRING VARCHAR CHAR TEXT BOOL BOOLEAN BYTES
    ABS AVG COALESCE CONCAT COUNT COUNTIF DATE_ADD DATE_DIFF DATE_SUB DATE_TRUNC DATEADD
    DATEDIFF FORMAT GREATEST IFNULL LEAST LENGTH LOWER MAX MIN NULLIF NVL ROUND
    ROW_NUMBER RANK DENSE_RANK LAG LEAD SAFE_CAST SAFE_DIVIDE SPLIT STDDEV SUBSTR SUBSTRING
    SUM TRIM TRUNC UPPER ANY_VALUE ARRAY_AGG STRING_AGG
    """.split()
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str  # canonical text (keywords upper-cased; a PARAM's parameter name)
    raw: str  # as written, for reports


class SqlSyntaxError(BundleMcpError, ValueError):
    """The text cannot be tokenized (an unterminated string, quoted name or comment)."""


def tokenize(sql: str, runtime: str, parameters: Sequence[str]) -> list[Token]:
    """The canonical token stream of ``sql`` for ``runtime`` (lower-case runtime name).

    Positional bind variables take the names of ``parameters`` in order; one past the last
    declared parameter keeps its spelling (``$3``, ``?3``), which never equals a declared name.
    ``$$…$$`` and ``$tag$…$tag$`` are dollar-quoted strings in every runtime.
    """
    tokens: list[Token] = []
    i, n = 0, len(sql)
    positional = 0

    def positional_name(index: int, spelling: str) -> str:
        # One past the declared parameters keeps its spelling ($3, ?3): it binds nothing declared.
        return parameters[index - 1] if 0 < index <= len(parameters) else spelling

    while i < n:
        ch = sql[i]
        if ch.isspace():
            i += 1
            continue
        if sql.startswith("--", i) or (ch == "#" and runtime in _HASH_COMMENTS):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            if end < 0:
                raise SqlSyntaxError("a /* comment is never closed")
            i = end + 2
            continue
        if ch in "'\"`":
            end = _quoted_end(sql, i, runtime)
            raw = sql[i:end]
            kind = STRING if ch == "'" or (ch == '"' and runtime in _DOUBLE_QUOTE_STRINGS) \
                else QUOTED
            tokens.append(Token(kind, raw, raw))
            i = end
            continue
        if ch == "$":
            tag = _DOLLAR_TAG.match(sql, i)
            if tag is not None:
                end = sql.find(tag[0], tag.end())
                if end < 0:
                    raise SqlSyntaxError("a dollar-quoted string is never closed")
                raw = sql[i:end + len(tag[0])]
                tokens.append(Token(STRING, raw, raw))
                i = end + len(tag[0])
                continue
            digits = re.match(r"\$(\d+)", sql[i:])
            if digits:
                tokens.append(Token(PARAM, positional_name(int(digits[1]), digits[0]),
                                    digits[0]))
                i += len(digits[0])
                continue
            name = _NAME.match(sql, i + 1)
            if name:
                tokens.append(Token(PARAM, name[0], "$" + name[0]))
                i = name.end()
                continue
        if sql.startswith("@@", i):  # a system variable (@@version), never a parameter
            name = _NAME.match(sql, i + 2)
            raw = sql[i:name.end()] if name else "@@"
            tokens.append(Token(WORD, raw.upper() if name else raw, raw))
            i += len(raw)
            continue
        if ch == "@":
            name = _NAME.match(sql, i + 1)
            if name:
                tokens.append(Token(PARAM, name[0], "@" + name[0]))
                i = name.end()
                continue
        if ch == ":" and not sql.startswith("::", i):
            name = _NAME.match(sql, i + 1)
            if name:
                tokens.append(Token(PARAM, name[0], ":" + name[0]))
                i = name.end()
                continue
            digits = re.match(r":(\d+)", sql[i:]) if runtime == "snowflake" else None
            if digits:
                tokens.append(Token(PARAM, positional_name(int(digits[1]), digits[0]),
                                    digits[0]))
                i += len(digits[0])
                continue
        if ch == "?":
            digits = re.match(r"\?(\d+)", sql[i:])
            if digits:
                tokens.append(Token(PARAM, positional_name(int(digits[1]), digits[0]),
                                    digits[0]))
                i += len(digits[0])
            else:
                positional += 1
                tokens.append(Token(PARAM, positional_name(positional, f"?{positional}"),
                                    "?"))
                i += 1
            continue
        if ch.isdigit() or (ch == "." and i + 1 < n and sql[i + 1].isdigit()):
            m = _NUMBER.match(sql, i)
            assert m is not None
            tokens.append(Token(NUMBER, m[0].lower(), m[0]))
            i = m.end()
            continue
        m = _WORD.match(sql, i)
        if m:
            word = m[0]
            upper = word.upper()
            tokens.append(Token(WORD, upper if upper in KEYWORDS else word, word))
            i = m.end()
            continue
        op = next((o for o in _OPERATORS if sql.startswith(o, i)), ch)
        tokens.append(Token(OP, op, op))
        i += len(op)
    while tokens and tokens[-1].kind == OP and tokens[-1].text == ";":
        tokens.pop()
    return tokens


def _quoted_end(sql: str, start: int, runtime: str) -> int:
    """The index after the quoted text opened at ``start``: doubled quotes escape, and so does
    a backslash inside strings where the runtime allows it; triple quotes (BigQuery) too."""
    quote = sql[start]
    if runtime == "bigquery" and sql.startswith(quote * 3, start) and quote != "`":
        end = sql.find(quote * 3, start + 3)
        if end < 0:
            raise SqlSyntaxError("a triple-quoted string is never closed")
        return end + 3
    backslash = runtime in ("bigquery", "mysql") and quote != "`"
    i = start + 1
    while i < len(sql):
        ch = sql[i]
        if backslash and ch == "\\":
            i += 2
            continue
        if ch == quote:
            if i + 1 < len(sql) and sql[i + 1] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    raise SqlSyntaxError(f"a {quote}-quoted text is never closed")


def bind_variables(sql: str, runtime: str, parameters: tuple[str, ...]) -> tuple[str, ...] | None:
    """The parameter names ``sql`` binds, in first-use order; ``None`` when ``runtime`` is not
    one whose SQL is tokenized here or the text cannot be tokenized."""
    key = runtime.strip().lower()
    if key not in SQL_RUNTIMES:
        return None
    try:
        tokens = tokenize(sql, key, parameters)
    except SqlSyntaxError:
        return None
    return tuple(dict.fromkeys(t.text for t in tokens if t.kind == PARAM))


@dataclass(frozen=True, slots=True)
class Comparison:
    """How an executed SQL text compares with the sanctioned one."""

    equal: bool
    detail: str
    # Parameters the executed text carries as a literal where the sanctioned one binds them.
    substituted: tuple[str, ...] = ()


def compare(sanctioned: str, executed: str, runtime: str, parameters: Sequence[str],
            values: dict[str, object] | None = None) -> Comparison:
    """Compare two SQL texts as :func:`tokenize` canonicalises them.

    ``values`` are the parameter values the agent supplied: a literal in the executed text
    where the sanctioned one has a bind variable is reported as a substitution (named, and
    said to equal the supplied value when it does).
    """
    key = runtime.strip().lower()
    try:
        want = tokenize(sanctioned, key, parameters)
    except SqlSyntaxError as exc:
        return Comparison(False, f"the sanctioned computation cannot be read as SQL: {exc}")
    try:
        got = tokenize(executed, key, parameters)
    except SqlSyntaxError as exc:
        return Comparison(False, f"the executed SQL cannot be read as SQL: {exc}")
    if [(t.kind, t.text) for t in want] == [(t.kind, t.text) for t in got]:
        return Comparison(True, f"equal after canonicalisation ({len(want)} tokens)")
    matcher = difflib.SequenceMatcher(
        None, [(t.kind, t.text) for t in want], [(t.kind, t.text) for t in got], autojunk=False
    )
    substituted: list[str] = []
    first: str | None = None
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        if op == "equal":
            continue
        params = [t for t in want[a1:a2] if t.kind == PARAM]
        literal = [t for t in got[b1:b2] if t.kind in (STRING, NUMBER)]
        if op == "replace" and len(params) == 1 and a2 - a1 == 1 and literal:
            name = params[0].text
            substituted.append(name)
            shown = " ".join(t.raw for t in got[b1:b2])
            same = values is not None and name in values and _literal_equals(
                got[b1:b2], values[name])
            first = first or (
                f"parameter {name!r} was substituted as the literal {shown}"
                + (" (the supplied value)" if same else "")
                + " instead of being bound"
            )
            continue
        expected, found = _shown(want[a1:a2]), _shown(got[b1:b2])
        after = f" after {_cut(_shown(want[max(0, a1 - 3):a1]))}" if a1 else " at the start"
        if op == "delete":
            change = f"the executed SQL drops {_cut(expected)}{after}"
        elif op == "insert":
            change = f"the executed SQL adds {_cut(found)}{after}"
        else:
            change = f"the executed SQL has {_cut(found)} where the sanctioned computation has " \
                f"{_cut(expected)}"
        first = first or change
    return Comparison(False, first or "the token streams differ", tuple(substituted))


def _literal_equals(tokens: Sequence[Token], value: object) -> bool:
    text = "".join(t.raw for t in tokens)
    if text.startswith("'") and text.endswith("'") and len(text) >= 2:
        return isinstance(value, str) and text[1:-1].replace("''", "'") == value
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        try:
            return float(text) == float(value)
        except ValueError:
            return False
    return isinstance(value, str) and text == value


def _shown(tokens: Sequence[Token]) -> str:
    """Tokens as written, spaced the way SQL is usually read (``o.status``, ``f(x), y``)."""
    text = " ".join(t.raw for t in tokens)
    for loose, tight in ((" . ", "."), (" ,", ","), ("( ", "("), (" )", ")")):
        text = text.replace(loose, tight)
    return text


def _cut(text: str, limit: int = 120) -> str:
    return f"`{text}`" if len(text) <= limit else f"`{text[:limit]}…`"
