"""I/O against a MySQL-protocol server: connections, probes, schemas, binlog windows.

Describes what it reads with `cdc_console.core`'s value types (offsets, table schemas); imports
neither `cdc_console.state` nor the algorithm, nor Textual or PySpark.
"""
