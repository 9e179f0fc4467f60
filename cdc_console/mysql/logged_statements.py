"""Which tables a DML statement logged as SQL text may change.

A writer session may set its own ``binlog_format`` to STATEMENT (or MIXED, where the server logs
every statement it deems safe as text): its INSERT, UPDATE, DELETE, REPLACE and LOAD DATA then
reach the binlog as a Query event, not as row images. Nothing in such an event can be turned
into rows, so the reader must notice every one that may touch a captured table and hold that
table (it is read again online, or parked), never pass it over.

The reading errs on the side of naming a table: every table named in a statement's target
list counts, including the read-only sides of a multi-table UPDATE or DELETE (``UPDATE a JOIN b
... SET a.x = b.y`` names both). What it cannot see is a trigger or a stored function that
writes another table: statement logging replays those on a replica from the outer statement
alone, so no event names the table they write: ``stored_writers`` follows those from the
tables a statement names, with ``body_targets`` and ``called_names`` reading the bodies.
"""

from __future__ import annotations

import re

from cdc_console.core.schema import TableId

#: one identifier, quoted or plain (the pattern ``stored_writers`` reads CREATEs with too)
IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_NAME = rf"{IDENT}(?:\s*\.\s*{IDENT})?"
_VERSIONED = re.compile(r"/\*M?!\d*(.*?)\*/", re.S)
_BLOCK = re.compile(r"/\*.*?\*/", re.S)
_LINE = re.compile(r"(?:--\s|#)[^\n]*")
#: the first word of a statement that changes rows
DML_VERBS = frozenset({"INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD"})

_INTO = re.compile(
    rf"^(?:INSERT|REPLACE)\s+(?:(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE)\s+)*"
    rf"(?:INTO\s+)?({_NAME})",
    re.I,
)
_LOAD = re.compile(rf"\bINTO\s+TABLE\s+({_NAME})", re.I)
_UPDATE = re.compile(r"^UPDATE\s+(?:(?:LOW_PRIORITY|IGNORE)\s+)*(.*?)\s+SET\b", re.I | re.S)
_DELETE = re.compile(
    r"^DELETE\s+(?:(?:LOW_PRIORITY|QUICK|IGNORE)\s+)*(.*?)(?:\s+(?:WHERE|ORDER\s+BY|LIMIT|"
    r"RETURNING)\b|$)",
    re.I | re.S,
)
#: words of a table-reference list that are not table names
_NOT_NAMES = frozenset(
    {
        "FROM",
        "USING",
        "JOIN",
        "INNER",
        "CROSS",
        "LEFT",
        "RIGHT",
        "OUTER",
        "NATURAL",
        "STRAIGHT_JOIN",
        "ON",
        "AS",
        "AND",
        "OR",
        "NOT",
        "IS",
        "NULL",
        "IN",
        "USE",
        "FORCE",
        "IGNORE",
        "INDEX",
        "KEY",
        "FOR",
        "PARTITION",
        "LATERAL",
    }
)


def unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def _table(name: str, default_schema: str) -> TableId | None:
    parts = re.findall(IDENT, name)
    if len(parts) == 2:
        return TableId(unquote(parts[0]), unquote(parts[1]))
    if len(parts) == 1 and default_schema:
        return TableId(default_schema, unquote(parts[0]))
    return None


def strip_comments(query: str) -> str:
    """The statement without comments; the text of ``/*! ... */`` version comments is kept,
    as the server executes it."""
    text = _VERSIONED.sub(r" \1 ", query)
    return _LINE.sub(" ", _BLOCK.sub(" ", text)).strip()


def is_dml(query: str) -> bool:
    """Whether a logged statement changes rows (its first word, comments aside)."""
    words = strip_comments(query).split(None, 1)
    return bool(words) and words[0].upper().lstrip("(") in DML_VERBS


def _names_in(references: str, default_schema: str) -> list[TableId]:
    """Every ``[db.]table`` in a table-reference list, leaving out aliases, join words,
    ``ON``/``USING`` conditions and index hints as well as a plain reading can."""
    cleaned = re.sub(r"\((?:[^()]|\([^()]*\))*\)", " ", references)
    cleaned = re.sub(r"\bON\b.*?(?=\bJOIN\b|,|$)", " ", cleaned, flags=re.I | re.S)
    found: list[TableId] = []
    expect_name = True
    for token in re.findall(rf"{_NAME}|,", cleaned):
        word = token.upper()
        if token == ",":
            expect_name = True
            continue
        if word in _NOT_NAMES:
            expect_name = word in {"FROM", "USING", "JOIN", "STRAIGHT_JOIN"}
            continue
        if expect_name:
            table = _table(token, default_schema)
            if table is not None:
                found.append(table)
            expect_name = False
    return found


def dml_targets(query: str, default_schema: str) -> list[TableId] | None:
    """The tables a DML statement may change, or None when ``query`` changes no rows (a
    ``BEGIN``, a DDL, a ``SET``...). A DML whose targets cannot be read at all gives ``[]``:
    the caller must then assume it may touch any table of ``default_schema``."""
    text = strip_comments(query)
    words = text.split(None, 1)
    if not words or words[0].upper() not in DML_VERBS:
        return None
    verb = words[0].upper()
    if verb in ("INSERT", "REPLACE"):
        match = _INTO.match(text)
        table = _table(match.group(1), default_schema) if match else None
        return [table] if table is not None else []
    if verb == "LOAD":
        match = _LOAD.search(text)
        table = _table(match.group(1), default_schema) if match else None
        return [table] if table is not None else []
    form = _UPDATE if verb == "UPDATE" else _DELETE
    match = form.match(text)
    if match is None:
        return []
    return _names_in(match.group(1), default_schema)


#: a DML verb inside a stored program's body; not the string functions ``INSERT(`` and
#: ``REPLACE(``, nor ``ON DUPLICATE KEY UPDATE`` or ``FOR UPDATE``
_BODY_DML = re.compile(
    r"(?<!KEY\s)(?<!FOR\s)\b(?:(?:INSERT|REPLACE)\b(?!\s*\()|UPDATE\b|DELETE\b)", re.I
)
_CALL = re.compile(rf"({IDENT}(?:\s*\.\s*{IDENT})?)\s*\(")


def body_targets(body: str, default_schema: str) -> list[TableId | None]:
    """The tables the DML statements of a trigger's or function's body may change; a None
    for each statement whose targets do not read (it may change any table of the schema)."""
    found: list[TableId | None] = []
    for statement in strip_comments(body).split(";"):
        for verb in _BODY_DML.finditer(statement):
            targets = dml_targets(statement[verb.start() :], default_schema)
            if targets:
                found.extend(targets)
            elif targets is not None:
                found.append(None)
    return found


def called_names(text: str) -> list[str]:
    """Every ``[db.]name`` followed by ``(`` in ``text``: the stored functions it may call
    (with every built-in and keyword the caller then finds no function for)."""
    names = []
    for match in _CALL.finditer(strip_comments(text)):
        names.append(".".join(unquote(part) for part in re.findall(IDENT, match.group(1))))
    return names


#: what a statement's values are written as: quoted strings (either quote, with backslash
#: escapes and doubled quotes), hex and bit literals, numbers; backquoted names are kept
_LITERAL = re.compile(
    r"(`(?:[^`]|``)*`)"
    r"|[xXbB]?'(?:[^'\\]|\\.|'')*'"
    r'|"(?:[^"\\]|\\.|"")*"'
    r"|\b0[xX][0-9a-fA-F]+\b|\b0[bB][01]+\b"
    r"|(?<![\w$.])\d+(?:\.\d*)?(?:[eE][-+]?\d+)?"
)


def without_literals(query: str) -> str:
    """``query`` with each value written in it as ``?``: what a message may quote of a DML
    statement, whose values may be anything a table holds (a column left out of the mirror or
    masked, a password)."""
    return _LITERAL.sub(lambda m: m.group(1) or "?", query)
