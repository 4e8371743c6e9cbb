"""``python -m fedpriv`` is the ``fedpriv`` command."""

import sys

from fedpriv.cli.main import main

sys.exit(main())
