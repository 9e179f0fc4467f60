"""The pipeline's state in SQLite: the single source of truth for the job, the CLI and the console.

Imports neither Textual nor PySpark.
"""
