"""``python -m dataloader``: the ``dataloader`` command (see ``dataloader._cli``)."""

import sys

from dataloader._cli import main

if __name__ == "__main__":
    sys.exit(main())
