"""The gradient-inversion attacks (DLG, iDLG, IGA), one module each.

:mod:`attacks.registry` imports every module of this package, so an attack is one file here
that registers a function with :func:`attacks.registry.attack`.
"""

__all__: list[str] = []
