"""One module per CLI sub-command; each exposes ``register(subparsers)``.

Keeping commands apart keeps ``cli.py`` a thin dispatcher rather than a god object.
"""

import argparse
from typing import TypeAlias

#: What ``ArgumentParser.add_subparsers`` returns, which each command's ``register`` adds to.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
