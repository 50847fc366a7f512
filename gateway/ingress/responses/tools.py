"""Responses tools as canonical tools.

- `function` (with `strict`) -> ToolSpec; `custom` (free text, optionally a grammar) ->
  ToolSpec(kind=CUSTOM, format=...): repair maps it to a function tool for targets without custom
  tools, and the answer's calls come back as custom calls.
- `namespace` (a named group of function/custom tools): no provider behind the gateway groups
  tools, so each member gets a distinct flat name (`<namespace>__<name>`) and answers map back to
  `name` + `namespace` (`ToolNames`).
- every other type (`web_search`, `file_search`, `tool_search`, `code_interpreter`, ...) is run by
  OpenAI itself: a HostedTool of kind `openai_responses`, sent only to OpenAI Responses targets and
  left out (counted `hosted_tool_dropped`) for the others.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from gateway.ingress.errors import ClientError, invalid
from gateway.ingress.responses.fields import array, flag, obj, optional_text, path_of, text
from gateway.transcript.model import HostedTool, ToolChoice, ToolChoiceMode, ToolKind, ToolSpec

HOSTED_KIND = "openai_responses"
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
MAX_NAME = 64


@dataclass(slots=True)
class ToolNames:
    """Canonical (flat) tool name <-> the client's (namespace, name)."""

    wire: dict[str, tuple[str, str]] = field(default_factory=dict)  # flat -> (namespace, name)
    flat: dict[tuple[str, str], str] = field(default_factory=dict)  # (namespace, name) -> flat

    def canonical(self, namespace: str | None, name: str) -> str:
        """The canonical name of a call the client sent (its own namespace, or none)."""
        if not namespace:
            return name
        found = self.flat.get((namespace, name))
        return found if found is not None else _flat_name(namespace, name, set())

    def client(self, name: str) -> tuple[str | None, str]:
        """(namespace, name) the client knows a canonical tool name by."""
        found = self.wire.get(name)
        return found if found is not None else (None, name)


def _flat_name(namespace: str, name: str, taken: set[str]) -> str:
    base = _UNSAFE.sub("_", f"{namespace.rstrip('_')}__{name}")
    if len(base) > MAX_NAME:
        digest = hashlib.sha256(f"{namespace}\x00{name}".encode()).hexdigest()[:8]
        base = f"{base[: MAX_NAME - 9]}_{digest}"
    flat, n = base, 2
    while flat in taken:
        suffix = f"_{n}"
        flat = base[: MAX_NAME - len(suffix)] + suffix
        n += 1
    return flat


@dataclass(slots=True)
class Tools:
    specs: list[ToolSpec] = field(default_factory=list)
    hosted: list[HostedTool] = field(default_factory=list)
    names: ToolNames = field(default_factory=ToolNames)
    _members: list[tuple[str | None, dict[str, Any], str]] = field(default_factory=list)

    def add(self, raw: Any, path: str) -> None:
        """One entry of `tools` (or of an `additional_tools` item)."""
        tool = obj(raw, path)
        kind = text(tool, "type", path)
        if kind in ("function", "custom"):
            self._members.append((None, tool, path))
        elif kind == "namespace":
            namespace = text(tool, "name", path, empty=False)
            for n, member in enumerate(array(tool.get("tools") or [], path_of(path, "tools"))):
                where = path_of(path_of(path, "tools"), n)
                member_kind = text(obj(member, where), "type", where)
                if member_kind not in ("function", "custom"):
                    raise invalid(
                        f"namespace members are function or custom tools, got {member_kind!r}",
                        param=path_of(where, "type"),
                        code="invalid_value",
                    )
                self._members.append((namespace, member, where))
        else:
            # run by OpenAI itself: the tool object travels as the client wrote it
            self.hosted.append(HostedTool(HOSTED_KIND, kind, dict(tool)))

    def added(self) -> bool:
        return bool(self._members or self.hosted)

    def finish(self) -> None:
        """Canonical specs, in order: top-level names kept, namespaced ones made flat and distinct."""
        taken = {text(t, "name", p) for ns, t, p in self._members if ns is None}
        seen: set[str] = set()
        for namespace, tool, path in self._members:
            name = text(tool, "name", path, empty=False)
            if not NAME_PATTERN.match(name):
                raise invalid(
                    "tool names are 1-64 characters of a-z, A-Z, 0-9, _ and -",
                    param=path_of(path, "name"),
                    code="invalid_value",
                )
            if namespace is not None:
                flat = _flat_name(namespace, name, taken)
                taken.add(flat)
                self.names.wire[flat] = (namespace, name)
                self.names.flat[(namespace, name)] = flat
            else:
                flat = name
            if flat in seen:
                raise invalid(
                    f"duplicate tool name {name!r}", param=path_of(path, "name"), code="invalid_value"
                )
            seen.add(flat)
            self.specs.append(_spec(flat, tool, path))


def listed(raw: list[Any]) -> Tools | None:
    """The request's top-level `tools` alone, added and finished; None when they do not finish
    alone (the request's own decode refuses them, at the place it does)."""
    tools = Tools()
    try:
        for n, tool in enumerate(raw):
            tools.add(tool, f"tools[{n}]")
        tools.finish()
    except ClientError:
        return None
    return tools


def with_listed(raw: list[Any], added: Tools) -> Tools:
    """The top-level `tools` and then what the items added (`additional_tools`), unfinished: as
    the request's decode adds them when it finds nothing kept."""
    tools = Tools()
    for n, tool in enumerate(raw):
        tools.add(tool, f"tools[{n}]")
    tools._members.extend(added._members)
    tools.hosted.extend(added.hosted)
    return tools


def _spec(name: str, tool: dict[str, Any], path: str) -> ToolSpec:
    description = optional_text(tool, "description", path) or ""
    if tool["type"] == "custom":
        fmt = tool.get("format")
        if fmt is not None:
            fmt = obj(fmt, path_of(path, "format"))
            if fmt.get("type") not in ("text", "grammar"):
                raise invalid(
                    "a custom tool's format is 'text' or 'grammar'",
                    param=path_of(path, "format.type"),
                    code="invalid_value",
                )
        return ToolSpec(name, description, kind=ToolKind.CUSTOM, format=fmt)
    parameters = tool.get("parameters")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    else:
        parameters = obj(parameters, path_of(path, "parameters"))
    return ToolSpec(name, description, parameters, strict=flag(tool, "strict", path))


def tool_choice(raw: Any, tools: Tools) -> ToolChoice | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        if raw not in ("auto", "none", "required"):
            raise invalid(
                "must be 'auto', 'none', 'required' or a tool", param="tool_choice", code="invalid_value"
            )
        if raw == "required" and not tools.specs and not tools.hosted:
            raise invalid("'required' needs tools", param="tool_choice", code="invalid_value")
        return ToolChoice(ToolChoiceMode(raw))
    choice = obj(raw, "tool_choice")
    kind = text(choice, "type", "tool_choice")
    if kind not in ("function", "custom"):
        # allowed_tools subsets and forcing a hosted tool have no equivalent on other providers
        raise invalid(
            f"tool_choice of type {kind!r} is not supported: name a function or custom tool",
            param="tool_choice.type",
            code="unsupported_parameter",
        )
    name = tools.names.canonical(
        optional_text(choice, "namespace", "tool_choice"), text(choice, "name", "tool_choice")
    )
    if not any(spec.name == name for spec in tools.specs):
        raise invalid(
            f"tool_choice names unknown tool {name!r}", param="tool_choice.name", code="invalid_value"
        )
    return ToolChoice(ToolChoiceMode.TOOL, name)
