"""``python -m dataloader``: the ``dataloader`` command (see ``dataloader._cli.main``)."""

import sys

from dataloader._cli.main import main

if __name__ == "__main__":
    sys.exit(main())
