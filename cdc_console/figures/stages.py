"""Where the lag is: each batch's cycle cut into stages that add up to the time covered."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from cdc_console.core.values import JSONObject
from cdc_console.state.store import (
    AppliedBatch,
)
from cdc_console.units import span


class LagStage(StrEnum):
    """The stages a change waits in, in the order it meets them; the value is how an operator
    reads it."""

    TRIGGER = "waiting for the next batch"
    SERVER = "planning (the server's answers)"
    READ = "reading and decoding"
    SPARK = "Spark's batch"
    MAINTENANCE = "lake maintenance"
    COMMIT = "the sink's commit"

    @property
    def key(self) -> str:
        return self.name.lower()


#: the span ``lag_stages`` looks back over
STAGES_WINDOW_SECONDS = 60.0


@dataclass(frozen=True)
class LagStages:
    """How the pipeline's time since ``start`` went, stage by stage: each batch's cycle, from
    the batch before it applied to its own commit, cut at its planning, staging and commit
    (``lag_stages``), so the stages add up to the time covered (``covered``)."""

    seconds: dict[LagStage, float]
    covered: float
    #: the commit stage's seconds table by table (``"db.t"``), where the sink timed them
    commit_by_table: dict[str, float] = field(default_factory=dict)

    def top(self) -> tuple[LagStage, float] | None:
        if self.covered <= 0:
            return None
        stage = max(self.seconds, key=lambda s: self.seconds[s])
        return stage, self.seconds[stage]

    def describe(self) -> str:
        """``the sink's commit took 38 s of the last 40 s``."""
        top = self.top()
        if top is None:
            return "no batch in the last minute"
        stage, seconds = top
        found = f"{stage} took {span(seconds)} of the last {span(self.covered)}"
        if stage is LagStage.COMMIT and self.commit_by_table:
            table, spent = max(self.commit_by_table.items(), key=lambda item: item[1])
            found += f" ({table} {span(spent)})"
        return found

    def to_dict(self) -> JSONObject:
        return {
            "covered_seconds": round(self.covered, 3),
            **{f"{s.key}_seconds": round(v, 3) for s, v in self.seconds.items()},
            "commit_by_table": {t: round(v, 3) for t, v in self.commit_by_table.items()},
        }


def lag_stages(
    batches: Sequence[AppliedBatch], now: float, window: float = STAGES_WINDOW_SECONDS
) -> LagStages:
    """Where the time of the last ``window`` seconds went (``batches``:
    ``StateStore.applied_batches(now - window)``).

    A batch's cycle runs from the commit of the batch before it to its own commit: it waited
    for the next trigger, was planned (asking the server where the binlog ends), read and
    decoded by Spark's tasks until staged, held while lake maintenance had the applier's lock,
    and committed. From planned to staged, the longest task's time in our readers
    (``read_seconds``) is reading and decoding; the rest is Spark's: scheduling the tasks,
    taking their Arrow batches into the JVM and handing the batch to ``foreachBatch``, and
    staging it. Where the window cuts that span, both shares are cut in proportion. The batch
    in flight counts up to ``now`` in the stage it is in (reading, while it is not staged).
    Batches planned while the one before was still applied overlap it; each moment counts once.
    """
    seconds = dict.fromkeys(LagStage, 0.0)
    by_table: dict[str, float] = {}
    begin = now - window
    for before, batch in itertools.pairwise(batches):
        if before.applied_at is None:
            continue
        start = max(before.applied_at, begin)
        end = batch.applied_at if batch.applied_at is not None else now
        if end <= start:
            continue

        def clip(moment: float) -> float:
            return min(max(moment, start), end)  # noqa: B023

        planned = clip(batch.created_at)
        plan_began = clip(batch.created_at - batch.plan_seconds)
        staged = clip(batch.staged_at) if batch.staged_at is not None else end
        committing = end - staged
        held = min(batch.held_seconds, committing) if batch.applied_at is not None else 0.0
        seconds[LagStage.TRIGGER] += plan_began - start
        seconds[LagStage.SERVER] += planned - plan_began
        reading = staged - planned
        whole = (batch.staged_at or now) - batch.created_at
        if batch.read_seconds is not None and batch.staged_at is not None and whole > 0:
            spark = reading * max(0.0, 1.0 - batch.read_seconds / whole)
        else:
            spark = 0.0
        seconds[LagStage.READ] += reading - spark
        seconds[LagStage.SPARK] += spark
        seconds[LagStage.MAINTENANCE] += held
        seconds[LagStage.COMMIT] += committing - held
        timed = sum(batch.table_seconds.values())
        if timed > 0:
            # the tables' own times, scaled to the commit this window saw of the batch
            share = (committing - held) / timed
            for table, spent in batch.table_seconds.items():
                by_table[table] = by_table.get(table, 0.0) + spent * min(1.0, share)
    return LagStages(seconds, sum(seconds.values()), by_table)


def change_stages(written_at: float, batch: AppliedBatch) -> LagStages:
    """The stages one change waited in: written at the source at ``written_at`` and applied by
    ``batch`` (the first whose binlog window reaches it). Its stages add up to its end-to-end
    lag; ``lag_stages`` spreads the same cuts over every moment of a window instead."""
    applied = batch.applied_at if batch.applied_at is not None else written_at
    written = AppliedBatch(0, written_at, 0.0, written_at, 0.0, written_at)
    return lag_stages([written, batch], applied, window=max(0.0, applied - written_at))
