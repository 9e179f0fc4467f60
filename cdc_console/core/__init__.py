"""The value types every layer shares: table ids and schemas, binlog offsets, chunk ranges and
key orders, the key codec, splits, batch plans and the change record.

This package is the bottom of the import graph (``tests/unit/test_layering.py``): ``mysql/`` and
``state/`` describe positions, splits and schemas with these types, ``source/`` computes with
them, ``spark/`` and the sinks move them around. It imports nothing of ``cdc_console`` outside
itself, and neither Textual, PySpark nor a database driver: offsets and splits have a canonical
dict form (``to_dict``/``from_dict``) that the state database and Spark task descriptions store.
"""
