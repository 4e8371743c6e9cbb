"""``python -m fedpriv`` runs the ``fedpriv`` command.

The command line belongs to the application layer (``workflows.cli``), which the library does
not import: this module looks the command up by its registered console-script entry point
(``[project.scripts]`` in pyproject.toml), as any installed front end would be found.
"""

import sys
from importlib.metadata import entry_points

(command,) = entry_points(group="console_scripts", name="fedpriv")
sys.exit(command.load()())
