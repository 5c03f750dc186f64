"""The simulator environment for the tests and ``scripts/env.sh``; it lives in
:mod:`hwgen.simenv` so ``accelgen verify`` uses the same one."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hwgen.simenv import *  # noqa: E402,F401,F403
from hwgen.simenv import _exports, main  # noqa: E402,F401

if __name__ == "__main__":
    main()
