"""The explicit identity of a configuration, for cache keys: two configurations share it only when they are equal.

``repr`` is not an identity: numpy prints arrays to 8 digits and elides long ones, so two models that differ in an
interaction matrix, a mean value or frozen features can print alike. ``identity`` spells out every field of a
dataclass, every number exactly (``repr`` of a float round-trips), every array by dtype, shape and a SHA-256 of its
bytes, and every function by its qualified name, a hash of its code and the identities of its defaults, of the
values it closes over and of the module-level data it reads (numpy ufuncs and builtins by name). Anything else is
refused (a ``TypeError`` naming the type), never described partly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import types
from enum import Enum

import numpy as np


def identity(value: object) -> str:
    """A canonical string that determines ``value`` (module docstring)."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, np.generic)):
        return repr(value.item() if isinstance(value, np.generic) else value)
    if isinstance(value, Enum):
        return f"{type(value).__qualname__}.{value.name}"
    if isinstance(value, np.ndarray):
        digest = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()
        return f"array({value.dtype.str}, {value.shape}, {digest})"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ", ".join(f"{f.name}={identity(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return f"{_name(type(value))}({fields})"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(identity(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(sorted(f"{identity(k)}: {identity(v)}" for k, v in value.items())) + "}"
    if isinstance(value, (frozenset, set)):
        return "{" + ", ".join(sorted(identity(v) for v in value)) + "}"
    if isinstance(value, types.FunctionType):
        return _function(value)
    if isinstance(value, (np.ufunc, types.BuiltinFunctionType)):
        return f"builtin({getattr(value, '__module__', None) or 'numpy'}.{value.__name__})"
    if isinstance(value, types.MethodType):
        return f"method({identity(value.__self__)}.{value.__func__.__name__}, {_function(value.__func__)})"
    if isinstance(value, type):
        return _name(value)
    raise TypeError(
        f"cannot identify a {type(value).__qualname__} for a cache key: make it a dataclass, an array or a "
        f"number, got {value!r:.80}"
    )


def _name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def _code(code: types.CodeType) -> str:
    consts = [_code(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts]
    digest = hashlib.sha256(code.co_code + repr((consts, code.co_names, code.co_varnames)).encode()).hexdigest()
    return digest[:32]


def _names(code: types.CodeType) -> set[str]:
    return set(code.co_names).union(*(_names(c) for c in code.co_consts if isinstance(c, types.CodeType)))


def _globals(function: types.FunctionType) -> list[str]:
    """The module-level data a function reads (numbers, arrays, tuples...); functions, classes and modules it calls
    are named by their code or qualified name elsewhere, not expanded (that would walk whole modules)."""
    out = []
    for name in sorted(_names(function.__code__)):
        if name not in function.__globals__:
            continue
        value = function.__globals__[name]
        if isinstance(
            value, (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, np.ufunc)
        ) or callable(value):
            continue
        out.append(f"{name}={identity(value)}")
    return out


def _function(function: types.FunctionType) -> str:
    closure = [identity(cell.cell_contents) for cell in function.__closure__ or ()]
    defaults = identity(tuple(function.__defaults__ or ()))
    keyword_defaults = identity(dict(function.__kwdefaults__ or {}))
    return (
        f"function({function.__module__}.{function.__qualname__}, code {_code(function.__code__)}, defaults "
        f"{defaults}, {keyword_defaults}, closure [{', '.join(closure)}], globals [{', '.join(_globals(function))}])"
    )
