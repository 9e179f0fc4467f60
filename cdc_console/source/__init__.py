"""The lock-free incremental snapshot algorithm (Flink CDC 2.x / DBLog), free of Spark and UI.

Modules here may import `cdc_console.mysql` (I/O) and `cdc_console.state` (SQLite) but never
Textual or PySpark: `tests/unit/test_import_hygiene.py` proves it.
"""
