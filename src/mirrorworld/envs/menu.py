"""An action menu over any world: discrete actions, an action mask and numeric observations.

:class:`ActionMenu` wraps a :class:`~mirrorworld.envs.gymnasium.MirrorEnv` so that
libraries built for fixed-size spaces (Stable-Baselines3 and sb3-contrib's
``MaskablePPO``, CleanRL-style scripts, RLlib, TorchRL, SuperSuit) train in a
world without glue:

* the **action** is ``Discrete(slots)``: slot ``i`` is the ``i``-th candidate
  call of the current menu; :meth:`ActionMenu.action_masks` (and
  ``info["action_mask"]``) says which slots hold one;
* the **observation** is a ``Box`` of ``float32`` features (:class:`Features`);
  with ``mask_in_observation=True`` a ``Dict`` of ``observation`` and
  ``action_mask``, the layout TorchRL's ``ActionMask`` transform and RLlib's
  action-masking models read.

The menu is built **only from what the agent has been shown**
(:class:`Seen`): the instruction and every tool result so far. Never from the
task's gold solution, its hidden fields or the verifier: the wrapper reads the
observations of the wrapped environment and nothing else (the canary test in
``tests/test_menu.py`` plants markers in all three and looks for them).

Candidate calls
---------------
Every record a tool result showed is a **context**: its own fields, the ids of
the records around it (``order_id`` for a line of an order, from the order
beside it) and the fields of its parent record prefixed with its name
(``order_delivered_at``); the instruction is one more context, holding the
emails, the record numbers (``order #506`` gives ``order_id``) and the other
values written in it. For each tool, each context fills the tool's
parameters:

* an id parameter (``order_id``, ``line_id``, a ``ref`` to a table) takes the
  context's value under its name or under ``<table>_id``; a parameter naming
  the record itself takes its ``id``; an id the context lacks is taken from the
  references of a message from another party (``"#526"``), then from the
  records of that kind seen anywhere, those sharing most words and numbers
  with the instruction first (the older ticket about the same order), then
  the most recent; a second id of a kind the call already has (a merge's
  target) prefers records sharing most words with the context's (``Re: Setup
  help`` and ``Setup help``);
* an enum takes all its values, those the instruction names first
  (``damaged`` in "arrived damaged"), then those seen in a result;
* a number takes the context's positive amounts;
* another string takes the context's value under its name, else the numbers
  of a message from another party (the code the customer read out), else
  values of the instruction: its emails for an email, the last words of its
  last sentence and its email for a search query, its last email and its
  numbers for a new value, its other numbers for anything else (a zip code, a
  phone's last digits);
* a free-text parameter takes the world's **macros** for a parameter of its
  name (``World.menu_macros``: canned texts with ``{field}`` slots, as a
  helpdesk's macros are) whose slots the context fills; ``{best_sentence}`` is the sentence of the
  context's ``body`` sharing most words with the instruction;
* an optional id is filled from the context or the most recent id of its
  kind (and also left out); another optional parameter is filled only from
  the instruction (``update_customer(email=...)`` with the email the customer
  wrote), and also left out.

The instruction's context comes first, then the records of the last result
(the screen the agent is on), then the records sharing most words with the
instruction (the line of the product the customer names), then the most
recently seen.

A call whose two text parameters would take one value is not made (the
customer's zip code is not also their phone's last digits). A write that
succeeded is not offered again on the same records with the same parameters.
Calls are deduplicated, capped per tool (:data:`PER_TOOL`, the most recent
contexts first) and dealt into the slots one tool at a time, in turns. A call
the agent already made is not offered again (its result is on its screen).

Features
--------
A fixed vector: a hashed bag of words of the instruction, of the last result
and of the last error's code and rule (``policy_refused``,
``refund_window``); the tools called so far; the step fraction; and
per slot: whether it holds a call, the tool (one-hot), whether the tool was
called before, how many of its values the instruction names and where, how much
of its context's text the instruction shares, how recent its context is,
whether a word of the tool's name is one of the instruction's (*cancel*),
whether the values the instruction names come there in the order of the
tool's parameters (the zip code, then the phone's last digits), how much the
records its ids name share with the instruction (least and most), its short
text arguments (an enum value such as ``urgent``), hashed, the words of
its longer texts (which macro a message is), hashed, and the words of the
record the call came from (the title of the article it opens), hashed.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import product
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from mirrorworld.core.task import ToolCall
from mirrorworld.core.tools import Param, ToolSpec

__all__ = ["PER_TOOL", "ActionMenu", "Features", "Menu", "Seen", "call_args", "menu_calls"]

PER_TOOL = 4
"""The most candidate calls one tool contributes to a menu (twice as many for a tool with a free-text
parameter, and for a tool that opens one record by its id: ``get_article`` of each article a search listed)."""

_WORDS = re.compile(r"[a-z][a-z0-9'-]+")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_NUMBER = re.compile(r"(?<![\w.])\d{3,12}(?![\w]|[.,]\d)")
_DATE = re.compile(r"\d{4}-\d\d-\d\d")
_REFERENCE = re.compile(r"#(\d{1,12})\b")
_DIGITS = re.compile(r"(?<![\w.#])\d{3,12}(?!\w|[.,]\d)")
_MENTION = re.compile(
    r"\b(ticket|order|invoice|sale|quotation|lead|opportunity|article|customer|party|request|approval|change)s?\s*"
    r"(?:#|no\.?|number|id)?\s*(\d{1,12})\b",
    re.I,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_MONEY_KEY = re.compile(r"price|amount|total|refund|paid|balance|cost|due|untaxed|tax")
_SLOT = re.compile(r"\{([a-z_]+)\}")
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "this",
        "that",
        "from",
        "your",
        "you",
        "are",
        "was",
        "has",
        "have",
        "not",
        "but",
        "can",
        "our",
        "its",
        "it's",
    ]
)


def _words(text: str) -> set[str]:
    return {w for w in _WORDS.findall(text.casefold()) if w not in _STOP}


@lru_cache(maxsize=4096)
def _singular(key: str) -> str:
    key = key.casefold()
    if key.endswith("ies"):
        return key[:-3] + "y"
    if key.endswith("s") and not key.endswith("ss"):
        return key[:-1]
    return key


@dataclass
class Context:
    """One record the agent was shown, with what surrounds it."""

    fields: dict[str, Any]
    seen_at: int
    """The step whose result showed it (0: the instruction)."""
    text: str = ""
    """Its words, for the overlap feature."""
    overlap: int = -1
    """How many of its words and numbers the instruction shares (computed once)."""
    _words: frozenset[str] | None = None

    def words(self) -> frozenset[str]:
        if self._words is None:
            self._words = frozenset(_words(self.text))
        return self._words

    def numbers(self) -> frozenset[str]:
        """The numbers its text writes (``order #886`` in a ticket's body)."""
        return frozenset(_NUMBER.findall(self.text))


@dataclass
class Seen:
    """What the agent has been shown in one episode: the instruction and every tool result."""

    instruction: str = ""
    contexts: list[Context] = field(default_factory=list)
    ids: dict[str, list[int]] = field(default_factory=dict)
    """``<kind>_id`` -> ids of that kind seen, most recent last."""
    words: set[str] = field(default_factory=set)
    """Every word shown (for enum values)."""
    instruction_words: set[str] = field(default_factory=set)
    instruction_numbers: frozenset[str] = frozenset()
    records: dict[tuple[str, int], Context] = field(default_factory=dict)
    """``(<kind>_id, id)`` -> the context of that record itself (its latest showing)."""

    def start(self, instruction: str) -> None:
        self.instruction = instruction
        self.contexts.clear()
        self.ids.clear()
        self.records.clear()
        self.instruction_words = _words(instruction)
        self.instruction_numbers = frozenset(_NUMBER.findall(instruction))
        self.words = set(self.instruction_words)
        fields: dict[str, Any] = {}
        for kind, number in _MENTION.findall(instruction):
            key = f"{_singular(kind)}_id"
            fields.setdefault(key, int(number))
            self._id(key, int(number))
        emails = _EMAIL.findall(instruction)
        if emails:
            fields["emails"] = emails
        if len(emails) >= 2:
            fields["new_email"] = emails[-1]  # "change the email on my account to ..."
        mentioned = {str(n) for _, n in _MENTION.findall(instruction)}
        fields["digits"] = [d for d in _DIGITS.findall(_EMAIL.sub(" ", instruction)) if d not in mentioned]
        last = [s for s in _SENTENCE.split(instruction.strip()) if _WORDS.search(s.casefold())][-1:] or [""]
        fields["keywords"] = [w for w in _WORDS.findall(last[0].casefold()) if len(w) >= 5 and w not in _STOP][-4:]
        self.contexts.append(Context(fields, 0, instruction))

    def ranked_ids(self, key: str, like: Context | None = None) -> list[int]:
        """Ids of one kind: those whose record shares most words with ``like`` first (a second ticket
        like the first), then with the instruction, then the most recent."""
        seen = self.ids.get(key) or []
        order = {v: i for i, v in enumerate(seen)}
        near = like.words() if like is not None else frozenset()

        def rank(v: int) -> tuple[int, int, int]:
            ctx = self.records.get((key, v))
            if ctx is None:
                return (0, 0, -order[v])
            return (-len(ctx.words() & near), -_overlap(ctx, self), -order[v])

        return sorted(seen, key=rank)

    def _id(self, key: str, value: int) -> None:
        seen = self.ids.setdefault(key, [])
        if value in seen:
            seen.remove(value)
        seen.append(value)

    def add(self, step: int, result: str, *, spoken: bool = False) -> None:
        """Read one tool result or, ``spoken``, a message from another party (JSON text; else only words).

        What a message's texts say becomes part of its context: a record it
        names (``"It's order #268."``: ``order_id``), a bare reference
        (``"#526"``: ``said_ids``) and every number (``"the code is 758268"``:
        ``numbers``), for the ids and codes the agent types back.
        """
        self.words |= _words(result[:4000])
        try:
            data = json.loads(result)
        except ValueError:
            return
        if isinstance(data, dict) and "error" not in data:
            self._walk(data, {}, step, "", spoken)

    def _said(self, own: dict[str, Any], texts: list[str]) -> None:
        """What a message's texts name: records (``order #268``), bare references (``#526``), numbers."""
        refs: list[int] = []
        numbers: list[str] = []
        for text in texts:
            for kind, number in _MENTION.findall(text):
                key = f"{_singular(kind)}_id"
                own.setdefault(key, int(number))
                self._id(key, int(number))
            refs += [int(n) for n in _REFERENCE.findall(text)]
            numbers += _NUMBER.findall(text)
        if refs:
            own["said_ids"] = list(dict.fromkeys(refs))
        if numbers:
            own["numbers"] = list(dict.fromkeys(numbers))

    def _walk(self, node: Any, around: dict[str, Any], step: int, name: str, spoken: bool = False) -> None:
        if isinstance(node, list):
            for item in node[:50]:
                self._walk(item, around, step, name, spoken)
            return
        if not isinstance(node, dict):
            return
        scalars = {k: v for k, v in node.items() if not isinstance(v, (dict, list))}
        kind = _singular(name) if name else ""
        own: dict[str, Any] = {}
        if kind and isinstance(scalars.get("id"), int):
            own[f"{kind}_id"] = scalars["id"]
        for k, v in scalars.items():
            if k != "id":
                own[k] = v
            if k.endswith("_id") and isinstance(v, int) and not isinstance(v, bool):
                self._id(k, v)
        for k, v in around.items():  # what surrounds the record comes after its own fields
            own.setdefault(k, v)
        if kind and isinstance(scalars.get("id"), int):
            own["id"] = scalars["id"]
            self._id(f"{kind}_id", scalars["id"])
        # What the records beside this one say, for its children and siblings.
        below = dict(around)
        for k, v in scalars.items():
            below[f"{kind}_{k}" if kind and k != "id" else (f"{kind}_id" if kind else k)] = v
        for k, v in node.items():
            if isinstance(v, dict) and isinstance(v.get("id"), int):
                below[f"{_singular(k)}_id"] = v["id"]
                for kk, vv in v.items():
                    if not isinstance(vv, (dict, list)) and kk != "id":
                        below.setdefault(f"{_singular(k)}_{kk}", vv)
        if scalars:
            text = " ".join(str(v) for v in scalars.values() if isinstance(v, str))
            if spoken:
                self._said(own, [v for v in scalars.values() if isinstance(v, str) and not _DATE.match(v)])
            ctx = Context(own, step, text)
            self.contexts.append(ctx)
            if kind and isinstance(scalars.get("id"), int):
                self.records[(f"{kind}_id", scalars["id"])] = ctx
        for k, v in node.items():
            if isinstance(v, (dict, list)):
                self._walk(v, below, step, k, spoken)


def _enum_values(param: Param, seen: Seen) -> list[Any]:
    """An enum's values, those the instruction names first, then those seen anywhere, then the rest."""
    values = list(param.schema.get("enum") or [])
    text = seen.instruction.casefold()

    def rank(v: Any) -> int:
        word = str(v).casefold()
        if word in seen.instruction_words or word.replace("_", " ") in text:
            return 0
        return 1 if word in seen.words else 2

    return sorted(values, key=rank)


def _best_sentence(body: str, seen: Seen) -> str:
    sentences = [s for s in _SENTENCE.split(body) if s.strip()]
    if not sentences:
        return ""
    return max(sentences, key=lambda s: (len(_words(s) & seen.instruction_words), -sentences.index(s)))


def _fill(template: str, ctx: dict[str, Any], seen: Seen) -> str | None:
    out = template
    for slot in _SLOT.findall(template):
        if slot == "best_sentence":
            body = ctx.get("body")
            value: Any = _best_sentence(body, seen) if isinstance(body, str) else None
        else:
            value = ctx.get(slot)
        if value is None or value == "" or isinstance(value, (dict, list)):
            return None
        if isinstance(value, float):
            value = f"{value:.2f}"
        out = out.replace("{" + slot + "}", str(value))
    return out


def _ref_key(param: Param) -> str:
    """The seen-id key a parameter's values come from: ``<table>_id`` of its reference, else its name."""
    if param.ref:
        return f"{_singular(param.ref)}_id"
    return param.name


def _is_id(param: Param) -> bool:
    return bool(param.ref) or (param.name.endswith("_id") and param.schema.get("type") == "integer")


def _values(
    param: Param,
    ctx: Context,
    seen: Seen,
    macros: Mapping[str, Sequence[str]],
    *,
    again: bool,
    like: Context | None = None,
) -> list[Any]:
    """The values ``param`` may take in context ``ctx``.

    ``again``: a second parameter of a kind the call already has, whose ids
    are ranked by likeness to ``like`` (the record the first one names).
    """
    f = ctx.fields
    if param.schema.get("enum"):
        return _enum_values(param, seen)
    if param.free_text:
        filled = [_fill(m, f, seen) for m in macros.get(param.name, ())]
        return list(dict.fromkeys(t for t in filled if t))
    if _is_id(param):
        key = _ref_key(param)
        mine = f.get(param.name, f.get(key))
        if mine is not None and not again:
            return [mine]
        said = list(f.get("said_ids", ()))[:2]
        ranked = seen.ranked_ids(key, (like or ctx) if again else None)
        return list(dict.fromkeys([*said, *(v for v in ranked if v != mine)]))[:4]
    own = f.get(param.name)
    if own is not None and not isinstance(own, (dict, list)):
        return [own]
    kind = param.schema.get("type")
    if kind == "string" and f.get("numbers"):
        return list(f["numbers"])[:2]
    if kind in ("number", "integer"):
        amounts = [
            v
            for k, v in f.items()
            if _MONEY_KEY.search(k) and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
        ]
        return list(dict.fromkeys(amounts))[:3]
    if kind == "string" and ctx.seen_at == 0:
        if "mail" in param.name:
            return list(f.get("emails", []))
        if "query" in param.name:
            return [*f.get("keywords", [])[-3:], *f.get("emails", [])[:1]]
        if "value" in param.name:  # a new value the instruction gives (an email, a phone's digits)
            return [*f.get("emails", [])[-1:], *f.get("digits", [])[:2]]
        return list(f.get("digits", []))[:4]
    return []


def _overlap(ctx: Context, seen: Seen) -> int:
    """How many words and numbers a context's text shares with the instruction (how much the case is about it)."""
    if ctx.overlap < 0:
        ctx.overlap = len(ctx.words() & seen.instruction_words) + len(ctx.numbers() & seen.instruction_numbers)
    return ctx.overlap


def _tool_calls(
    spec: ToolSpec, seen: Seen, macros: Mapping[str, Sequence[str]], contexts: Sequence[Context]
) -> Iterator[tuple[ToolCall, Context]]:
    required = [p for p in spec.params if p.required]
    optional = [p for p in spec.params if not p.required and p.schema.get("type") != "boolean"]
    for ctx in contexts:
        choices: list[list[tuple[str, Any]]] = []
        kinds: dict[str, Any] = {}
        for p in required:
            key = _ref_key(p) if _is_id(p) else ""
            again = bool(key) and key in kinds
            like = seen.records.get((key, kinds[key])) if again else None
            values = _values(p, ctx, seen, macros, again=again, like=like)
            if not values:
                break
            kinds.setdefault(key, values[0])
            choices.append([(p.name, v) for v in values[:6]])
        else:
            extra: dict[str, Any] = {}
            given: list[tuple[str, Any]] = []
            for p in optional:
                if p.free_text:
                    continue
                if _is_id(p):
                    value = ctx.fields.get(p.name)
                    if value is None and seen.ids.get(_ref_key(p)):
                        value = seen.ids[_ref_key(p)][-1]
                    if isinstance(value, int) and not isinstance(value, bool):
                        extra[p.name] = value
                elif ctx.seen_at == 0 and not p.schema.get("enum"):
                    given += [(p.name, v) for v in _values(p, ctx, seen, macros, again=False)[:3]]
            ranked = sorted(product(*(range(len(c)) for c in choices)), key=sum)
            for ranks in ranked:
                args = dict(choices[j][r] for j, r in enumerate(ranks))
                texts = [a for a in args.values() if isinstance(a, str)]
                if len(set(texts)) < len(texts):  # one value the customer gave does not fill two fields
                    continue
                yield ToolCall(spec.name, {**args, **extra}), ctx
                for name, value in given:
                    yield ToolCall(spec.name, {**args, name: value}), ctx
                if extra or given:
                    yield ToolCall(spec.name, args), ctx


def _is_read(spec: ToolSpec) -> bool:
    """A tool that opens one record by its id (``get_article``): one candidate per record shown."""
    return len(spec.params) == 1 and _is_id(spec.params[0])


def menu_calls(
    tools: Sequence[ToolSpec], seen: Seen, macros: Mapping[str, Sequence[str]], slots: int
) -> list[tuple[ToolCall, Context]]:
    """The candidate calls of a menu (see the module docstring), at most ``slots``.

    Each tool's candidates (at most :data:`PER_TOOL`, its most recent contexts
    first) are dealt into the slots in turns, one per tool per turn, so that no
    tool's many combinations crowd out another's.
    """
    per_tool: list[list[tuple[ToolCall, Context]]] = []
    newest = max((c.seen_at for c in seen.contexts), default=0)
    contexts = sorted(
        seen.contexts, key=lambda c: (c.seen_at != 0, c.seen_at != newest, -_overlap(c, seen), -c.seen_at)
    )
    for spec in tools:
        if any(p.required and p.schema.get("type") == "array" for p in spec.params):
            continue
        keys: set[tuple[Any, ...]] = set()
        mine: list[tuple[ToolCall, Context]] = []
        cap = PER_TOOL * (2 if any(p.free_text for p in spec.params) or _is_read(spec) else 1)
        for call, ctx in _tool_calls(spec, seen, macros, contexts):
            key = _key(call)
            if key not in keys:
                keys.add(key)
                mine.append((call, ctx))
                if len(mine) >= cap:
                    break
        if mine:
            per_tool.append(mine)
    out: list[tuple[ToolCall, Context]] = []
    turn = 0
    while len(out) < slots and any(turn < len(m) for m in per_tool):
        out += [m[turn] for m in per_tool if turn < len(m)][: slots - len(out)]
        turn += 1
    return out


# -- features -----------------------------------------------------------------------------


_VALUE_BUCKETS = 16
"""Hash buckets of a slot's short text arguments (an enum value: ``urgent``, ``damaged``)."""
_TEXT_BUCKETS = 32
"""Hash buckets of the words of a slot's longer texts (which macro a message is: *refunded* or *can't*)."""
_CONTEXT_BUCKETS = 64
"""Hash buckets of the words of the record a slot's call came from (the article titled *Return policy: home*)."""


@lru_cache(maxsize=4096)
def _text_words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORDS.findall(text.casefold()) if len(w) >= 4 and not any(c.isdigit() for c in w))


@lru_cache(maxsize=65536)
def _bucket(word: str, n: int) -> int:
    return zlib.crc32(word.encode()) % n


@dataclass(frozen=True)
class Features:
    """The layout of the observation vector (see the module docstring)."""

    n_tools: int
    slots: int
    vocab: int = 256

    @property
    def per_slot(self) -> int:
        return self.n_tools + 11 + _VALUE_BUCKETS + _TEXT_BUCKETS + _CONTEXT_BUCKETS

    @property
    def size(self) -> int:
        return 3 * self.vocab + self.n_tools + 3 + self.slots * self.per_slot

    def space(self) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, shape=(self.size,), dtype=np.float32)


class Menu:
    """One agent's menu over one episode: what it has seen, the slots, the mask and the features.

    :class:`ActionMenu` (Gymnasium) holds one; the PettingZoo wrapper
    (:mod:`mirrorworld.envs.menu_pettingzoo`) one per agent, over the tools of
    the agent's seat.
    """

    def __init__(
        self, tools: Sequence[ToolSpec], macros: Mapping[str, Sequence[str]], slots: int, max_steps: int
    ) -> None:
        self.tools = tuple(tools)
        self.macros = macros
        self.slots = slots
        self.max_steps = max(int(max_steps), 1)
        self.layout = Features(len(self.tools), slots)
        self._tool_index = {t.name: i for i, t in enumerate(self.tools)}
        self.seen = Seen()
        self.items: list[tuple[ToolCall, Context]] = []
        self._stale = True
        self._tool_words: dict[str, float] = {}
        self._called: set[tuple[Any, ...]] = set()
        self._done: set[tuple[Any, ...]] = set()
        self._pending: ToolCall | None = None
        self._writes = {  # writes that act on records, not messages (asking the customer again is a new question)
            t.name for t in self.tools if t.kind == "write" and not any(p.free_text and p.required for p in t.params)
        }
        self._tools_called = np.zeros(len(self.tools), dtype=np.float32)
        self._last = ""
        self._error = ""
        self._steps = 0

    def start(self, instruction: str) -> None:
        """A new episode whose instruction (or briefing) is ``instruction``."""
        self.seen.start(instruction)
        self._called.clear()
        self._done.clear()
        self._pending = None
        self._stale = True
        self._tools_called[:] = 0
        self._last, self._error, self._steps = "", "", 0
        stems = {w[:5] for w in self.seen.instruction_words}
        self._tool_words = {
            t.name: float(any(part[:5] in stems for part in t.name.split("_") if len(part) >= 4)) for t in self.tools
        }

    def choose(self, action: Any) -> ToolCall | None:
        """The call in the slot ``action`` names (None: an empty slot or not a slot).

        A call once made is not offered again: its result is on the agent's screen.
        Once a write succeeds, no call of that tool on the same records with the
        same parameters is offered again (a second refund of the refunded line
        with another reason): what it did is done. Writes that send a message
        (a question to the customer) stay on offer.
        """
        slot = _slot(action)
        if not 0 <= slot < len(self.items):
            return None
        call = self.items[slot][0]
        self._called.add(_key(call))
        self._pending = call
        self._stale = True
        self._tools_called[self._tool_index[call.tool]] = 1.0
        return call

    def shown(self, result: str) -> None:
        """What the last call returned (JSON text; an error is ``{"error": {...}}``)."""
        self._steps += 1
        self._last = result
        self._error = ""
        if result.startswith('{"error"'):
            try:
                error = json.loads(result)["error"]
                self._error = f"{error.get('code', '')}:{error.get('rule') or ''}"
            except (ValueError, AttributeError, KeyError, TypeError):
                self._error = "error"
        else:
            if self._pending is not None and self._pending.tool in self._writes:
                self._done.add(_target(self._pending))
            self.seen.add(self._steps, result)
            self._stale = True
        self._pending = None

    def note(self, text: str) -> None:
        """Something else the agent was shown (a message from another party)."""
        self.seen.add(self._steps, text, spoken=True)
        self._stale = True

    def refresh(self, *, over: bool) -> None:
        """Rebuild the slots if something new was seen (none once the episode is over)."""
        if over:
            self.items = []
        elif self._stale:
            self.items = [
                item
                for item in menu_calls(self.tools, self.seen, self.macros, self.slots + len(self._called))
                if _key(item[0]) not in self._called and (not self._done or _target(item[0]) not in self._done)
            ][: self.slots]
        self._stale = False

    def mask(self) -> np.ndarray:
        """Which slots hold a call (the first, when none does: an action is still taken, and refused)."""
        mask = np.zeros(self.slots, dtype=bool)
        mask[: len(self.items)] = True
        if not mask.any():
            mask[0] = True
        return mask

    @property
    def calls(self) -> list[ToolCall]:
        return [call for call, _ in self.items]

    def features(self) -> np.ndarray:
        """The observation vector (see the module docstring)."""
        lay = self.layout
        v = np.zeros(lay.size, dtype=np.float32)
        seen = self.seen
        for w in seen.instruction_words:
            v[_bucket(w, lay.vocab)] = 1.0
        for w in _words(self._last[:2000]):
            v[lay.vocab + _bucket(w, lay.vocab)] = 1.0
        if self._error:
            for part in self._error.split(":"):
                if part:
                    v[2 * lay.vocab + _bucket(part, lay.vocab)] = 1.0
        base = 3 * lay.vocab
        v[base : base + lay.n_tools] = self._tools_called
        base += lay.n_tools
        v[base] = min(self._steps / self.max_steps, 1.0)
        v[base + 1] = 1.0 if self._error else 0.0
        v[base + 2] = min(len(self.items) / self.slots, 1.0)
        base += 3
        instruction = seen.instruction.casefold()
        length = max(len(instruction), 1)
        newest = max((c.seen_at for c in seen.contexts), default=0)
        by_id: dict[int, list[tuple[str, Context]]] = {}
        for (key, ident), record in seen.records.items():
            by_id.setdefault(ident, []).append((key, record))
        most = max((_overlap(r, seen) for r in seen.records.values()), default=0) or 1
        for i, (call, ctx) in enumerate(self.items):
            o = base + i * lay.per_slot
            v[o] = 1.0
            v[o + 1 + self._tool_index[call.tool]] = 1.0
            k = o + 1 + lay.n_tools
            v[k] = self._tools_called[self._tool_index[call.tool]]
            values = [
                str(a).casefold() for a in call_args(call).values() if not isinstance(a, bool) and len(str(a)) < 80
            ]
            found = [instruction.find(a) for a in values if a and a in instruction]
            v[k + 1] = len(found) / len(values) if values else 0.0
            v[k + 2] = (sum(found) / len(found) / length) if found else 0.0
            words = ctx.words()
            v[k + 3] = len(words & seen.instruction_words) / len(words) if words else 0.0
            v[k + 4] = ctx.seen_at / newest if newest else 0.0
            v[k + 5] = 1.0 if ctx.seen_at == newest else 0.0
            v[k + 6] = self._tool_words.get(call.tool, 0.0)
            v[k + 7] = 1.0 if len(found) >= 2 and found == sorted(found) else 0.0
            named = [
                _overlap(record, seen) / most
                for name, a in call_args(call).items()
                if isinstance(a, int) and not isinstance(a, bool)
                for key, record in by_id.get(a, ())
                if name.endswith(key)
            ]
            if named:  # how much the records the call names are about the case (the merge target's subject)
                v[k + 8], v[k + 9] = min(named), max(named)
            t = k + 10
            for a in call_args(call).values():
                if isinstance(a, str) and len(a) <= 24:
                    v[t + _bucket(a.casefold(), _VALUE_BUCKETS)] = 1.0
                elif isinstance(a, str):
                    for w in _text_words(a):
                        v[t + _VALUE_BUCKETS + _bucket(w, _TEXT_BUCKETS)] = 1.0
            c = t + _VALUE_BUCKETS + _TEXT_BUCKETS
            for w in words:
                v[c + _bucket(w, _CONTEXT_BUCKETS)] = 1.0
        return v


class ActionMenu(gym.Wrapper[np.ndarray, np.int64, dict[str, Any], dict[str, Any]]):
    """A :class:`~mirrorworld.envs.gymnasium.MirrorEnv` behind an action menu. See the module docstring.

    ``slots`` is the size of the menu (and of the ``Discrete`` action space). An
    action on an empty slot is passed on as a call the world answers with an
    error (the agent's mistake, not a crash). ``info["action_mask"]`` and
    :meth:`action_masks` give the slots that hold a call; ``info["menu"]`` (on
    request, ``describe=True``) the calls themselves.
    """

    def __init__(
        self, env: gym.Env[Any, Any], *, slots: int = 48, describe: bool = False, mask_in_observation: bool = False
    ) -> None:
        super().__init__(env)
        base = env.unwrapped
        world = getattr(base, "world", None)
        if world is None:
            raise TypeError("ActionMenu wraps a mirrorworld MirrorEnv")
        self.world = world
        self.state = Menu(world.tools, world.menu_macros(), slots, int(getattr(base, "max_steps", 30)))
        self.layout = self.state.layout
        self.slots = slots
        self.describe = describe
        self.mask_in_observation = mask_in_observation
        self.observation_space: spaces.Space[Any] = (
            spaces.Dict({"observation": self.layout.space(), "action_mask": spaces.MultiBinary(slots)})
            if mask_in_observation
            else self.layout.space()
        )
        self.action_space = spaces.Discrete(slots)

    @property
    def seen(self) -> Seen:
        return self.state.seen

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.state.start(str(obs["instruction"]))
        return self._observe(info)

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        call = self.state.choose(action)
        inner: dict[str, Any]
        if call is not None:
            inner = {"tool_name": call.tool, "tool_args": call_args(call)}
        else:
            inner = {"tool_name": f"empty-slot-{_slot(action)}", "tool_args": {}}
        obs, reward, terminated, truncated, info = self.env.step(inner)  # type: ignore[arg-type]
        self.state.shown(str(obs["last_result"]))
        features, info = self._observe(info)
        return features, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """Which slots hold a call (sb3-contrib's ``MaskablePPO`` reads this)."""
        return self.state.mask()

    @property
    def menu(self) -> list[ToolCall]:
        """The calls in the slots now."""
        return self.state.calls

    def _observe(self, info: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
        episode = getattr(self.env.unwrapped, "episode", None)
        self.state.refresh(over=episode is not None and episode.over)
        info = dict(info)
        info["action_mask"] = self.state.mask()
        if self.describe:
            info["menu"] = [{"tool": c.tool, "args": c.args} for c in self.menu]
        features = self.state.features()
        if self.mask_in_observation:
            observation: Any = {"observation": features, "action_mask": info["action_mask"].astype(np.int8)}
            return observation, info
        return features, info


def call_args(call: ToolCall) -> dict[str, Any]:
    """A menu call's arguments (the menu builds them as a dict; anything else reads as none)."""
    return call.args if isinstance(call.args, dict) else {}


def _target(call: ToolCall) -> tuple[Any, ...]:
    """A call's tool, the ids it names and the names of its other parameters (what a write acts on)."""
    args = call_args(call)
    ids = tuple((k, v) for k, v in args.items() if isinstance(v, int) and not isinstance(v, bool) and k.endswith("_id"))
    return (call.tool, ids, tuple(sorted(k for k in args if not k.endswith("_id"))))


def _key(call: ToolCall) -> tuple[Any, ...]:
    return (call.tool, *call_args(call).items())


def _slot(action: Any) -> int:
    """The slot an action names: an int, a NumPy integer or a 0-d (or one-element) array; -1 otherwise."""
    if isinstance(action, np.ndarray) and action.size == 1 and action.dtype.kind in "iu":
        return int(action.reshape(()))
    if isinstance(action, (int, np.integer)) and not isinstance(action, bool):
        return int(action)
    try:
        import torch

        if isinstance(action, torch.Tensor) and action.numel() == 1 and not action.is_floating_point():
            return int(action.item())
    except ImportError:  # pragma: no cover - torch is optional
        pass
    return -1
