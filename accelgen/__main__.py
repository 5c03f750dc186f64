"""``python -m accelgen``: the same as the ``accelgen`` command."""

import sys

from .cli import main

sys.exit(main())
