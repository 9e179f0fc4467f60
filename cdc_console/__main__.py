import sys

from cdc_console.cli import main

sys.exit(main())
