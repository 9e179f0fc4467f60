"""Masked columns (``[pipeline] mask_columns``, ``core.masks``): a keyed hash or a redaction,
the same on both paths, never the key in the schema, and a changed key reads the table again."""

from __future__ import annotations

import hashlib
import hmac
import json
import textwrap
from pathlib import Path

import pytest

from cdc_console.config import load_config
from cdc_console.core.masks import REDACTED, MaskKeyMismatch, MaskKind
from cdc_console.core.schema import (
    ColumnInfo,
    TableId,
    TableSchema,
    schema_from_dict,
    schema_to_dict,
)
from cdc_console.errors import ConfigError
from cdc_console.mysql.probe import with_masks
from cdc_console.source.evolution import Reread, reshaped_unseen
from cdc_console.values.canonical import RowNormalizer

KEY_ENV = "CDC_TEST_MASK_KEY"
KEY = "a long random secret"
CUSTOMERS = TableId("shop", "customers")
COLUMNS = (
    ColumnInfo("id", "int", "int(11)", nullable=False),
    ColumnInfo("Email", "varchar", "varchar(80)"),
    ColumnInfo("phone", "char", "char(12)"),
    ColumnInfo("born", "date", "date"),
)
WHOLE = TableSchema(CUSTOMERS, COLUMNS, ("id",), "id")
RULES = {"shop.*": {"email": MaskKind.SHA256}, "shop.customers": {"phone": MaskKind.REDACT}}


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def keyed(text: str, key: str = KEY) -> str:
    return hmac.new(key.encode(), text.encode(), hashlib.sha256).hexdigest()


def test_a_masked_column_is_hashed_with_the_key_alike_on_both_paths() -> None:
    schema = with_masks(WHOLE, RULES, KEY_ENV)
    normalizer = RowNormalizer(schema)
    snapshot = normalizer.snapshot_row((1, "a@example.com", "+1 555 0100", None))
    binlog = normalizer.binlog_row(
        {"id": 1, "Email": "a@example.com", "phone": "+1 555 0100", "born": None}
    )
    assert (
        snapshot
        == binlog
        == {
            "id": 1,
            "Email": keyed("a@example.com"),
            "phone": REDACTED,
            "born": None,
        }
    )
    # NULL stays NULL; a partial image masks what it holds
    assert normalizer.binlog_columns({"id": 2, "Email": None}) == {"id": 2, "Email": None}
    # the schema names the key's variable and a check of it, never the key
    stored = schema_to_dict(schema)
    assert KEY not in json.dumps(stored)
    assert schema_from_dict(stored) == schema


def test_a_mask_needs_its_key_a_character_column_and_no_key_column(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ConfigError) as info:
        with_masks(WHOLE, RULES, KEY_ENV)
    assert f"${KEY_ENV} (its key) is not set" in str(info.value)
    assert f"export {KEY_ENV}=" in str(info.value)
    # a redaction needs no key
    redacted = with_masks(WHOLE, {"shop.customers": {"phone": MaskKind.REDACT}}, KEY_ENV)
    assert [c.mask is not None for c in redacted.columns] == [False, False, True, False]
    for rule, message in (
        ({"id": MaskKind.REDACT}, "masks id of shop.customers, which tells its rows apart"),
        ({"born": MaskKind.REDACT}, "a date column: only character columns are masked"),
    ):
        with pytest.raises(ConfigError) as info:
            with_masks(WHOLE, {"shop.customers": rule}, KEY_ENV)
        assert message in str(info.value)


def test_a_new_key_reads_the_table_again(monkeypatch: pytest.MonkeyPatch) -> None:
    before = with_masks(WHOLE, RULES, KEY_ENV)
    monkeypatch.setenv(KEY_ENV, "another secret")
    after = with_masks(WHOLE, RULES, KEY_ENV)
    assert RowNormalizer(after).snapshot_row((1, "a@b", None, None))["Email"] == keyed(
        "a@b", "another secret"
    )
    outcome = reshaped_unseen(before, after)
    assert isinstance(outcome, Reread)
    assert outcome.reason.startswith(
        f"pipeline.mask_columns changed for column Email sha256 (key ${KEY_ENV}) "
    )
    unmasked = reshaped_unseen(before, WHOLE)
    assert isinstance(unmasked, Reread) and "phone redact -> unmasked" in unmasked.reason


def test_the_config_names_a_wrong_mask(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.toml"
    path.write_text(
        '[source]\ntables = ["shop.*"]\n[pipeline]\n'
        + textwrap.dedent('mask_columns = { "shop.customers" = { email = "md5" } }\n')
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert 'pipeline.mask_columns."shop.customers".email must be one of "sha256", "redact"' in str(
        info.value
    )
    path.write_text(
        '[source]\ntables = ["shop.*"]\n[pipeline]\n'
        'mask_columns = { "shop.c*" = { email = "sha256" } }\nmask_key_env = "K"\n'
    )
    loaded = load_config(path)
    assert loaded.mask_columns == {"shop.c*": {"email": MaskKind.SHA256}}
    assert loaded.mask_key_env == "K"


def test_a_key_other_than_the_columns_is_refused_where_values_are_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a column of its own: a process builds each column's converters once
    contact = TableSchema(
        CUSTOMERS, (COLUMNS[0], ColumnInfo("contact", "text", "text")), ("id",), "id"
    )
    schema = with_masks(contact, {"shop.customers": {"contact": MaskKind.SHA256}}, KEY_ENV)
    monkeypatch.setenv(KEY_ENV, "not the key the schema was masked with")
    with pytest.raises(MaskKeyMismatch) as info:
        RowNormalizer(schema).snapshot_row((1, "a@b"))
    assert f"${KEY_ENV} here is not the key the column was masked with" in str(info.value)


def test_a_keyless_tables_columns_can_be_masked_and_a_misspelt_one_is_refused() -> None:
    counted = TableSchema(CUSTOMERS, COLUMNS, (), "id", counted=True)
    masked = with_masks(counted, {"shop.customers": {"email": MaskKind.SHA256}}, KEY_ENV)
    assert masked.columns[1].mask is not None
    with pytest.raises(ConfigError) as info:
        with_masks(WHOLE, {"shop.customers": {"e_mail": MaskKind.REDACT}}, KEY_ENV)
    assert "names e_mail of shop.customers, which has no such column" in str(info.value)
