"""``python -m lbsim`` is the ``lbsim`` command."""

import sys

from lbsim.cli import main

sys.exit(main())
