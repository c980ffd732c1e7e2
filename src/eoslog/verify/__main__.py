"""``python -m eoslog.verify HISTORY [--plot PNG] [--json]``."""

import sys

from eoslog.verify.checker import main

sys.exit(main())
