"""The screens worth a picture: shared by the SVG snapshot tests and the screenshot exporter."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from textual.pilot import Pilot

from cdc_console.state.store import StateStore, VerifyProgress
from cdc_console.tui.app import ConsoleApp
from tests.tui.canned import NOW, CannedServer, canned_pipeline
from tests.tui.driving import settle

SNAPSHOT_SIZE = (150, 42)

#: 12 of 40 chunks compared, in three groups of four over the last 90 s
VERIFYING = VerifyProgress(
    os.getpid(),
    NOW - 90.0,
    40,
    ((4, NOW - 90.0, NOW - 60.0), (4, NOW - 60.0, NOW - 30.0), (4, NOW - 30.0, NOW)),
)


@dataclass(frozen=True)
class Scenario:
    name: str
    screen: str
    press: tuple[str, ...] = ()
    server_error: str | None = None
    with_state: bool = True
    #: server binlog settings the job found unsafe: (name, value, expected)
    unsafe_settings: tuple[tuple[str, str, str], ...] = ()
    #: why the job's chunk reads yield to a busy source
    throttled: str | None = None
    #: a verification under way (this process runs it, so it is alive)
    verifying: bool = False

    def app(self, directory: Path) -> ConsoleApp:
        server = CannedServer(error=self.server_error) if self.server_error else None
        monitor = canned_pipeline(directory, server=server, with_state=self.with_state)
        if self.unsafe_settings or self.throttled or self.verifying:
            store = StateStore(monitor.config.state_path)
            for name, value, expected in self.unsafe_settings:
                store.record_source_setting(name, value, expected, False)
            store.record_throttled(self.throttled)
            if self.verifying:
                store.save_verify_progress(VERIFYING)
            store.close()
        return ConsoleApp([monitor], first_screen=self.screen)

    async def prepare(self, pilot: Pilot[None]) -> None:
        await settle(pilot, 3)
        if self.press:
            await pilot.press(*self.press)
            await settle(pilot, 2)


SCENARIOS = (
    Scenario("tables", "tables"),
    Scenario("jobs", "jobs"),
    Scenario("binlog", "binlog"),
    Scenario("events", "events"),
    Scenario("redump-confirm", "tables", press=("d",)),
    Scenario(
        "binlog-server-unreachable",
        "binlog",
        server_error="cannot reach the source server at 127.0.0.1:3306: Connection refused",
    ),
    Scenario("tables-never-ran", "tables", with_state=False),
    # a writer's server setting changed under the job: the top bar says which, on every screen
    Scenario(
        "binlog-unsafe-setting",
        "binlog",
        unsafe_settings=(("binlog_row_image", "MINIMAL", "FULL"),),
    ),
    # the source is busy: the job's chunk reads wait, the stream does not
    Scenario("tables-reads-yield", "tables", throttled="Threads_running 61 > 50"),
    # a verification compared 12 of 40 chunks in its first 90 s: 210 s left at that pace
    Scenario("tables-verifying", "tables", verifying=True),
    Scenario("help", "tables", press=("question_mark",)),
    # up up: shop.customers (12 splits, so each key is quick); "/ing" keeps the tables whose
    # state or note says so; o x7 then O: by lag, longest first, tables without one last
    Scenario(
        "tables-filtered-sorted",
        "tables",
        press=("up", "up", "slash", *"ing", "enter", *"o" * 7, "O"),
    ),
)
