"""A MySQL value's forms outside the drivers: its canonical value and its Arrow/Delta type.

``canonical.py`` maps what pymysql (snapshot) and pymysqlreplication (binlog) return onto one
canonical, JSON-friendly value per column type (the *One canonical value* invariant);
``arrow.py`` maps each column type to its Arrow and Delta type and decodes canonical values into
typed Arrow columns. Readers (``mysql/``, ``source/``) and sinks (``sinks/``) both use them, so
the package sits below both. Which family a type belongs to is ``core.mysqltypes``'s one table;
both modules dispatch on that family, never on a type name. Imports neither Textual nor PySpark.
"""
