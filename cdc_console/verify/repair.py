"""Repairing what a verification found: re-read each differing chunk, then verify it again.

A differing chunk is re-dumped through the running job's own command queue (``redump --chunk
N``, exactly as an operator would queue it): the job re-reads the chunk at a new high watermark,
replaces its key range in the mirror in one commit and lets the chunk's keys rejoin the stream
from that watermark. Nothing is written to the mirror from here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from cdc_console.config import PipelineConfig
from cdc_console.core.lifecycle import CommandKind, CommandStatus, Lifecycle
from cdc_console.errors import CdcError
from cdc_console.launcher import job_alive
from cdc_console.source.control import refusal
from cdc_console.state.store import StateStore
from cdc_console.verify.report import TableResult, VerifyReport
from cdc_console.verify.verifier import Verifier

POLL_SECONDS = 0.5


@dataclass
class RepairOutcome:
    before: VerifyReport
    #: "db.table chunk N" for each chunk queued for re-dump
    repaired: list[str] = field(default_factory=list)
    after: VerifyReport | None = None

    @property
    def exit_code(self) -> int:
        return (self.after or self.before).exit_code


def repair(
    config: PipelineConfig,
    store: StateStore,
    verifier: Verifier,
    before: VerifyReport,
    timeout: float,
    issued_by: str = "verify",
) -> RepairOutcome:
    """Queue a chunk re-dump for every differing chunk of ``before``, wait for the job to finish
    them, and verify those chunks again."""
    outcome = RepairOutcome(before)
    targets = [(t, c.split_no) for t in before.tables for c in t.differing_chunks()]
    if not targets:
        return outcome
    if not job_alive(config):
        raise CdcError(
            "--repair re-reads chunks through the running job, and no job is running",
            f"start it ('cdc-console run --config {config.path}') and run verify --repair again",
        )
    commands = []
    for table, chunk in targets:
        args: dict[str, int] = {"chunk": chunk}
        target = str(table.table_id)
        reason = refusal(CommandKind.REDUMP, target, dict(args), store.tables(), False)
        if reason is not None:
            raise CdcError(
                f"cannot repair {target} chunk {chunk}: {reason}", "see 'cdc-console status'"
            )
        commands.append(
            store.queue_command(CommandKind.REDUMP, target, dict(args), issued_by=issued_by)
        )
        outcome.repaired.append(f"{target} chunk {chunk}")
    deadline = time.monotonic() + timeout
    _wait_applied(store, commands, deadline)
    tables = {str(t.table_id): t for t, _ in targets}
    _wait_streaming(store, list(tables), deadline)
    after: list[TableResult] = []
    started = time.monotonic()
    for result in tables.values():
        state = store.table(result.table_id)
        assert state is not None
        chunks = [c.split_no for c in result.differing_chunks()]
        after.append(verifier.verify_table(state, chunks))
    outcome.after = VerifyReport(after, time.monotonic() - started)
    return outcome


def _wait_applied(store: StateStore, commands: list[int], deadline: float) -> None:
    pending = set(commands)
    while pending:
        for command_id in sorted(pending):
            command = store.command(command_id)
            if command is None or command.status == CommandStatus.PENDING:
                continue
            if command.status != CommandStatus.APPLIED:
                raise CdcError(
                    f"{command.describe()} refused by the job: {command.reason}",
                    "the table's state changed; check 'cdc-console status' and verify again",
                )
            pending.discard(command_id)
        if pending and time.monotonic() > deadline:
            raise CdcError(
                f"the job did not take the repair commands in time ({len(pending)} pending)",
                "they stay queued; check 'cdc-console status', then verify again",
            )
        if pending:
            time.sleep(POLL_SECONDS)


def _wait_streaming(store: StateStore, tables: list[str], deadline: float) -> None:
    """Until every repaired table streams again with no chunk re-dump left."""
    while True:
        states = {str(t.table_id): t for t in store.tables()}
        busy = [
            name
            for name in tables
            if states[name].state != Lifecycle.STREAMING or states[name].redump_chunk is not None
        ]
        if not busy:
            return
        if time.monotonic() > deadline:
            raise CdcError(
                f"the re-dumped chunks of {', '.join(busy)} did not finish in time",
                "the repair goes on in the job; verify again once the table streams",
            )
        time.sleep(POLL_SECONDS)
