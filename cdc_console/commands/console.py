"""``cdc-console console [--config F ...]``: the operations console over one or more pipelines.

Plain ``cdc-console`` opens it too when it can find configs without being told: the paths in
``$CDC_CONSOLE_CONFIG`` (separated by ``:``), else the demo's ``.demo/pipeline.toml`` in the
working directory. The console's own log goes to ``console.log`` beside the first pipeline's
state, since the terminal belongs to the screen.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from cdc_console.commands import Subparsers
from cdc_console.errors import UsageError
from cdc_console.logs import logging_to

CONFIG_ENV = "CDC_CONSOLE_CONFIG"
DEMO_CONFIG = Path(".demo") / "pipeline.toml"
SCREENS = ("jobs", "tables", "binlog", "events")


def register(subparsers: Subparsers) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "console",
        help="the operations console: watch and steer pipelines (the default command)",
        description="Jobs, tables, splits, binlog and events of each pipeline, live; pause, "
        "resume, re-dump, start and stop from the keyboard or the command palette (Ctrl+P).",
    )
    parser.add_argument(
        "--config",
        action="append",
        help=f"pipeline TOML file; repeat for several (default: ${CONFIG_ENV}, or {DEMO_CONFIG})",
    )
    parser.add_argument("--screen", choices=SCREENS, default="tables", help="screen to open on")
    parser.set_defaults(handler=handle)


def discover_configs(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> list[str]:
    """Configs to open when none were named: ``$CDC_CONSOLE_CONFIG``, else the demo's."""
    env = os.environ if env is None else env
    listed = [p for p in env.get(CONFIG_ENV, "").split(os.pathsep) if p.strip()]
    if listed:
        return listed
    demo = (cwd or Path.cwd()) / DEMO_CONFIG
    return [str(demo)] if demo.is_file() else []


def handle(args: argparse.Namespace) -> int:
    paths = args.config or discover_configs()
    if not paths:
        raise UsageError(
            "no pipeline config to watch",
            f"pass --config F (repeatable), set {CONFIG_ENV}=F[:G], or run 'cdc-console demo'",
        )
    return run_console(paths, args.screen)


def run_console(paths: Sequence[str], screen: str = "tables") -> int:
    from cdc_console.tui.app import ConsoleApp

    app = ConsoleApp(config_paths=paths, first_screen=screen)
    first = next(iter(app.monitors.values()))
    with logging_to(first.config.state_path.parent / "console.log"):
        app.run()
    return 0
