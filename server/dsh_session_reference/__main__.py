"""``python -m dsh_session_reference``: the same program as the console script."""

import sys

from .main import main

sys.exit(main())
