"""Per-example gradients of models made of linear layers, as outer products (no ``vmap``).

For a linear layer ``z = a Wᵀ + b`` applied to a batch, the gradient of example ``i``'s loss
``ℓ_i`` is ``∇_W ℓ_i = δ_i a_iᵀ`` and ``∇_b ℓ_i = δ_i``, where ``a_i`` is the layer's input row
and ``δ_i = ∂ℓ_i/∂z_i`` its back-propagated error; one forward pass and one backward pass of
``Σ_i ℓ_i`` give every ``a_i`` and ``δ_i`` (Goodfellow 2015). For a small MLP such as the paper
MLP this is an order of magnitude faster on CPU than ``torch.func.vmap(grad(...))``.

The norms of a rank-one block factorise, ``‖δ aᵀ‖₂ = ‖δ‖₂‖a‖₂`` and ``‖δ aᵀ‖₁ = ‖δ‖₁‖a‖₁``,
so the clipped sum ``Σ_i ḡ_i`` of privacy-math.md §2 can be formed without materialising the
``(B, p)`` per-example gradients ("ghost clipping": Goodfellow 2015; Lee & Kifer 2021;
Li et al. 2022): :func:`fedpriv.gradients.clipping.ghost_clipped_sum`.

Opacus offers the same computation through module hooks, but it is an optional dependency;
the math here is a few lines and is tested against ``vmap`` and against
:func:`fedpriv.gradients.clipping.clipped_sum` on the materialised gradients.

Scope: :func:`is_all_linear` says whether a model qualifies — every trainable parameter belongs
to one ``nn.Linear`` and to no other module (a tied weight's per-example gradient is a sum of
outer products); such layers must then run exactly once per forward pass on 2-D inputs
``(B, in)``, and :func:`linear_factors` raises ``ValueError`` for a model that breaks that
promise (a bug in the model, not a signal to take another route). Any other model goes through
:func:`fedpriv.gradients.vmap.vmap_per_example_gradients`.

References
----------
.. [1] I. Goodfellow, "Efficient Per-Example Gradient Computations", arXiv 1510.01799 (2015).
.. [2] J. Lee, D. Kifer, "Scaling up Differentially Private Deep Learning with Fast
   Per-Example Gradient Clipping", PoPETs 2021.
.. [3] X. Li et al., "Large Language Models Can Be Strong Differentially Private Learners",
   ICLR 2022 (ghost clipping).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
from torch import nn

from fedpriv.gradients.loss import Loss, cross_entropy

__all__ = [
    "LayerRecorder", "LinearFactors", "Owner", "ParameterLayout", "is_all_linear", "linear_factors",
    "linear_per_example_gradients", "materialise", "parameter_layout",
]


@dataclass(frozen=True)
class LinearFactors:
    """The per-example factors of every trainable parameter, in ``model.parameters()`` order.

    Attributes
    ----------
    errors
        ``δ`` of the parameter's layer, shape ``(B, out)``, one entry per parameter.
    inputs
        The layer's input ``a``, shape ``(B, in)``, for a weight; ``None`` for a bias.
    losses
        Per-example cross-entropy losses, shape ``(B,)``.
    """

    errors: list[torch.Tensor]
    inputs: list[torch.Tensor | None]
    losses: torch.Tensor

    @property
    def widths(self) -> list[int]:
        """Number of gradient entries of each parameter (its ``numel``)."""
        return [
            d.shape[1] * (1 if a is None else a.shape[1])
            for d, a in zip(self.errors, self.inputs, strict=True)
        ]


Owner = tuple[nn.Module, str, nn.Parameter]
"""``(module, attribute name, parameter)``: which module holds a parameter, under which name."""


@dataclass(frozen=True)
class ParameterLayout:
    """Who owns each parameter of a model, from one walk of its modules.

    Attributes
    ----------
    owners
        One :data:`Owner` per parameter, in ``model.parameters()`` order (torch's own walk:
        modules depth-first, a parameter held by several modules at its first).
    shared
        Whether some parameter is held by two modules (tied weights): its per-example gradient
        is then a sum of outer products, not one, so the factor route does not apply.
    """

    owners: list[Owner]
    shared: bool

    # cached: a layout is walked once per local_train call and read at every step

    @cached_property
    def sizes(self) -> tuple[int, ...]:
        """``numel`` of each parameter, in order."""
        return tuple(p.numel() for _, _, p in self.owners)

    @cached_property
    def all_linear(self) -> bool:
        """Whether every parameter belongs to one ``nn.Linear`` and to no other module."""
        return not self.shared and all(isinstance(m, nn.Linear) for m, _, _ in self.owners)

    @cached_property
    def layers(self) -> list[nn.Module]:
        """The modules that hold the parameters, each once, in order."""
        return list(dict.fromkeys(module for module, _, _ in self.owners))

    @cached_property
    def slots(self) -> tuple[tuple[int, bool], ...]:
        """For each parameter, the index of its module in :attr:`layers` and whether it is the
        module's ``weight`` (else its bias): where its factors are found."""
        index = {module: k for k, module in enumerate(self.layers)}
        return tuple((index[module], name == "weight") for module, name, _ in self.owners)


def parameter_layout(model: nn.Module) -> ParameterLayout:
    """The :class:`ParameterLayout` of ``model``."""
    owners: list[Owner] = []
    seen: set[int] = set()
    shared = False
    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            if id(param) in seen:
                shared = True
                continue
            seen.add(id(param))
            owners.append((module, name, param))
    return ParameterLayout(owners, shared)


def is_all_linear(model: nn.Module) -> bool:
    """Whether every trainable parameter of ``model`` belongs to an ``nn.Linear`` (and none is
    shared between modules)."""
    return parameter_layout(model).all_linear


class LayerRecorder:
    """Records the input and output of each layer's ``forward`` call in a model's forward pass,
    for as long as it is entered (``with``): one recorder can serve every batch of a
    local-training call, so the layers are wrapped once per call, not once per batch
    (≈ 6 µs a step of the paper MLP inside a DP-SGD loop on a 2-CPU machine).

    Each layer's ``forward`` is wrapped (an instance attribute, removed — or the layer's own
    instance attribute put back — on leaving, whatever happens), not hooked:
    ``register_forward_hook`` sends each call through ``Module.__call__``'s slow path and
    registers and removes a handle per layer: ≈ 20 µs a step. The attribute is set with
    ``object.__setattr__``: ``Module.__setattr__`` only adds checks that ``forward`` is no
    parameter, buffer or submodule. The wrapper sees what ``forward`` itself takes and returns
    (after forward pre-hooks, before forward hooks), which is what ``z = a Wᵀ + b`` relates.
    While it is entered, every call of a layer is recorded: the model is not to be run
    elsewhere (another thread) meanwhile."""

    def __init__(self, layers: list[nn.Module]) -> None:
        self.layers = layers
        self._calls: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[] for _ in layers]
        self._own: list[object] = []

    def __enter__(self) -> LayerRecorder:
        self._own = [module.__dict__.get("forward") for module in self.layers]
        for module, seen in zip(self.layers, self._calls, strict=True):

            def recording(inputs: torch.Tensor, *args: object, _forward=module.forward,
                          _seen=seen.append, **kwargs: object) -> torch.Tensor:
                out = _forward(inputs, *args, **kwargs)
                _seen((inputs.detach(), out))
                return out

            object.__setattr__(module, "forward", recording)
        return self

    def __exit__(self, *exc: object) -> None:
        for module, forward in zip(self.layers, self._own, strict=True):
            if forward is None:
                object.__delattr__(module, "forward")
            else:
                object.__setattr__(module, "forward", forward)
        for seen in self._calls:
            seen.clear()

    def run(
        self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss: Loss
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
        """The losses ``loss(model(x), y)``, and per layer the input (detached) and the output
        of its one ``forward`` call in that pass. Raises ``ValueError`` unless every layer ran
        exactly once, on ``(B, in)`` inputs."""
        calls = self._calls
        for seen in calls:
            seen.clear()
        losses = loss(model(x), y)
        if any(len(seen) != 1 or seen[0][0].dim() != 2 for seen in calls):
            raise ValueError("linear factors: each linear layer must run once, on (B, in) "
                             "inputs")
        return [seen[0][0] for seen in calls], [seen[0][1] for seen in calls], losses


def _grads_of_sum(losses: torch.Tensor, outputs: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """``∂(Σ_i ℓ_i)/∂z`` for every tensor ``z`` of ``outputs``: ``torch.autograd.grad`` with
    ``grad_outputs = 1`` (no sum node), called straight into the autograd engine on the CPU.

    ``torch.autograd.grad``'s Python wrapper (argument checks, ``grad_outputs`` validation,
    a context copy for the engine's device threads) cost 15–35 µs a step inside a DP-SGD loop
    of the paper MLP on a 2-CPU machine (0.06–0.14 × a plain step, batch 128); the engine call
    is the one it ends in (``torch.autograd.graph._engine_run_backward``). Elsewhere (other
    devices, a torch whose engine has no ``run_backward``) it is ``torch.autograd.grad``
    itself; ``tests/test_gradients_linear.py`` checks that both give the same floats."""
    ones = torch.ones_like(losses)
    engine = getattr(torch.autograd.Variable, "_execution_engine", None)
    if losses.device.type == "cpu" and hasattr(engine, "run_backward"):
        # (tensors, grad_tensors, keep_graph, create_graph, inputs, allow_unreachable,
        #  accumulate_grad): autograd.grad's own call, allow_unused=False
        return engine.run_backward((losses,), (ones,), False, False, tuple(outputs), False, False)
    return torch.autograd.grad(losses, outputs, grad_outputs=ones)


def linear_factors(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss: Loss = cross_entropy,
    *, layout: ParameterLayout | None = None, recorder: LayerRecorder | None = None,
) -> LinearFactors:
    """Inputs ``a`` and errors ``δ = ∂ℓ_i/∂z_i`` of every linear layer, and the per-example
    losses ``ℓ_i`` (:mod:`fedpriv.gradients.loss`; cross-entropy by default).

    One forward pass (each layer's ``forward`` recorded: :class:`LayerRecorder`) and one
    backward pass to the layers' outputs only: the weight gradients are never formed, the
    clipped sum weights the factors instead. ``layout``: ``model``'s :func:`parameter_layout`,
    when the caller already walked the model; ``recorder``: an entered
    :class:`LayerRecorder` of ``layout.layers``, when the caller records several batches
    (else one is entered for this batch).
    """
    layout = parameter_layout(model) if layout is None else layout
    owners = layout.owners
    if not layout.all_linear:
        for module, _, _ in owners:
            if not isinstance(module, nn.Linear):
                raise ValueError(f"linear factors: parameter of {type(module).__name__} is not "
                                 "linear")
        raise ValueError("linear factors: a parameter shared by two modules (tied weights) has "
                         "no rank-one per-example gradient")
    if recorder is None:
        with LayerRecorder(layout.layers) as recorder:
            inputs, outputs, losses = recorder.run(model, x, y, loss)
    else:
        inputs, outputs, losses = recorder.run(model, x, y, loss)
    errors = _grads_of_sum(losses, outputs)
    return LinearFactors(
        errors=[errors[k] for k, _ in layout.slots],
        inputs=[inputs[k] if weight else None for k, weight in layout.slots],
        losses=losses.detach(),
    )


def linear_per_example_gradients(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The per-example gradients ``(B, p)`` of an all-linear model, and the losses."""
    factors = linear_factors(model, x, y)
    return materialise(factors), factors.losses


def materialise(factors: LinearFactors) -> torch.Tensor:
    """The ``(B, p)`` per-example gradients the factors describe.

    Column order ``model.parameters()``, each flattened row-major (as ``vmap`` gives them); each
    weight block is the outer product ``δ_i a_iᵀ``, written straight into one preallocated matrix.
    """
    batch = factors.losses.shape[0]
    out = factors.losses.new_empty((batch, sum(factors.widths)))
    offset = 0
    for d, a, width in zip(factors.errors, factors.inputs, factors.widths, strict=True):
        block = out[:, offset : offset + width]
        if a is None:
            block.copy_(d)
        else:
            torch.mul(d.unsqueeze(2), a.unsqueeze(1), out=block.view(batch, d.shape[1], -1))
        offset += width
    return out
