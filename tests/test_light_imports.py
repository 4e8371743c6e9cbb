"""Light commands stay light (issue 41, item 9): ``fedpriv --help``, every subcommand's
``--help`` and ``fedpriv config --explain KEY`` import neither torch, Flower, Ray, matplotlib
nor scipy (nor dp-accounting, which pulls scipy.signal and scipy.stats: 1.8 s on a loaded
machine); ``fedpriv account``'s RDP path imports no dp-accounting (tests/test_accounting_cli.py).

The packages whose names a light command touches (``fedpriv.audit``, ``fedpriv.accounting``,
``fedpriv.special``) import their submodules on first use (:mod:`fedpriv.lazy`). Measured
before (2 cores at load 7.7): ``fedpriv --help`` 3.9 s, with ``fedpriv.audit``'s report and
the leakage estimators' scipy.stats imported for one constant; after: 1.0 s at that load, of
which numpy is 0.4 s (numpy alone; 0.4 s total on an idle core)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
HEAVY = ("torch", "flwr", "ray", "matplotlib", "scipy", "dp_accounting")
_CODE = """
import sys
from workflows.cli.main import main
try:
    main({argv!r})
except SystemExit:
    pass
print(sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r})), file=sys.stderr)
"""


def _heavy_imports(argv: list[str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _CODE.format(argv=argv, heavy=HEAVY)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
    return ast.literal_eval(out.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [
    ["--help"], ["config", "--explain", "train.lr"], ["account", "--help"],
    ["capacity", "--help"], ["compare", "--help"], ["simulate", "--help"], ["sweep", "--help"],
])  # fmt: skip
def test_a_light_command_imports_nothing_heavy(argv):
    assert _heavy_imports(argv) == []
