"""One module per CLI sub-command; each exposes ``register(subparsers)``.

Keeping commands apart keeps ``cli.py`` a thin dispatcher rather than a god object.
"""
