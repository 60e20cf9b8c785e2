"""``python -m steptrace``: the steptrace command."""

import sys

from ._cli import main

sys.exit(main())
