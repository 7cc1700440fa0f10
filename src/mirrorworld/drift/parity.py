"""Action-space parity: a world's tool surface against the real system's, another version's, or a declared file.

An agent trained on a mirror acts through its tools. If the mirror's API has
drifted from the system it mirrors (an argument named otherwise, an integer
where the real system takes a float, an enum value the real system refuses, an
error code it never reports), the agent learns an API that does not exist.
This module makes that surface data and compares it.

A **surface** is canonical JSON data::

    {"world": "mirrorworld/Sales-v0",
     "tools": {"add_line": {"kind": "write",
                            "args": {"quantity": {"type": "integer", "required": true},
                                     "discount": {"type": "number", "required": false}, ...},
                            "errors": ["invalid_arguments", "invalid_state", "not_found", "policy_refused"]},
               ...}}

``enum`` (sorted) appears on an argument only when it has one. Three sources
give one:

* :func:`surface_of` reads a world's declared tools. A tool's **error codes**
  are found statically: the string literal first argument of every
  ``ToolError(...)`` in the tool's function and, transitively, in the functions
  it calls (or names) that are module-level functions of its own module or of
  a module under ``mirrorworld.worlds`` it imports them from (``rules.py``'s
  ``check_*`` helpers, another world's tools module), plus
  ``invalid_arguments`` for a tool with parameters (``ToolSpec.validate``). A
  tool presented over another (a derived version's, :class:`~mirrorworld.core.tools.Surface`)
  is read through its ``inner`` tool, with ``Surface.errors`` renaming codes.
  A ``ToolError`` whose code is not a literal is a :class:`~mirrorworld.errors.WorldError`:
  the surface would silently miss it.
* :func:`mirrorworld.twin.surface.twin_surface` reads the real one off
  Tryton's pool in the sales twin, from the declaration of what stands behind
  each tool (:data:`mirrorworld.twin.surface.SALES`).
* :func:`load_surface` reads a declared production surface file
  (``--write-surface`` writes one). The file is untrusted: bounded, strictly
  schema-checked, refused with a one-line :class:`SurfaceError`.

:func:`compare` lists every :class:`Mismatch` between two surfaces. Tools are
matched by name; of the tools left unmatched, a pair with the same kind and
the same argument names (or the only one left on each side, of one kind) is a
rename, and its arguments are compared too. Arguments within a tool are
paired the same way (same type, enum and required flag; or the only one left
on each side). The kinds:

====================  =====================================================
kind                  what differs
====================  =====================================================
``tool``              a tool on one side only
``tool_renamed``      a tool under another name (then compared as one tool)
``kind``              read / write / terminal
``argument``          an argument on one side only
``argument_renamed``  an argument under another name (then compared as one)
``type``              the JSON type of an argument
``enum``              the accepted values of an argument (compared as sets)
``required``          whether an argument must be sent
``error``             an error code on one side only (a lone code on each
                      side of one tool is one row: a renamed code)
``unresolved``        the real surface could not be read for this (a
                      declared Tryton model, field or button is missing)
====================  =====================================================

A :class:`Known` difference explains a mismatch, with its reason: the real
twin's declaration states each deliberate difference (an argument Tryton has
no field for, an enum the desk narrows); a derived world's declared changes
(:func:`declared_changes`) explain how its surface differs from its base's.
A mismatch nothing explains fails the ``parity`` command (exit 1).
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import json
import re
import sys
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirrorworld.core.registry import Registry
from mirrorworld.core.tools import Param, ToolSpec
from mirrorworld.core.world import World
from mirrorworld.errors import MirrorworldError, WorldError

__all__ = [
    "KINDS",
    "MAX_SURFACE_BYTES",
    "Known",
    "Mismatch",
    "SurfaceError",
    "check_surface",
    "compare",
    "declared_changes",
    "error_codes",
    "load_surface",
    "register",
    "render",
    "surface_of",
    "tool_surface",
    "write_surface",
]

KINDS = (
    "tool",
    "tool_renamed",
    "kind",
    "argument",
    "argument_renamed",
    "type",
    "enum",
    "required",
    "error",
    "unresolved",
)
"""Every kind of :class:`Mismatch`, in the order a report lists them within a tool."""

FOLLOW = ("mirrorworld.worlds.",)
"""Modules whose functions the error-code analysis follows beyond the tool's own module."""


class SurfaceError(MirrorworldError):
    """A surface file is missing, too large, not JSON or not a surface (boundary: caller).

    Raised by :func:`load_surface`; ``mirrorworld.cli.main`` prints it as one
    ``mirrorworld: error: ...`` line and exits 1.
    """


# -- error codes, statically ------------------------------------------------------------


@dataclass(frozen=True)
class _Module:
    """One module's syntax tree, indexed for the error-code analysis."""

    name: str
    path: str
    tree: ast.Module
    functions: Mapping[str, ast.FunctionDef | ast.AsyncFunctionDef]
    """Module-level functions by name."""
    imported: Mapping[str, tuple[str, str]]
    """Name -> (module, attribute) of ``from module import attribute as name``."""
    modules: Mapping[str, str]
    """Name -> module of ``import module as name`` (or ``from package import module``)."""


@functools.cache
def _module(name: str) -> _Module:
    module = sys.modules.get(name)
    try:
        if module is None:
            raise OSError(f"module {name} is not imported")
        source = inspect.getsource(module)
        path = inspect.getsourcefile(module) or name
    except (OSError, TypeError) as err:
        raise WorldError(f"parity reads error codes from source, and {name} has none: {err}") from None
    tree = ast.parse(source, filename=path)
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    imported: dict[str, tuple[str, str]] = {}
    modules: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions[node.name] = node
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                local = alias.asname or alias.name
                if f"{node.module}.{alias.name}" in sys.modules:
                    modules[local] = f"{node.module}.{alias.name}"
                else:
                    imported[local] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    modules[alias.asname] = alias.name
    return _Module(name, path, tree, functions, imported, modules)


def _find(func: Callable[..., Any]) -> tuple[_Module, ast.AST]:
    """The module and syntax node of a function (nested or not)."""
    func = inspect.unwrap(func)
    code = getattr(func, "__code__", None)
    modname = getattr(func, "__module__", None)
    if code is None or not isinstance(modname, str):
        raise WorldError(f"parity cannot read the source of {func!r}")
    mod = _module(modname)
    first = code.co_firstlineno
    for node in ast.walk(mod.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == func.__name__:
            starts = [node.lineno, *(d.lineno for d in node.decorator_list)]
            if first in starts:
                return mod, node
        elif isinstance(node, ast.Lambda) and func.__name__ == "<lambda>" and node.lineno == first:
            return mod, node
    raise WorldError(f"parity cannot find {func.__qualname__} in {mod.path}")


def _followed(module: str, origin: str, follow: Sequence[str]) -> bool:
    return module == origin or any(module.startswith(p) for p in follow)


def _target(mod: _Module, node: ast.AST, follow: Sequence[str], origin: str) -> tuple[_Module, ast.AST] | None:
    """The function a name or ``module.attribute`` in ``mod`` refers to, if the analysis follows it."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        if node.id in mod.functions:
            return mod, mod.functions[node.id]
        if node.id in mod.imported:
            where, attr = mod.imported[node.id]
            if _followed(where, origin, follow) and where in sys.modules:
                other = _module(where)
                if attr in other.functions:
                    return other, other.functions[attr]
        return None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        aliased = mod.modules.get(node.value.id)
        if aliased is not None and _followed(aliased, origin, follow) and aliased in sys.modules:
            other = _module(aliased)
            if node.attr in other.functions:
                return other, other.functions[node.attr]
    return None


def _codes_of(call: ast.Call, mod: _Module) -> list[str]:
    if not call.args:
        raise WorldError(f"{mod.path}:{call.lineno}: ToolError(...) without a code")
    arg = call.args[0]
    values = [arg.body, arg.orelse] if isinstance(arg, ast.IfExp) else [arg]
    out = []
    for v in values:
        if not (isinstance(v, ast.Constant) and isinstance(v.value, str)):
            raise WorldError(
                f"{mod.path}:{call.lineno}: the code of ToolError(...) is not a string literal "
                "(parity reads error codes statically)"
            )
        out.append(v.value)
    return out


def _is_tool_error(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == "ToolError") or (
        isinstance(func, ast.Attribute) and func.attr == "ToolError"
    )


def error_codes(func: Callable[..., Any], *, follow: Sequence[str] = FOLLOW) -> frozenset[str]:
    """The codes of every ``ToolError(...)`` in ``func`` and the functions it reaches (see the module docstring).

    ``follow``: module name prefixes whose functions are followed besides
    ``func``'s own module.
    """
    mod, start = _find(func)
    origin = mod.name
    codes: set[str] = set()
    seen: set[tuple[str, int]] = set()
    todo: list[tuple[_Module, ast.AST]] = [(mod, start)]
    while todo:
        here, node = todo.pop()
        key = (here.name, id(node))
        if key in seen:
            continue
        seen.add(key)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and _is_tool_error(sub.func):
                codes.update(_codes_of(sub, here))
            found = _target(here, sub, follow, origin)
            if found is not None:
                todo.append(found)
    return frozenset(codes)


# -- a world's surface ----------------------------------------------------------------


def _arg(p: Param) -> dict[str, Any]:
    out: dict[str, Any] = {"type": str(p.schema.get("type")), "required": bool(p.required)}
    enum = p.schema.get("enum")
    if enum:
        out["enum"] = sorted(str(v) for v in enum)
    return out


def tool_surface(spec: ToolSpec) -> dict[str, Any]:
    """One tool's entry of a surface: kind, arguments and error codes (see the module docstring)."""
    runs = spec.surface.inner if spec.surface is not None else spec
    codes = set(error_codes(runs.func))
    if spec.surface is not None:
        codes = {spec.surface.errors.get(c, c) for c in codes}
    if spec.params:
        codes.add("invalid_arguments")
    return {
        "kind": spec.kind,
        "args": {p.name: _arg(p) for p in sorted(spec.params, key=lambda p: p.name)},
        "errors": sorted(codes),
    }


def surface_of(world: World) -> dict[str, Any]:
    """``world``'s tool surface as canonical JSON data (see the module docstring). Deterministic."""
    return {
        "world": world.id,
        "tools": {t.name: tool_surface(t) for t in sorted(world.tools, key=lambda t: t.name)},
    }


def write_surface(world: World, path: Path) -> dict[str, Any]:
    """Write ``surface_of(world)`` to ``path`` as sorted, indented JSON; return it."""
    data = surface_of(world)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return data


# -- surface files (untrusted) ----------------------------------------------------------

MAX_SURFACE_BYTES = 1 << 20
"""The largest surface file read (1 MiB; a world of 500 tools takes about 200 kB)."""
MAX_TOOLS = 1000
MAX_ARGS = 100
MAX_ENUM = 500
MAX_ERRORS = 100
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}\Z")
_CODE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}\Z")
_TYPES = ("string", "integer", "number", "boolean", "array", "object")
_TOOL_KINDS = ("read", "write", "terminal")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise SurfaceError(f"key {k[:60]!r} appears twice")
        out[k] = v
    return out


def _refuse_constant(name: str) -> Any:
    raise SurfaceError(f"{name} is not a JSON number")


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else type(value).__name__
    return repr(text[:40] + "…" if len(text) > 40 else text)


def _keys(d: Mapping[str, Any], allowed: Iterable[str], required: Iterable[str], where: str) -> None:
    extra = sorted(set(d) - set(allowed))
    if extra:
        raise SurfaceError(f"{where}: unknown key {_shown(extra[0])}")
    for k in required:
        if k not in d:
            raise SurfaceError(f"{where}: missing key {k!r}")


def check_surface(data: Any, what: str = "surface") -> dict[str, Any]:
    """``data`` checked against the surface schema (see the module docstring), in canonical form.

    Raises :class:`SurfaceError` naming the first thing wrong.
    """
    if not isinstance(data, dict):
        raise SurfaceError(f"{what}: expected an object with world and tools, got {type(data).__name__}")
    _keys(data, ("world", "tools"), ("world", "tools"), what)
    world, tools = data["world"], data["tools"]
    if not isinstance(world, str) or not 0 < len(world) <= 200:
        raise SurfaceError(f"{what}: world must be a string of 1 to 200 characters")
    if not isinstance(tools, dict) or len(tools) > MAX_TOOLS:
        raise SurfaceError(f"{what}: tools must be an object of at most {MAX_TOOLS} tools")
    out: dict[str, Any] = {}
    for name in sorted(tools):
        if not _NAME.match(name):
            raise SurfaceError(f"{what}: tool name {_shown(name)} is not a name (letters, digits, _)")
        t, here = tools[name], f"{what}: tool {name}"
        if not isinstance(t, dict):
            raise SurfaceError(f"{here}: expected an object")
        _keys(t, ("kind", "args", "errors"), ("kind", "args", "errors"), here)
        if t["kind"] not in _TOOL_KINDS:
            raise SurfaceError(f"{here}: kind must be one of {', '.join(_TOOL_KINDS)}")
        args, errors = t["args"], t["errors"]
        if not isinstance(args, dict) or len(args) > MAX_ARGS:
            raise SurfaceError(f"{here}: args must be an object of at most {MAX_ARGS} arguments")
        if not isinstance(errors, list) or len(errors) > MAX_ERRORS:
            raise SurfaceError(f"{here}: errors must be a list of at most {MAX_ERRORS} codes")
        for code in errors:
            if not isinstance(code, str) or not _CODE.match(code):
                raise SurfaceError(f"{here}: error code {_shown(code)} is not a code")
        checked: dict[str, Any] = {}
        for arg in sorted(args):
            a, there = args[arg], f"{here} argument {arg}"
            if not _NAME.match(arg):
                raise SurfaceError(f"{here}: argument name {_shown(arg)} is not a name")
            if not isinstance(a, dict):
                raise SurfaceError(f"{there}: expected an object")
            _keys(a, ("type", "enum", "required"), ("type", "required"), there)
            if a["type"] not in _TYPES:
                raise SurfaceError(f"{there}: type must be one of {', '.join(_TYPES)}")
            if not isinstance(a["required"], bool):
                raise SurfaceError(f"{there}: required must be true or false")
            entry: dict[str, Any] = {"type": a["type"], "required": a["required"]}
            if "enum" in a:
                enum = a["enum"]
                if not isinstance(enum, list) or not 0 < len(enum) <= MAX_ENUM:
                    raise SurfaceError(f"{there}: enum must be a list of 1 to {MAX_ENUM} strings")
                if not all(isinstance(v, str) and len(v) <= 200 for v in enum):
                    raise SurfaceError(f"{there}: enum values must be strings of at most 200 characters")
                entry["enum"] = sorted(set(enum))
            checked[arg] = entry
        out[name] = {"kind": t["kind"], "args": checked, "errors": sorted(set(errors))}
    return {"world": world, "tools": out}


def load_surface(path: Path) -> dict[str, Any]:
    """A declared surface file, read as untrusted input: at most :data:`MAX_SURFACE_BYTES`, UTF-8 JSON, checked."""
    what = f"surface file {path}"
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_SURFACE_BYTES + 1)
    except FileNotFoundError:
        raise SurfaceError(f"no surface file {path}") from None
    except IsADirectoryError:
        raise SurfaceError(f"{what} is a folder") from None
    except OSError as err:
        raise SurfaceError(f"{what} cannot be read: {err.strerror or err}") from None
    if len(raw) > MAX_SURFACE_BYTES:
        raise SurfaceError(f"{what} is larger than {MAX_SURFACE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SurfaceError(f"{what} is not UTF-8 text") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant)
    except SurfaceError as err:
        raise SurfaceError(f"{what}: {err}") from None
    except json.JSONDecodeError as err:
        raise SurfaceError(f"{what} is not JSON: {err.msg} (line {err.lineno}, column {err.colno})") from None
    except RecursionError:
        raise SurfaceError(f"{what} is nested too deeply") from None
    return check_surface(data, what)


# -- comparing ----------------------------------------------------------------------


@dataclass(frozen=True)
class Mismatch:
    """One difference between two surfaces (``mirror``: the world's side; ``real``: the other side).

    ``argument`` is None for a difference of the tool itself. ``tool`` and
    ``argument`` are the mirror's names (the other side's for what only it
    has). ``mirror``/``real`` are the differing values (None: absent on that
    side); ``known`` says whether a declared difference explains it, and
    ``reason`` is that declaration's reason.
    """

    kind: str
    tool: str
    argument: str | None
    mirror: Any
    real: Any
    known: bool = False
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "tool": self.tool,
            "argument": self.argument,
            "mirror": self.mirror,
            "real": self.real,
            "known": self.known,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Known:
    """A declared difference, with its reason: it explains the mismatches it matches.

    It matches a mismatch of its ``kind`` on ``tool`` (None: any tool) and
    ``argument`` (None: the tool itself, or any argument for a tool of None)
    whose mirror value is one of ``mirror`` and real value one of ``real``
    (None: any). ``narrows``, for an enum: it explains only a mirror that
    accepts a subset of the real values (the desk deliberately takes fewer).
    """

    kind: str
    tool: str | None
    argument: str | None
    reason: str
    mirror: tuple[Any, ...] | None = None
    real: tuple[Any, ...] | None = None
    narrows: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS or self.kind == "unresolved":
            raise WorldError(f"a known difference of kind {self.kind!r} cannot be declared")
        if not self.reason.strip():
            raise WorldError(f"the known difference {self.kind} of {self.tool}.{self.argument} needs a reason")

    def explains(self, m: Mismatch) -> bool:
        if m.kind != self.kind or (self.tool is not None and m.tool != self.tool):
            return False
        if (self.tool is not None or self.argument is not None) and m.argument != self.argument:
            return False
        if self.mirror is not None and m.mirror not in self.mirror:
            return False
        if self.real is not None and m.real not in self.real:
            return False
        if self.narrows:
            return isinstance(m.mirror, list) and isinstance(m.real, list) and set(m.mirror) <= set(m.real)
        return True

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Known:
        """A known difference from its :meth:`to_dict` form (a declaration's data)."""
        mirror, real = d.get("mirror"), d.get("real")
        return cls(
            str(d["kind"]),
            d.get("tool"),
            d.get("argument"),
            str(d["reason"]),
            mirror=None if mirror is None else tuple(mirror),
            real=None if real is None else tuple(real),
            narrows=bool(d.get("narrows", False)),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "tool": self.tool, "argument": self.argument, "reason": self.reason}
        if self.mirror is not None:
            out["mirror"] = list(self.mirror)
        if self.real is not None:
            out["real"] = list(self.real)
        if self.narrows:
            out["narrows"] = True
        return out


def _pairs(
    left: Sequence[str], right: Sequence[str], same: Callable[[str, str], bool], alone: Callable[[str, str], bool]
) -> list[tuple[str, str]]:
    """Pairs of names left unmatched on each side that are one thing renamed (see the module docstring)."""
    candidates = {a: [b for b in right if same(a, b)] for a in left}
    back = {b: [a for a in left if same(a, b)] for b in right}
    pairs = [(a, bs[0]) for a, bs in candidates.items() if len(bs) == 1 and len(back[bs[0]]) == 1]
    rest_l = [a for a in left if a not in {p[0] for p in pairs}]
    rest_r = [b for b in right if b not in {p[1] for p in pairs}]
    if len(rest_l) == 1 and len(rest_r) == 1 and alone(rest_l[0], rest_r[0]):
        pairs.append((rest_l[0], rest_r[0]))
    return pairs


def _shape(a: Mapping[str, Any]) -> tuple[Any, ...]:
    return (a.get("type"), tuple(a.get("enum") or ()), a.get("required"))


def _compare_tool(name: str, left: Mapping[str, Any], right: Mapping[str, Any]) -> list[Mismatch]:
    out: list[Mismatch] = []
    if left["kind"] != right["kind"]:
        out.append(Mismatch("kind", name, None, left["kind"], right["kind"]))
    la, ra = left["args"], right["args"]
    only_l = [a for a in sorted(la) if a not in ra]
    only_r = [a for a in sorted(ra) if a not in la]
    pairs = _pairs(only_l, only_r, lambda a, b: _shape(la[a]) == _shape(ra[b]), lambda a, b: True)
    matched = [(a, a) for a in sorted(la) if a in ra] + pairs
    for a, b in pairs:
        out.append(Mismatch("argument_renamed", name, a, a, b))
    for a in only_l:
        if a not in {p[0] for p in pairs}:
            out.append(Mismatch("argument", name, a, a, None))
    for b in only_r:
        if b not in {p[1] for p in pairs}:
            out.append(Mismatch("argument", name, b, None, b))
    for a, b in matched:
        x, y = la[a], ra[b]
        if x["type"] != y["type"]:
            out.append(Mismatch("type", name, a, x["type"], y["type"]))
        ex, ey = x.get("enum"), y.get("enum")
        if (ex is not None or ey is not None) and set(ex or ()) != set(ey or ()):
            out.append(Mismatch("enum", name, a, sorted(ex) if ex else None, sorted(ey) if ey else None))
        if bool(x["required"]) != bool(y["required"]):
            out.append(Mismatch("required", name, a, bool(x["required"]), bool(y["required"])))
    lost = sorted(set(left["errors"]) - set(right["errors"]))
    gained = sorted(set(right["errors"]) - set(left["errors"]))
    if len(lost) == 1 and len(gained) == 1:
        out.append(Mismatch("error", name, None, lost[0], gained[0]))
    else:
        out += [Mismatch("error", name, None, c, None) for c in lost]
        out += [Mismatch("error", name, None, None, c) for c in gained]
    return out


def compare(mirror: Mapping[str, Any], real: Mapping[str, Any], known: Sequence[Known] = ()) -> list[Mismatch]:
    """Every mismatch between two surfaces, each marked known (with the reason) when a declaration explains it.

    ``mirror`` is the world's surface, ``real`` the other side's (the real
    system's, another version's, a declared file's). A real surface may carry
    ``unresolved`` entries (``{"tool", "argument", "what"}``): each is a
    mismatch no declaration explains. Deterministic: sorted by tool, then
    argument, then kind.
    """
    lt, rt = mirror["tools"], real["tools"]
    only_l = [t for t in sorted(lt) if t not in rt]
    only_r = [t for t in sorted(rt) if t not in lt]

    def same(a: str, b: str) -> bool:
        return bool(lt[a]["kind"] == rt[b]["kind"] and set(lt[a]["args"]) == set(rt[b]["args"]))

    pairs = _pairs(only_l, only_r, same, lambda a, b: bool(lt[a]["kind"] == rt[b]["kind"]))
    out: list[Mismatch] = []
    for a, b in pairs:
        out.append(Mismatch("tool_renamed", a, None, a, b))
    for a in only_l:
        if a not in {p[0] for p in pairs}:
            out.append(Mismatch("tool", a, None, a, None))
    for b in only_r:
        if b not in {p[1] for p in pairs}:
            out.append(Mismatch("tool", b, None, None, b))
    for a, b in [(t, t) for t in sorted(lt) if t in rt] + pairs:
        out += _compare_tool(a, lt[a], rt[b])
    for u in real.get("unresolved", ()):
        out.append(Mismatch("unresolved", str(u.get("tool", "")), u.get("argument"), None, str(u.get("what", ""))))
    explained: list[Mismatch] = []
    for m in out:
        k = next((k for k in known if k.explains(m)), None)
        explained.append(m if k is None else Mismatch(m.kind, m.tool, m.argument, m.mirror, m.real, True, k.reason))
    order = {k: i for i, k in enumerate(KINDS)}
    return sorted(explained, key=lambda m: (m.tool, m.argument or "", order[m.kind], str(m.mirror), str(m.real)))


# -- a derived version's declared changes ----------------------------------------------------


def declared_changes(world: World, other: World) -> list[Known]:
    """The differences ``other``'s declared changes explain, when ``other`` derives from ``world``.

    Each change (:mod:`mirrorworld.drift.changes`) becomes the mismatch kinds
    it causes, named as ``world`` names the tool and argument (a chain of
    renames is followed back), its changelog line as the reason. Changes that
    leave the surface alone (rules, policy, customers, descriptions) explain
    nothing. Empty when ``other`` is not derived from ``world``.
    """
    from mirrorworld.drift import changes as c
    from mirrorworld.drift.derive import DISTRACTOR_TOOLS, DriftedWorld

    if not isinstance(other, DriftedWorld):
        return []
    if other.drift_from == world.id:
        chain: Sequence[c.Change] = other.own_changes
    elif type(world) is other.drift_root:
        chain = other.changes
    else:
        return []
    tools: dict[str, str] = {}  # presented name -> the name in ``world``
    args: dict[tuple[str, str], str] = {}  # (world's tool, presented argument) -> the argument in ``world``
    out: list[Known] = []
    for change in chain:
        why = change.changelog()
        if isinstance(change, c.RenameTool):
            base = tools.pop(change.tool, change.tool)
            tools[change.to] = base
            out.append(Known("tool_renamed", base, None, why))
        elif isinstance(change, c.RemoveTool):
            out.append(Known("tool", tools.get(change.tool, change.tool), None, why, real=(None,)))
        elif isinstance(change, c.AddArgument):
            out.append(Known("argument", tools.get(change.tool, change.tool), change.argument, why, mirror=(None,)))
        elif isinstance(change, c.RenameArgument):
            base = tools.get(change.tool, change.tool)
            arg = args.pop((base, change.argument), change.argument)
            args[(base, change.to)] = arg
            out.append(Known("argument_renamed", base, arg, why))
        elif isinstance(change, (c.RetypeArgument, c.AddEnumValue, c.RemoveEnumValue)):
            base = tools.get(change.tool, change.tool)
            kind = "type" if isinstance(change, c.RetypeArgument) else "enum"
            out.append(Known(kind, base, args.get((base, change.argument), change.argument), why))
        elif isinstance(change, c.ChangeErrorCode):
            named: list[str | None] = [tools.get(t, t) for t in change.tools] or [None]
            out += [Known("error", t, None, why, mirror=(change.code, None), real=(change.to, None)) for t in named]
        elif isinstance(change, c.AddDistractorTools):
            out += [Known("tool", d[0], None, why, mirror=(None,)) for d in DISTRACTOR_TOOLS]
    return out


# -- the report -------------------------------------------------------------------------

_WIDTHS = (5, 16, 29, 11, 11)
"""Column widths of the report's table: with their gaps, 80 columns."""


def _value(m: Mismatch, side: str) -> str:
    v = m.mirror if side == "mirror" else m.real
    if m.kind == "enum":
        other = m.real if side == "mirror" else m.mirror
        only = sorted(set(v or ()) - set(other or ()))
        return ",".join(only) if only else "-"
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _where(m: Mismatch, width: int) -> str:
    """``tool.argument``, the tool's name cut first when it is too long (the argument stays readable)."""
    from mirrorworld.inert import inert

    tool = inert(m.tool, 200, lines=False)
    if m.argument is None:
        return tool
    arg = inert(m.argument, 200, lines=False)
    room = width - len(arg) - 1
    if len(tool) > room >= 4:
        tool = tool[: room - 1] + "…"
    return f"{tool}.{arg}"


def _cell(text: str, width: int) -> str:
    from mirrorworld.inert import inert

    shown = inert(text, 400, lines=False)
    return shown if len(shown) <= width else shown[: width - 1] + "…"


def render(
    mismatches: Sequence[Mismatch], *, title: str, labels: tuple[str, str] = ("mirror", "real"), tools: int = 0
) -> list[str]:
    """The report as lines of at most 80 columns: a header, a table of mismatches with reasons, a summary.

    Every name, value and reason is printed inert (:mod:`mirrorworld.inert`):
    it comes from a world's code, a surface file or the real system. An enum
    row shows the values only that side accepts; a value too wide for its
    column is cut, and then written out whole on the line below the row.
    """
    from mirrorworld.inert import inert

    lines = [inert(title, 400, lines=False)]
    if mismatches:
        head = ("", "kind", "tool.argument", labels[0], labels[1])
        lines.append("  ".join(_cell(h, w).ljust(w) for h, w in zip(head, _WIDTHS, strict=True)).rstrip())
        lines.append("  ".join("-" * w for w in _WIDTHS))
    for m in mismatches:
        where = _where(m, _WIDTHS[2])
        cells = ("known" if m.known else "NEW", m.kind, where, _value(m, "mirror"), _value(m, "real"))
        lines.append("  ".join(_cell(c, w).ljust(w) for c, w in zip(cells, _WIDTHS, strict=True)).rstrip())
        values = [inert(v, 400, lines=False) for v in cells[3:]]
        if any(len(v) > w for v, w in zip(values, _WIDTHS[3:], strict=True)):
            full = f"{labels[0]}: {values[0]}; {labels[1]}: {values[1]}"
            lines += textwrap.wrap(full, 80, initial_indent=" " * 10, subsequent_indent=" " * 10)
        if m.reason:
            reason = inert(m.reason, 600, lines=False)
            lines += textwrap.wrap(reason, 80, initial_indent=" " * 10, subsequent_indent=" " * 10)
    unexplained = sum(not m.known for m in mismatches)
    lines.append(
        f"{tools} tools compared: {len(mismatches)} differences, {len(mismatches) - unexplained} declared, "
        f"{unexplained} unexplained"
    )
    return lines


# -- the command ----------------------------------------------------------------------


def register(sub: Any, registry: Registry | None = None) -> dict[str, Any]:
    """Add the ``parity`` command to an argparse subparsers object; return its handler by name.

    ``--world`` lists the worlds of ``registry``; the handler looks worlds up in
    the registry ``mirrorworld.cli.main`` puts on the arguments.
    """
    from mirrorworld.options import world_option

    p = sub.add_parser(
        "parity",
        help="compare a world's tool surface with the real system's (sales: the Tryton twin), another version's "
        "or a declared surface file; exit 1 on an unexplained difference",
    )
    world_option(p, registry, preferred="sales")
    p.add_argument("--against-world", default=None, metavar="WORLD", help="compare with another world (a version)")
    p.add_argument("--surface", default=None, metavar="FILE", help="compare with a declared surface file (JSON)")
    p.add_argument("--write-surface", default=None, metavar="FILE", help="write the world's surface as JSON")
    p.add_argument("--json", action="store_true", help="print the mismatches as JSON")
    return {"parity": cmd_parity}


def _against_twin(world: World) -> tuple[dict[str, Any], list[Known], str]:
    from mirrorworld.twin import tryton
    from mirrorworld.twin.backend import TwinBackend
    from mirrorworld.twin.db import ensure
    from mirrorworld.twin.surface import SALES, known_differences, twin_surface

    root = getattr(type(world), "drift_root", type(world))
    if root.name != "sales":
        raise MirrorworldError(
            f"world {world.name} has no real twin (only sales has one): use --against-world or --surface"
        )
    twin_world = world if type(world) is root else root()
    database = ensure(twin_world, log=lambda m: print(m, file=sys.stderr))
    with TwinBackend(twin_world, database) as twin, twin.session():
        real = twin_surface(twin.pool, SALES, codes=error_codes)
    known = [Known.from_dict(d) for d in known_differences(SALES)]
    return real, known, f"the Tryton twin (trytond {tryton.versions()['trytond']})"


def cmd_parity(args: argparse.Namespace) -> int:
    from mirrorworld.options import registry_of

    if args.surface and args.against_world:
        raise MirrorworldError("give --against-world or --surface, not both")
    surface_file = load_surface(Path(args.surface)) if args.surface else None  # refused before anything is built
    registry = registry_of(args)
    world = registry.get(args.world)
    if args.write_surface:
        write_surface(world, Path(args.write_surface))
        if surface_file is None and not args.against_world:
            print(f"wrote the surface of {world.id} ({len(world.tools)} tools) to {args.write_surface}")
            return 0
    mirror = surface_of(world)
    labels = ("world", "other")
    if args.against_world:
        other = registry.get(args.against_world)
        real, known, against = surface_of(other), declared_changes(world, other), other.id
        labels = (f"v{world.version}", f"v{other.version}") if world.version != other.version else ("world", "other")
    elif surface_file is not None:
        real, known, against = surface_file, [], f"the surface file {args.surface} ({surface_file['world']})"
        labels = ("world", "file")
    else:
        real, known, against = _against_twin(world)
        labels = ("mirror", "tryton")
    mismatches = compare(mirror, real, known)
    unexplained = sum(not m.known for m in mismatches)
    if args.json:
        data = {
            "world": world.id,
            "against": against,
            "tools": len(mirror["tools"]),
            "mismatches": [m.to_dict() for m in mismatches],
            "known": [k.to_dict() for k in known],
            "unexplained": unexplained,
        }
        print(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        title = f"parity: {world.id} against {against}"
        for line in render(mismatches, title=title, labels=labels, tools=len(mirror["tools"])):
            print(line)
    return 1 if unexplained else 0
