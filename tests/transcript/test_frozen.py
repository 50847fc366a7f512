"""The transcript's value types built by their direct `__init__` (gateway/transcript/frozen.py)
hold what the dataclass's own would have built from the same arguments."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.transcript import model
from gateway.transcript.frozen import ORIGINAL_INITS, direct_init

_values = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.tuples(st.integers()))
_classes = sorted(ORIGINAL_INITS, key=lambda cls: cls.__name__)


def _state(value: Any) -> tuple[Any, ...]:
    return tuple(getattr(value, f.name) for f in dataclasses.fields(value))


def test_the_hot_value_types_have_the_direct_init() -> None:
    for cls in (model.Text, model.ToolCall, model.ToolResult, model.Reasoning, model.Message, model.Image):
        assert cls in ORIGINAL_INITS


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_classes), st.data())
def test_a_value_built_directly_equals_the_dataclass_built_one(cls: type, data: st.DataObject) -> None:
    fields = dataclasses.fields(cls)
    required = [f for f in fields if f.default is dataclasses.MISSING]
    given_count = data.draw(st.integers(len(required), len(fields)))
    positional = [data.draw(_values) for _ in fields[:given_count]]
    split = data.draw(st.integers(len(required), given_count)) if given_count > len(required) else given_count
    keywords = {f.name: v for f, v in zip(fields[split:given_count], positional[split:], strict=True)}
    args = positional[:split]
    built = cls(*args, **keywords)
    reference = object.__new__(cls)
    ORIGINAL_INITS[cls](reference, *args, **keywords)
    assert _state(built) == _state(reference)
    assert all(a is b for a, b in zip(_state(built), _state(reference), strict=True))
    assert built == reference
    if _hashable(built):
        assert hash(built) == hash(reference)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.__setattr__(fields[0].name, None)


def test_wrong_arguments_fail_as_the_dataclass_init_does() -> None:
    with pytest.raises(TypeError):
        model.Text()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        model.Text("a", nope=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        model.Message(model.Role.USER, (), None)  # type: ignore[call-arg]


def test_a_class_it_cannot_mirror_keeps_its_own_init() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Later:
        value: int
        doubled: int = dataclasses.field(init=False)

        def __post_init__(self) -> None:
            object.__setattr__(self, "doubled", self.value * 2)

    init = Later.__init__
    assert direct_init(Later).__init__ is init and Later(2).doubled == 4


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
