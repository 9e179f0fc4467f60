"""cdc-console: MySQL change-data-capture on Spark and its terminal operations console."""

__version__ = "0.1.0"
