"""The streaming source runner leaves quietly when the JVM hangs up on it, and only then."""

from __future__ import annotations

import pytest

from cdc_console.spark import datasource
from cdc_console.spark.datasource import CdcStreamReader


class Exited(BaseException):
    """What the patched ``os._exit`` raises, so the test sees the exit and goes on."""


@pytest.fixture
def exits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    codes: list[int] = []

    def fake_exit(code: int) -> None:
        codes.append(code)
        raise Exited

    monkeypatch.setattr(datasource.os, "_exit", fake_exit)
    return codes


def test_a_stop_while_the_jvms_socket_reads_eof_ends_the_runner_at_once(exits: list[int]) -> None:
    reader = CdcStreamReader("unused.toml")
    with pytest.raises(Exited):
        try:
            raise EOFError  # the runner's read_int on the closed socket
        finally:
            reader.stop()
    assert exits == [0]


@pytest.mark.parametrize("in_flight", [None, RuntimeError("a real failure")])
def test_any_other_stop_returns_to_the_runner(
    exits: list[int], in_flight: BaseException | None
) -> None:
    reader = CdcStreamReader("unused.toml")
    if in_flight is None:
        reader.stop()
    else:
        with pytest.raises(RuntimeError):
            try:
                raise in_flight
            finally:
                reader.stop()
    assert exits == []
