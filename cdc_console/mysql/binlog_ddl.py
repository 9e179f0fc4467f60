"""Which captured tables a statement in the binlog changes the shape of.

Only the table-name positions of each DDL form are read, so a column named like a captured
table (``ALTER TABLE audit ADD COLUMN orders INT``) does not count.
"""

from __future__ import annotations

import re

from pymysqlreplication.event import QueryEvent

from cdc_console.core.offset import BinlogOffset
from cdc_console.core.schema import TableId
from cdc_console.errors import SchemaChangedError

_IDENT = r"(?:`(?:[^`]|``)+`|[\w$]+)"


_NAME = rf"{_IDENT}(?:\s*\.\s*{_IDENT})?"


# Each table-DDL form with the part of the statement that lists the tables it changes.
_DDL_FORMS = [
    re.compile(rf"^\s*ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:IF\s+EXISTS\s+)?({_NAME})", re.I),
    re.compile(rf"^\s*TRUNCATE\s+(?:TABLE\s+)?({_NAME})", re.I),
    re.compile(
        rf"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMPORARY\s+)?TABLE\s+"
        rf"(?:IF\s+NOT\s+EXISTS\s+)?({_NAME})",
        re.I,
    ),
    re.compile(
        rf"^\s*DROP\s+(?:TEMPORARY\s+)?TABLE\s+(?:IF\s+EXISTS\s+)?"
        rf"((?:{_NAME})(?:\s*,\s*{_NAME})*)",
        re.I,
    ),
    re.compile(
        rf"^\s*RENAME\s+TABLES?\s+((?:{_NAME})\s+TO\s+(?:{_NAME})"
        rf"(?:\s*,\s*(?:{_NAME})\s+TO\s+(?:{_NAME}))*)",
        re.I,
    ),
]


def ddl_targets(query: str, default_schema: str) -> list[TableId] | None:
    """The tables a table-DDL statement changes, or None when it is not table DDL.

    Only the table-name positions of each form are read, so a column named like a captured
    table (``ALTER TABLE audit ADD COLUMN orders INT``) does not count.
    """
    for form in _DDL_FORMS:
        match = form.match(query)
        if match is None:
            continue
        names = re.findall(rf"({_IDENT})(?:\s*\.\s*({_IDENT}))?", match.group(1))
        targets = []
        for first, second in names:
            if first.upper() == "TO" and not second:
                continue
            if second:
                targets.append(TableId(_unquote(first), _unquote(second)))
            else:
                targets.append(TableId(default_schema, _unquote(first)))
        return targets
    return None


def _unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def query_text(event: QueryEvent) -> tuple[str, str]:
    query = (
        event.query
        if isinstance(event.query, str)
        else bytes(event.query).decode("utf-8", "replace")
    )
    schema = event.schema.decode() if isinstance(event.schema, bytes) else str(event.schema)
    return query, schema


def check_ddl(event: QueryEvent, wanted: set[TableId], position: BinlogOffset) -> None:
    query, schema = query_text(event)
    targets = ddl_targets(query, schema)
    if not targets:
        return
    hit = [t for t in targets if t in wanted]
    if hit:
        raise SchemaChangedError(
            f"DDL on captured table {hit[0]} at {position}: {query.strip()[:200]}",
            f"the pipeline stopped before {position} so no row was written with the wrong "
            f"schema; re-snapshot the table once the change is done "
            f"('cdc-console redump --table {hit[0]}') or remove it from source.tables",
            tables=tuple(hit),
            statement=" ".join(query.split())[:300],
        )
