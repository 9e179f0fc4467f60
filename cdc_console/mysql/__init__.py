"""I/O against a MySQL-protocol server: connections, probes, schemas, binlog windows.

Imports neither Textual nor PySpark.
"""
