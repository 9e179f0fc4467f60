"""A contender that fails is named with its cause, read from its whole log.

A JVM's stack ends in frames, so a log's tail seldom says why: the note looks through the
whole log for the lines that name an exception.
"""

from __future__ import annotations

from pathlib import Path

from cdc_console.bench.processes import BenchError, failure_note

JVM_LOG = """\
Traceback (most recent call last):
  File "worker.py", line 10, in <module>
    main()
py4j.protocol.Py4JJavaError: An error occurred while calling o43.load.
: java.lang.ClassNotFoundException: org.mariadb.jdbc.Driver
\tat java.base/java.net.URLClassLoader.findClass(URLClassLoader.java:445)
Caused by: java.io.IOException: stream closed
\tat py4j.ClientServerConnection.run(ClientServerConnection.java:108)
"""


def test_the_note_names_the_exceptions_from_the_whole_log(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    log.write_text(JVM_LOG + "\tat frame\n" * 500)
    note = failure_note("spark jdbc", BenchError(f"job exited 1; log {log}:\n\tat frame", log))
    assert note.splitlines() == [
        f"spark jdbc failed, not measured: job exited 1; log {log}:",
        "  py4j.protocol.Py4JJavaError: An error occurred while calling o43.load.",
        "  : java.lang.ClassNotFoundException: org.mariadb.jdbc.Driver",
        "  Caused by: java.io.IOException: stream closed",
    ]


def test_without_a_log_the_message_is_searched(tmp_path: Path) -> None:
    note = failure_note("x", BenchError("x timed out\nValueError: bad", tmp_path / "gone.log"))
    assert note.splitlines() == ["x failed, not measured: x timed out", "  ValueError: bad"]
