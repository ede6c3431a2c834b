"""``python -m ucse <command>``: the same as the ``ucse`` console script."""

import sys

from ucse.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
