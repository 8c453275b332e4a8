"""``python -m consumer``: the same as the ``consumer`` command."""

import sys

from .cli.main import main

sys.exit(main())
