"""``ChangeRecord.to_dict`` is hand-written for speed; it must stay the dataclass's fields."""

from __future__ import annotations

from dataclasses import asdict

from cdc_console.core.records import FIELD_NAMES, ChangeRecord


def test_to_dict_matches_the_fields_in_order() -> None:
    record = ChangeRecord("shop", "orders", "+U", "[1]", '{"id":1}', 3, 120, 0, 2, 7, 99, "")
    assert record.to_dict() == asdict(record)
    assert tuple(record.to_dict()) == FIELD_NAMES
    assert ChangeRecord.from_dict(record.to_dict()) == record
