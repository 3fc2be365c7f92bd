"""The registry of models: every layer map the suite ships that declares its claims, as small example instances.

A model lives in one module: its layer map, its limit SDE, its claims (``protocols.Claims``: the symbolic layer
``verify`` derives the limit from, and the conformance properties that do not apply, each with its reason) and
``EXAMPLES``, the small instances the registry holds (name -> a function building one). ``registered`` gathers the
examples of a sequence of such modules; ``MODELS`` is the suite's, in the order of ``MODEL_MODULES`` (a study over the
registry keys its streams by that order: a new model goes last).

The conformance tests run over this registry (``tests/test_conformance.py``): protocol, noise and output shapes,
sphere invariance, permutation and rotation equivariance (through the model's ``rotate_noise``), the limit's drift
against the one ``verify`` derives from ``claims.symbolic`` (at the model's ``symbolic_values()``) and local
consistency. docs/how-to.md adds a model step by step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType

from . import agazzi, fedorov, hybrid, quadratic_form, softmax_hybrid
from .protocols import ClaimingModel

MODEL_MODULES: tuple[ModuleType, ...] = (fedorov, hybrid, softmax_hybrid, agazzi, quadratic_form)


def registered(modules: Iterable[ModuleType]) -> dict[str, Callable[[], ClaimingModel]]:
    """The ``EXAMPLES`` of every module, in order; a module without them, or a name given twice, is an error."""
    models: dict[str, Callable[[], ClaimingModel]] = {}
    for module in modules:
        examples = getattr(module, "EXAMPLES", None)
        if not isinstance(examples, dict) or not examples:
            raise TypeError(f"{module.__name__} must define EXAMPLES, a dict name -> a function building the model")
        for name, make in examples.items():
            if name in models:
                raise ValueError(f"{module.__name__}: the model name {name!r} is already registered")
            models[name] = make
    return models


MODELS = registered(MODEL_MODULES)
