"""`python -m tablectl`: what /usr/bin/tablectl runs in the package (packaging/build_deb.py)."""

import sys

from tablectl.cli import main

sys.exit(main())
