"""The lock-free incremental snapshot algorithm (Flink CDC 2.x / DBLog), free of Spark and UI.

Modules here compute with the value types of `cdc_console.core` and may import
`cdc_console.mysql` (I/O) and `cdc_console.state` (SQLite), but never Textual or PySpark:
`tests/unit/test_import_hygiene.py` and `tests/unit/test_layering.py` prove it.
"""
