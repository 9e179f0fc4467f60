"""The SQL text of delta-rs MERGEs: quoted column names, key predicates, assignments.

delta-rs parses predicates and assignments with DataFusion's SQL parser, which takes a double-
quoted identifier with ``""`` for a quote inside it, keeps case and spaces, and accepts any other
character (a backtick, a dot). Its ``when_matched_update_all``/``when_not_matched_insert_all``
build their own expressions and break on a backtick, so assignments are spelled out here.
"""

from __future__ import annotations

from collections.abc import Sequence

from cdc_console.core.schema import TableSchema


def quote(name: str) -> str:
    """A column name for a DataFusion predicate or assignment."""
    return '"' + name.replace('"', '""') + '"'


def key_predicate(schema: TableSchema, names: Sequence[str]) -> str:
    """Target ``t`` matches source ``s`` on ``names``; a nullable column matches NULL to NULL.
    Each term is parenthesised: DataFusion binds ``IS NOT DISTINCT FROM`` more loosely than
    ``AND``."""
    terms = []
    for name in names:
        equal = "IS NOT DISTINCT FROM" if schema.column(name).nullable else "="
        terms.append(f"(t.{quote(name)} {equal} s.{quote(name)})")
    return " AND ".join(terms)


def assignments(names: Sequence[str]) -> dict[str, str]:
    """``target column: source column`` for each of ``names``."""
    return {quote(name): f"s.{quote(name)}" for name in names}
