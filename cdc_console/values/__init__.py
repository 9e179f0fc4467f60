"""A MySQL value's forms outside the drivers: its canonical value and its Arrow/Delta type.

``codecs`` holds one codec object per type family (``core.mysqltypes``' one table says which
family a type is): that family's snapshot (text protocol) and binlog-image converters into the
canonical value, its chunk-key forms, its SELECT expression and its typed sink form.
``canonical.py`` turns whole rows of either path into canonical rows through them (the *One
canonical value* invariant); ``arrow.py`` turns a family's sink form into an Arrow type and
decodes canonical values into typed Arrow columns. Readers (``mysql/``, ``source/``) and sinks
(``sinks/``) both use them, so the package sits below both. Neither module dispatches on a family
or a type name; both go through the codecs. Imports neither Textual nor PySpark.
"""
