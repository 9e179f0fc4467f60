"""One module per CLI sub-command; each exposes ``register(subparsers)``.

Keeping commands apart keeps ``cli.py`` a thin dispatcher rather than a god object.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from cdc_console.config import PipelineConfig
    from cdc_console.state.store import StateStore

#: What ``ArgumentParser.add_subparsers`` returns, which each command's ``register`` adds to.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def writable_state(config: PipelineConfig) -> StateStore:
    """The state database a command queues into: never migrated when it exists (a newer CLI
    must not change it under an older running job: a version it does not know is refused), and
    made afresh when the pipeline never ran (the job applies the command when it first starts)."""
    from cdc_console.state.store import StateStore

    if config.state_path.exists():
        return StateStore.open_existing(config.state_path)
    return StateStore(config.state_path)


def existing_state(
    config: PipelineConfig, config_arg: str, *, read_only: bool = False
) -> StateStore:
    """The pipeline's state database as the job left it (never migrated), or the error a
    command that reads it gives when the pipeline never ran."""
    from cdc_console.errors import CdcError
    from cdc_console.state.store import StateStore

    try:
        return StateStore.open_existing(config.state_path, read_only=read_only)
    except FileNotFoundError:
        raise CdcError(
            f"no state at {config.state_path}: the pipeline has not run yet",
            f"start it with 'cdc-console run --config {config_arg}'",
        ) from None


TABLE_HELP = "db.table (a part holding a dot in backticks: `db.1`.orders)"


def table_name(text: str) -> str:
    """A ``--table`` argument in the spelling the pipeline names its tables by."""
    from cdc_console.core.schema import TableId

    try:
        return str(TableId.parse(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
