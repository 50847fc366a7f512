"""A cheaper `__init__` for the transcript's frozen, slotted dataclasses.

The `__init__` dataclasses writes for a frozen class sets each field through
`object.__setattr__(self, "name", value)` (a global, an attribute and a by-name call a field):
a five-field `Text` costs ~0.5 us to build, and a long transcript's first sight builds thousands
of blocks (decode, then each repair pass that rewrites one). The one written here calls each
slot's descriptor directly (~0.2 us for `Text`): the same fields, set in the same order, with the
same defaults; the class stays frozen (its `__setattr__` still refuses). A class this cannot
mirror exactly (a `__post_init__`, a field outside `__init__`, keyword-only fields, a default
factory) keeps the dataclass's own. tests/transcript/test_frozen.py compares both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

C = TypeVar("C", bound=type)

# class -> the `__init__` dataclasses wrote for it (what the tests compare with)
ORIGINAL_INITS: dict[type, Callable[..., None]] = {}


def direct_init(cls: C) -> C:
    """`cls` with a descriptor-setting `__init__`, when it can mirror the dataclass's."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        return cls
    fields = dataclasses.fields(cls)
    if hasattr(cls, "__post_init__") or any(
        not f.init or f.kw_only or f.default_factory is not dataclasses.MISSING for f in fields
    ):
        return cls
    namespace: dict[str, Any] = {}
    signature, body = [], []
    for f in fields:
        namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is dataclasses.MISSING:
            signature.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            signature.append(f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}(self, {f.name})")
    source = f"def __init__(self, {', '.join(signature)}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(source, namespace)  # noqa: S102 - built from the class's own field names only
    init = namespace["__init__"]
    original = cls.__init__
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = dict(original.__annotations__)
    init.__doc__ = original.__doc__
    ORIGINAL_INITS[cls] = original
    cls.__init__ = init  # type: ignore[misc]
    return cls
