"""A yes/no dialog for the controls that cost something: re-dumping a table, stopping a job.

It states the cost in the operator's units (rows re-read, chunks, what keeps running) so the
decision is made on facts; Enter/y confirms, Escape/n cancels.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from cdc_console.core.lifecycle import Lifecycle
from cdc_console.figures import ReadVerdict
from cdc_console.tui.model import PipelineView, TableView


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("enter", "answer(True)", "Yes", show=False),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "Cancel"),
    ]

    def __init__(self, title: str, body: Text | str, confirm: str) -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.confirm = confirm

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog") as dialog:
            dialog.border_title = self.title_text
            yield Static(self.body, id="confirm-body")
            with Horizontal(id="confirm-buttons"):
                yield Button(f"{self.confirm} (y)", variant="error", id="confirm-yes")
                yield Button("Cancel (n)", variant="default", id="confirm-no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


def redump_body(table: str, rows: int, chunks: int | None, chunk_size: int, state: str) -> Text:
    partial = Lifecycle(state).reads_chunks
    estimate = -(-rows // chunk_size) if rows else None
    text = Text()
    text.append("Re-dump ")
    text.append(table, style="bold")
    text.append(f" (now {state})?\n\n")
    if partial:
        text.append(f"Its snapshot so far read {rows:,} rows", style="bold")
        if chunks:
            text.append(f" of {chunks:,} chunks", style="bold")
        text.append("; a re-dump starts over")
    else:
        text.append(f"It re-reads about {rows:,} rows", style="bold")
        known = chunks or estimate
        if known:
            text.append(f" ({known:,} chunks now)", style="bold")
    text.append(f", split afresh into chunks of up to {chunk_size:,} rows.\n")
    text.append(
        "Each chunk replaces its key range in the mirror (never empty meanwhile), then the table "
        "catches up from the binlog; the other tables keep streaming."
    )
    return text


def redump_confirmation(view: PipelineView, table: TableView) -> Text:
    """What a re-dump of ``table`` reads, and whether it finishes before the server may purge
    the binlog it will catch up from (the same verdict the command gives)."""
    body = redump_body(
        table.table, table.rows_snapshotted, table.splits_total, table.chunk_size, table.state
    )
    purge = view.binlog.purge
    verdict = ReadVerdict(
        view.redump_forecast if view.selected_table == table.table else None,
        purge.expire_seconds if purge is not None else None,
        (purge.expire_setting or "") if purge is not None else "",
    )
    body.append("\n\nFinish time: ", style="bold")
    body.append(
        verdict.describe()
        if verdict.estimate is not None
        else "no estimate: the table's last read left too few timed chunks",
        style="" if verdict.fits else "bold red",
    )
    return body


def stop_body(pipeline: str, pid: int | None, grace: float) -> Text:
    text = Text()
    text.append("Stop the job of ")
    text.append(pipeline, style="bold")
    text.append(f" (pid {pid})?\n\n" if pid else "?\n\n")
    text.append(
        "It finishes its current batch and exits; the next start resumes where it stopped. "
        f"If it has not exited {grace:.0f} s after the stop command, it is signalled (SIGTERM, "
        "then SIGKILL)."
    )
    return text
