"""``python -m mirrorworld``."""

import sys

from mirrorworld.cli import main

sys.exit(main())
