"""Every command explains itself: a description, examples where they help, ``-v`` anywhere."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pytest

from cdc_console.cli import build_parser
from cdc_console.logs import logging_to

#: commands a person runs by hand with arguments to get right: each shows examples
WITH_EXAMPLES = {
    "run",
    "status",
    "verify",
    "pause",
    "resume",
    "redump",
    "add-table",
    "remove-table",
    "stop",
}


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    found = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(found.choices)


def test_every_command_has_a_description_and_the_hand_run_ones_examples() -> None:
    for name, parser in commands().items():
        text = parser.format_help()
        assert parser.description, f"{name} has no description"
        if name in WITH_EXAMPLES:
            assert "examples:" in text and f"cdc-console {name} " in text, name


@pytest.mark.parametrize(
    "argv",
    [
        ["-v", "status", "--config", "x"],
        ["status", "--config", "x", "-v"],
        ["bench", "snapshot", "--rows", "1", "-v"],
        ["lake", "status", "--config", "x", "-v"],
    ],
)
def test_verbose_goes_before_or_after_any_command(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).verbose is True


def test_the_console_log_dates_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "console.log"
    with logging_to(path):
        logging.getLogger("cdc_console.test").warning("a line")
    line = path.read_text().splitlines()[0]
    assert line[:4].isdigit() and line[4] == "-" and line[7] == "-", line
