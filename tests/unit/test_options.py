"""The option table (``core.options``) is the one statement of every config key: the parser
knows exactly its keys, each config dataclass's defaults are the table's, and the README's
reference, ``docs/console.md`` and ``jobs/example.toml`` say what it says."""

from __future__ import annotations

import re
import tomllib
from dataclasses import MISSING, fields, replace
from pathlib import Path
from typing import Any

import pytest

from cdc_console.config import (
    ConsoleConfig,
    LakeConfig,
    MetricsConfig,
    PipelineConfig,
    SinkConfig,
    SnapshotConfig,
    SourceConfig,
    SparkConfig,
    TablePattern,
    VerifyConfig,
    config_from_dict,
    load_config,
)
from cdc_console.core.options import (
    OPTIONS,
    SECTIONS,
    Kind,
    Option,
    option,
    reference,
    toml_text,
)
from cdc_console.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = {"source": {"tables": ["shop.orders"]}}


def test_the_readme_reference_is_the_option_table() -> None:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Config reference\n\n```toml\n(.*?)```", text, re.S)
    assert block is not None
    assert block.group(1) == reference(), (
        "the README's config reference differs from core/options.py: paste "
        "`python -c 'from cdc_console.core.options import reference; print(reference(), end=\"\")'`"
    )


def test_the_reference_is_a_config_that_loads_with_every_key_it_shows() -> None:
    doc = tomllib.loads(reference())
    shown = {(s, k) for s, section in doc.items() if isinstance(section, dict) for k in section}
    listed = {(o.section, o.key) for o in OPTIONS if o.listed and not o.commented and o.section}
    assert shown == listed
    config_from_dict(doc)


def test_a_config_without_keys_holds_every_dataclass_default() -> None:
    config = config_from_dict(MINIMAL)
    assert config.source == replace(SourceConfig(), tables=(TablePattern("shop", "orders"),))
    assert config.snapshot == SnapshotConfig()
    assert config.sink == SinkConfig()
    assert config.lake == LakeConfig()
    assert config.spark == SparkConfig()
    assert config.console == ConsoleConfig()
    assert config.verify == VerifyConfig()
    assert config.metrics == MetricsConfig()
    for field_ in fields(PipelineConfig):
        if field_.default is not MISSING:
            assert getattr(config, field_.name) == field_.default, field_.name


def with_key(section: str, key: str, value: object) -> dict[str, Any]:
    """The minimal config with ``[section] key = value``."""
    doc: dict[str, Any] = {name: dict(keys) for name, keys in MINIMAL.items()}
    if section:
        doc.setdefault(section, {})[key] = value
    else:
        doc[key] = value
    return doc


PLAIN = [o for o in OPTIONS if o.kind is not Kind.RULES and o.default is not None]


@pytest.mark.parametrize("opt", PLAIN, ids=[o.where for o in PLAIN])
def test_every_plain_key_written_with_its_default_changes_nothing(opt: Option) -> None:
    assert config_from_dict(with_key(opt.section, opt.key, opt.default)) == config_from_dict(
        MINIMAL
    )


def test_choices_are_enums_whose_words_the_errors_list() -> None:
    for opt in OPTIONS:
        if opt.kind is Kind.CHOICE:
            assert opt.choices is not None and opt.default in set(opt.choices), opt.where
            with pytest.raises(ConfigError) as info:
                config_from_dict(with_key(opt.section, opt.key, "nonsense"))
            assert f"{opt.where} 'nonsense' is not one of {', '.join(opt.choices)}" in str(
                info.value
            )
        else:
            assert opt.choices is None, opt.where


def test_ranges_are_checked_with_the_option_named() -> None:
    for opt in OPTIONS:
        bound = opt.above if opt.above is not None else opt.at_least
        if bound is None or opt.kind in (Kind.SIZE, Kind.DURATION):
            continue
        low = bound - 1 if opt.at_least is not None else bound
        with pytest.raises(ConfigError) as info:
            config_from_dict(with_key(opt.section, opt.key, low))
        assert str(info.value).startswith(opt.where), (opt.where, str(info.value))


def test_docs_console_lists_every_console_key_with_its_default() -> None:
    text = (ROOT / "docs" / "console.md").read_text()
    for opt in OPTIONS:
        if opt.section == "console" and opt.default is not None:
            value = opt.default
            assert isinstance(value, int | float)
            assert re.search(rf"^{opt.key} = {value:g}\b", text, re.M), opt.key


def test_the_example_job_loads_and_sets_only_known_keys() -> None:
    config = load_config(ROOT / "jobs" / "example.toml")
    assert config.sink.kind == option("sink", "kind").default


def test_every_section_is_declared_once_and_every_option_has_a_section() -> None:
    assert {o.section for o in OPTIONS} == {"", *SECTIONS}
    assert len({(o.section, o.key) for o in OPTIONS}) == len(OPTIONS)
    assert toml_text(["a", 'b"']) == '["a", "b\\""]'
