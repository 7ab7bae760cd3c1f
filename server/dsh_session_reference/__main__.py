"""``python -m dsh_session_reference``: the same CLI as the console script."""

import sys

from .cli import main

sys.exit(main())
