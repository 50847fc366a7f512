"""The transcript's value types (msgspec Structs): what the code relies on from them, checked on
generated conversations: equal values compare and hash alike, copies (pickle, copy, deepcopy,
replace) are equal, values are frozen and out of the cyclic collector's sight, class patterns
match by position, defaults are fresh per value, and Request's system string becomes blocks."""

from __future__ import annotations

import copy
import gc
import inspect
import pickle
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.providers import get_adapter
from gateway.repair import prepare
from gateway.transcript.model import (
    AssistantTurn,
    Continuity,
    Message,
    Request,
    Role,
    StopReason,
    Text,
    ToolCall,
    ToolSpec,
    Usage,
    replace,
)
from tests.property.transcripts import KINDS, requests, target_for

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _values(value: Any) -> list[Any]:
    """Every transcript value in `value`'s tree."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple | list):
            stack.extend(item)
        elif isinstance(item, msgspec.Struct):
            found.append(item)
            stack.extend(getattr(item, name) for name in item.__struct_fields__)
    return found


@st.composite
def conversations(draw: st.DrawFn) -> Request:
    kind = draw(st.sampled_from(KINDS))
    target = target_for(kind)
    request = draw(requests(target, draw(st.booleans())))
    # a prepared copy carries repair's decision and whatever the passes rewrote
    return draw(st.sampled_from([request, prepare(request, target, get_adapter(kind).capabilities).request]))


@SETTINGS
@given(conversations())
def test_copies_are_equal_and_frozen_values_untracked(request: Request) -> None:
    for value in (request, *_values(request)):
        for twin in (
            pickle.loads(pickle.dumps(value)),
            copy.copy(value),
            copy.deepcopy(value),
            replace(value),
        ):
            assert twin == value and type(twin) is type(value)
            try:
                assert hash(twin) == hash(value)
            except TypeError:  # a Mapping field (Continuity.data, ToolSpec.parameters): as before
                with pytest.raises(TypeError):
                    hash(value)
        assert not gc.is_tracked(value), type(value).__name__
        with pytest.raises(AttributeError):
            setattr(value, value.__struct_fields__[0], None)
    assert replace(request, model="other") != request


def test_every_value_type_has_a_signature_and_resolvable_fields() -> None:
    """What reflection reads (hypothesis' `builds`, msgspec's typed decode): every annotation
    resolves."""
    from gateway.transcript import decision, model

    for module in (model, decision):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, msgspec.Struct) and value is not msgspec.Struct:
                assert list(inspect.signature(value).parameters) == list(value.__struct_fields__)
                assert msgspec.structs.fields(value)


def test_equality_is_by_type_and_fields() -> None:
    assert Text("a") == Text("a", None, None, False, ())
    assert Text("a") != Text("a", refusal=True)
    assert Text("a") != Message(Role.USER, (Text("a"),))
    assert hash(Text("a")) == hash(Text("a"))
    assert {Text("a"), Text("a")} == {Text("a")}


def test_class_patterns_match_by_position_and_keyword() -> None:
    match Message(Role.ASSISTANT, (ToolCall("c1", "f", "{}"),)):
        case Message(Role.ASSISTANT, (ToolCall(call_id, name, arguments=args),)):
            assert (call_id, name, args) == ("c1", "f", "{}")
        case _:
            pytest.fail("no match")


def test_defaults_are_fresh_per_value() -> None:
    one, two = Continuity("p", "s", "k", "m"), Continuity("p", "s", "k", "m")
    assert one.data == {} and one.data is not two.data
    assert ToolSpec("f").parameters == {"type": "object", "properties": {}}
    assert ToolSpec("f").parameters is not ToolSpec("f").parameters
    assert Request("m", ()).provider_options is not Request("m", ()).provider_options


def test_request_system_string_becomes_blocks_on_every_construction() -> None:
    request = Request("m", (), system="Be brief.")
    assert request.system == (Text("Be brief."),)
    assert Request("m", (), system="").system == ()
    assert replace(request, system="Other.").system == (Text("Other."),)
    assert Request("m", (), "Be brief.") == request


def test_the_mutable_ones_stay_mutable() -> None:
    usage = Usage()
    usage.input_tokens += 3
    turn = AssistantTurn([Text("a")], StopReason.END_TURN, usage)
    turn.blocks.append(Text("b"))
    assert turn.message() == Message(Role.ASSISTANT, (Text("a"), Text("b")))
    assert pickle.loads(pickle.dumps(turn)) == turn and turn.usage.input_tokens == 3
