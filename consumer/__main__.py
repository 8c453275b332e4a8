"""``python -m consumer``: the same as the ``consumer`` command."""

import sys

from .cli import main

sys.exit(main())
