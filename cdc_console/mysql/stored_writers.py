"""Which tables the triggers and stored functions of the server may write, and so which
captured tables a statement logged as SQL text may change without naming them.

Under statement logging a replica replays a trigger or a stored function from the outer
statement alone, so no event of the binlog names the table it writes: ``INSERT INTO audit_src
...`` whose trigger inserts into a captured ``orders`` reaches the binlog as that one INSERT.
The reader therefore follows, from the tables a logged DML names, every trigger those tables
fire and every stored function the statement (or a trigger body) calls, to the tables their
bodies write, and holds each captured one.

What the reader knows comes from two places: the server's catalogue
(``information_schema.TRIGGERS`` and ``ROUTINES``), read once per window and only when the
window holds a statement-logged DML, and the ``CREATE TRIGGER``/``CREATE FUNCTION`` statements
of the window itself (created after the catalogue was read). The reading errs towards holding:
a body whose targets do not read, or a called function whose body the capture user may not see,
reaches every captured table. A trigger dropped between the statement and the window's read of
the catalogue, or one the capture user may not see at all (``TRIGGER`` privilege), is not known;
keeping writers on ``binlog_format = ROW`` is the only complete answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cdc_console.core.schema import TableId
from cdc_console.mysql.logged_statements import (
    IDENT,
    body_targets,
    called_names,
    strip_comments,
    unquote,
)

#: Stands for "any captured table": what a body that does not read, or an unseen one, may write.
ANY_TABLE = TableId("*", "*")

_NAME = rf"({IDENT})(?:\s*\.\s*({IDENT}))?"
_DEFINER = r"(?:DEFINER\s*=\s*\S+\s+)?"
_CREATE_TRIGGER = re.compile(
    rf"^CREATE\s+(?:OR\s+REPLACE\s+)?{_DEFINER}TRIGGER\s+(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}\s+"
    rf"(?:BEFORE|AFTER)\s+(?:INSERT|UPDATE|DELETE)\s+ON\s+{_NAME}\s+FOR\s+EACH\s+ROW\s+"
    rf"(?:(?:FOLLOWS|PRECEDES)\s+{IDENT}\s+)?(.*)$",
    re.I | re.S,
)
_CREATE_FUNCTION = re.compile(
    rf"^CREATE\s+(?:OR\s+REPLACE\s+)?{_DEFINER}(?:AGGREGATE\s+)?FUNCTION\s+"
    rf"(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}\s*\((.*)$",
    re.I | re.S,
)


def _qualified(first: str, second: str | None, default_schema: str) -> tuple[str, str]:
    if second:
        return unquote(first), unquote(second)
    return default_schema, unquote(first)


@dataclass
class StoredWriters:
    #: a table -> for each of its triggers, what its body writes and the names it calls
    triggers: dict[TableId, list[tuple[frozenset[TableId], frozenset[str]]]] = field(
        default_factory=dict
    )
    #: ``db.name`` of a stored function, lower case -> what its body writes and calls; None
    #: where the capture user may not read the body
    functions: dict[str, tuple[frozenset[TableId], frozenset[str]] | None] = field(
        default_factory=dict
    )

    def add_trigger(self, on: TableId, body: str, schema: str) -> None:
        self.triggers.setdefault(on, []).append(_reach_of(body, schema))

    def add_function(self, schema: str, name: str, body: str | None) -> None:
        key = f"{schema}.{name}".lower()
        self.functions[key] = None if body is None else _reach_of(body, schema)

    def learn(self, query: str, default_schema: str) -> None:
        """Take in a ``CREATE TRIGGER`` or ``CREATE FUNCTION`` read from the binlog."""
        text = strip_comments(query)
        trigger = _CREATE_TRIGGER.match(text)
        if trigger is not None:
            schema, _ = _qualified(trigger.group(1), trigger.group(2), default_schema)
            on = TableId(*_qualified(trigger.group(3), trigger.group(4), schema))
            self.add_trigger(on, trigger.group(5), schema)
            return
        function = _CREATE_FUNCTION.match(text)
        if function is not None:
            schema, name = _qualified(function.group(1), function.group(2), default_schema)
            self.add_function(schema, name, function.group(3))

    def reached(self, targets: Iterable[TableId], query: str, default_schema: str) -> set[TableId]:
        """The tables written, beyond ``targets``, by the triggers ``targets`` fire and the
        functions ``query`` calls, followed through every body they lead to. ``ANY_TABLE`` in
        the answer means "it cannot be told which"."""
        found: set[TableId] = set()
        tables = list(targets)
        calls = [(name, default_schema) for name in called_names(query)]
        seen_tables: set[TableId] = set()
        seen_calls: set[str] = set()
        while tables or calls:
            if tables:
                table = tables.pop()
                if table in seen_tables:
                    continue
                seen_tables.add(table)
                for written, called in self.triggers.get(table, ()):
                    found |= written
                    tables.extend(written)
                    calls.extend((name, table.database) for name in called)
                continue
            name, schema = calls.pop()
            key = name.lower() if "." in name else f"{schema}.{name}".lower()
            if key in seen_calls or key not in self.functions:
                continue
            seen_calls.add(key)
            reach = self.functions[key]
            if reach is None:
                found.add(ANY_TABLE)
                continue
            written, called = reach
            found |= written
            tables.extend(written)
            calls.extend((inner, key.split(".", 1)[0]) for inner in called)
        return found


def captured_in(found: set[TableId], wanted: Iterable[TableId]) -> list[TableId]:
    """The captured tables among ``found``, where ``db.*`` stands for every table of ``db`` and
    ``ANY_TABLE`` for every table."""
    if ANY_TABLE in found:
        return sorted(wanted)
    return sorted(t for t in wanted if t in found or TableId(t.database, "*") in found)


class WindowWriters:
    """The stored writers one binlog window goes by: the catalogue, read the first time a
    statement-logged DML asks, and what the window's own ``CREATE`` statements added."""

    def __init__(self, load: Callable[[], StoredWriters]) -> None:
        self._load = load
        self._catalogue: StoredWriters | None = None
        self.learned = StoredWriters()

    def reached(self, targets: Iterable[TableId], query: str, default_schema: str) -> set[TableId]:
        if self._catalogue is None:
            self._catalogue = self._load()
        both = StoredWriters(
            {**self._catalogue.triggers},
            {**self._catalogue.functions, **self.learned.functions},
        )
        for table, bodies in self.learned.triggers.items():
            both.triggers[table] = [*both.triggers.get(table, []), *bodies]
        return both.reached(targets, query, default_schema)


def _reach_of(body: str, schema: str) -> tuple[frozenset[TableId], frozenset[str]]:
    targets = body_targets(body, schema)
    written = frozenset(TableId(schema, "*") if t is None else t for t in targets)
    return written, frozenset(called_names(body))


TRIGGERS_SQL = (
    "SELECT TRIGGER_SCHEMA, EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, ACTION_STATEMENT "
    "FROM information_schema.TRIGGERS"
)
FUNCTIONS_SQL = (
    "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_DEFINITION FROM information_schema.ROUTINES "
    "WHERE ROUTINE_TYPE = 'FUNCTION'"
)


def stored_writers_of(
    triggers: Iterable[tuple[object, ...]], functions: Iterable[tuple[object, ...]]
) -> StoredWriters:
    """A ``StoredWriters`` from the rows of ``TRIGGERS_SQL`` and ``FUNCTIONS_SQL``."""
    writers = StoredWriters()
    for schema, on_schema, on_table, body in triggers:
        writers.add_trigger(TableId(str(on_schema), str(on_table)), str(body), str(schema))
    for schema, name, body in functions:
        writers.add_function(str(schema), str(name), None if body is None else str(body))
    return writers
