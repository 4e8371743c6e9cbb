"""The gradient-inversion attacks: one gradient matcher and its configurations.

:mod:`~attacks.inversion.matching` composes an attack from its parts (distance, labels,
regularisers, optimiser, initialisation; :mod:`~attacks.inversion.objective`,
:mod:`~attacks.inversion.optimisers`); ``dlg``, ``idlg`` and ``iga`` are configurations of it.
:mod:`attacks.registry` imports every module of this package, so an attack is one file here
that registers a function with :func:`attacks.registry.attack`.
"""

__all__: list[str] = []
