"""``bench --executors``: where each run of ours goes, and how its tagged lines are found."""

from __future__ import annotations

from dataclasses import dataclass

from cdc_console.bench.common import Measured, Measurement, SparkSetup, spark_setups


@dataclass
class Lines(Measured):
    measurements: list[Measurement]


def test_executor_counts_become_local_clusters_or_a_capped_standalone_master() -> None:
    assert spark_setups("local[2]", ()) == [SparkSetup("local[2]")]
    assert spark_setups("local[2]", (1, 2)) == [
        SparkSetup("local-cluster[1,1,1024]", {}, "1 executor"),
        SparkSetup("local-cluster[2,1,1024]", {}, "2 executors"),
    ]
    cores = {"spark.cores.max": "2", "spark.executor.cores": "1"}
    assert spark_setups("spark://10.0.0.5:7077", (2,)) == [
        SparkSetup("spark://10.0.0.5:7077", cores, "2 executors")
    ]


def _line(label: str) -> Measurement:
    return Measurement(label, 1, 1.0, None)


def test_a_bar_reads_the_untagged_line_else_the_first_tagged_one() -> None:
    window = "ours snapshot -> delta (window)"
    tagged = Lines([_line(f"{window} [1 executor]"), _line(f"{window} [2 executors]")])
    found = tagged.get(window)
    assert found is not None and found.label.endswith("[1 executor]")
    plain = Lines([_line(f"{window} [driver]"), _line(window)])
    found = plain.get(window)
    assert found is not None and found.label == window
    assert Lines([_line(f"{window}x")]).get(window) is None
