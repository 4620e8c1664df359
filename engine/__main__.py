"""``python -m engine``: the command line (see :mod:`engine.cli`)."""
import sys

from engine.cli import main

if __name__ == "__main__":
    sys.exit(main())
