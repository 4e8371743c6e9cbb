"""The library functions behind the light commands: ``fedpriv account``, ``capacity``, ``compare``,
``robustness`` and ``verify`` (the command-line contract: README.md, "Command line"; the layering:
DEVELOPERS.md, "One concept, one place").

Each module turns the command's arguments into releases — looking mechanisms up in the registry
(:mod:`fedpriv.mechanisms.registry`) — checks every input before any work, naming the flag that
carries it, calls the math and returns the command's JSON object:
:mod:`~fedpriv.commands.account` (privacy-math.md §3), :mod:`~fedpriv.commands.capacity` (§5),
:mod:`~fedpriv.commands.compare` with its spec parser :mod:`~fedpriv.commands.specs` and its
figure :mod:`~fedpriv.commands.compare_plot` (§4), :mod:`~fedpriv.commands.robustness` (§6);
:mod:`~fedpriv.commands.verify` checks a run's audit record (docs/audit-store.md).
The math itself (accounting, leakage) takes typed releases and plain numbers and never imports
the registry; only the command line (``workflows/cli``), tests and benchmarks import this
package. Importing it imports nothing: the light commands load neither torch nor Flower.
"""
