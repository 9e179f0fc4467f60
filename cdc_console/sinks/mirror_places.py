"""Where each table's mirror is, kept in the state, so a mirror is never silently left behind.

``[sink] mirrors`` places a table's mirror (and its change feed) by name. Changed for a table
already captured, the job would look for the mirror at its new place, find none, and start an
empty one there with only the changes from then on, while the rows stay in the old folder. So
the place each table was mirrored at is recorded when the job starts, and a start that would
move it refuses, naming the folders to move (a move with the job stopped is all it takes: the
Delta log holds relative paths).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from cdc_console.core.lifecycle import CommandKind
from cdc_console.core.schema import TableId
from cdc_console.errors import ConfigError
from cdc_console.sinks.lake_layout import (
    CHANGELOG_DIR,
    MirrorNames,
    changelog_path,
    mirror_path,
    routed,
)
from cdc_console.state.store import StateStore

#: state meta key: ``{"db.t": "place/name"}``, relative to the lake's root
PLACES_KEY = "mirror_places"
#: state meta key: the tables whose mirror rows carry their origin (``TableSchema.routed``)
ROUTED_KEY = "mirror_routed"


def check_mirror_places(
    store: StateStore, root: Path, names: MirrorNames, tables: Iterable[TableId]
) -> None:
    """Refuse a start that would look for a table's mirror anywhere but where it is; then
    record where each one is. A table recorded nowhere yet (a state from before the record)
    is taken to be at its own ``db/t``, if a mirror is there.

    A table routed into a shared mirror, or out of one (``[sink] mirrors`` patterns), keys its
    rows with or without their origin: its old rows cannot serve, so it starts only with a
    re-dump of it queued, which reads it again into its new place."""
    recorded: dict[str, str] = json.loads(store.get_meta(PLACES_KEY) or "{}")
    was_routed = set(json.loads(store.get_meta(ROUTED_KEY) or "[]"))
    redumps = {
        c.target
        for c in store.pending_commands()
        if c.kind == CommandKind.REDUMP and c.target and "chunk" not in c.args
    }
    places: dict[str, str] = {}
    now_routed: set[str] = set()
    holders: dict[Path, TableId] = {}
    for table_id in tables:
        now = mirror_path(root, table_id, names)
        other = holders.setdefault(now, table_id)
        if other != table_id and not (routed(names, other) and routed(names, table_id)):
            raise ConfigError(
                f"{other} and {table_id} would both be mirrored at {now}: a mirror holds one "
                "table, or the tables one pattern routes there",
                "give one of them another place in [sink] mirrors",
            )
        default = mirror_path(root, table_id)
        was_text = recorded.get(str(table_id))
        was = root / was_text if was_text is not None else default
        is_routed = routed(names, table_id)
        if is_routed:
            now_routed.add(str(table_id))
        held = (was / "_delta_log").is_dir()
        if is_routed != (str(table_id) in was_routed) and held:
            _check_rerouted(table_id, was, now, is_routed, str(table_id) in redumps)
        elif was != now and held:
            old_feed = root / CHANGELOG_DIR / was.relative_to(root)
            raise ConfigError(
                f"the mirror of {table_id} is at {was}, but [sink] mirrors now places it at {now}",
                f"with the job stopped, move {was} to {now} (and its change feed {old_feed} "
                f"to {changelog_path(root, table_id, names)}), or set the mirror's place back",
            )
        places[str(table_id)] = now.relative_to(root).as_posix()
    if places != recorded:
        store.set_meta(PLACES_KEY, json.dumps(places, sort_keys=True))
    if now_routed != was_routed:
        store.set_meta(ROUTED_KEY, json.dumps(sorted(now_routed)))


def _check_rerouted(
    table_id: TableId, was: Path, now: Path, is_routed: bool, redump_queued: bool
) -> None:
    """Refuse to start a table routed into a shared mirror (or out of one) unless a re-dump
    of it is queued, and never into a folder still holding its rows in the old shape."""
    change = f"routed into the mirror shared at {now}" if is_routed else f"no longer routed ({now})"
    shape = "without" if is_routed else "with"
    fix = (
        f"with the job stopped, run 'cdc-console redump --table {table_id}' (it is queued for "
        "the next start, which reads the table again into its new place)"
    )
    if was == now:
        raise ConfigError(
            f"{table_id} is now {change}, but {was} still holds its rows {shape} the origin "
            "columns (_cdc_database, _cdc_table) a shared mirror is keyed on",
            f"with the job stopped, move {was} aside (the new mirror must not hold its old "
            f"rows), then {fix.removeprefix('with the job stopped, ')}",
        )
    if not redump_queued:
        left = (
            f"its old rows stay in {was} under their origin until deleted"
            if not is_routed
            else f"its old mirror stays at {was} until removed"
        )
        raise ConfigError(
            f"{table_id} is now {change}: its rows there must be read again ({left})",
            f"{fix}; or set [sink] mirrors back",
        )
