"""An agent backed by any OpenAI-compatible chat-completions endpoint, through the official ``openai`` SDK.

:class:`Endpoint` is the transport, shared with the model judge
(:mod:`mirrorworld.agents.judge`): ``POST {base_url}/chat/completions`` through
``openai.OpenAI`` (the ``openai`` extra), with

* the **base URL** from the argument, else ``OPENAI_BASE_URL``, else the SDK's
  default; the **API key** from the environment variable ``api_key_env``
  (``OPENAI_API_KEY`` unless told otherwise), never from a run file: a run
  records the variable's name, not its value. A server of one's own that
  checks no key needs none (:data:`NO_KEY` is sent); OpenAI's API does;
* a **timeout** per request and **retries** the SDK makes on connection errors,
  408, 409, 429 and 5xx, waiting what ``Retry-After`` (or ``retry-after-ms``)
  asks for, up to two minutes, and backing off exponentially otherwise.

Whatever keeps a usable reply from coming back is an
:class:`~mirrorworld.errors.AgentError`, an ``infrastructure`` failure: the
episode is recorded as errored, never scored (see :mod:`mirrorworld.run.runner`).
Its message says what happened and keeps the server's reason: ``HTTP 400 from
http://host/v1/chat/completions: The model `x` does not exist`` (the ``error.message``
of an OpenAI-style error body, else the first 300 characters of the body), a
timeout with its length, an unreachable host, a body that is not JSON or has no
``choices[0].message``.

:class:`OpenAIAgent` plays the returned message as it is, tool calls included:
tool-call arguments that are not valid JSON are the model's mistake, which the
episode answers with an error observation and grades. The agent counts the
tokens the endpoint reports (``usage``) per episode (:meth:`OpenAIAgent.usage`)
and describes itself for the run file (:meth:`OpenAIAgent.describe`: model,
base URL, sampling, timeout, retries, the key's variable name).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from mirrorworld.agents.base import Agent, EpisodeContext, Message
from mirrorworld.errors import AgentError, MirrorworldError

__all__ = ["DEFAULT_KEY_ENV", "Endpoint", "OpenAIAgent", "Sampling", "sdk_version"]

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
"""The environment variable the API key is read from unless another is named."""

NO_KEY = "EMPTY"
"""The key sent to a server when none is set (servers that check no key, such as vLLM's, take this one)."""

_REASON_CHARS = 300
"""How much of an endpoint's error body a failure's message keeps."""


def _sdk() -> Any:
    try:
        import openai
    except ImportError:
        raise MirrorworldError(
            "the openai agent and the model judge need the openai SDK: pip install 'mirrorworld[openai]'"
        ) from None
    return openai


def sdk_version() -> str | None:
    """The installed ``openai`` SDK's version, or None when it is not installed."""
    try:
        import openai
    except ImportError:
        return None
    return str(openai.__version__)


@dataclass(frozen=True, slots=True)
class Sampling:
    """The sampling parameters sent with every request (None: the endpoint's default)."""

    temperature: float | None = 0.0
    top_p: float | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.temperature is not None and not 0.0 <= self.temperature <= 2.0:
            raise MirrorworldError(f"temperature must be within 0 and 2, not {self.temperature}")
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise MirrorworldError(f"top_p must be within 0 (excluded) and 1, not {self.top_p}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise MirrorworldError(f"max_tokens must be at least 1, not {self.max_tokens}")

    def body(self) -> dict[str, Any]:
        """The request fields these parameters set."""
        out: dict[str, Any] = {}
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.top_p is not None:
            out["top_p"] = self.top_p
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
        return out


class Endpoint:
    """An OpenAI-compatible chat-completions endpoint. See the module docstring."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        api_key_env: str = DEFAULT_KEY_ENV,
        timeout: float = 120.0,
        retries: int = 2,
    ) -> None:
        openai = _sdk()
        base = base_url or os.environ.get("OPENAI_BASE_URL") or None
        if base is not None and not base.startswith(("http://", "https://")):
            raise MirrorworldError(f"the base URL must start with http:// or https://, not {base[:100]!r}")
        if not timeout > 0:
            raise MirrorworldError(f"the timeout must be positive, not {timeout}")
        if retries < 0:
            raise MirrorworldError(f"retries must be at least 0, not {retries}")
        if not api_key_env or not api_key_env.replace("_", "").isalnum():
            raise MirrorworldError(f"--api-key-env takes an environment variable's name, not {api_key_env[:60]!r}")
        if api_key is None:
            api_key = os.environ.get(api_key_env)
            if api_key is None and api_key_env != DEFAULT_KEY_ENV:
                raise MirrorworldError(f"the environment variable {api_key_env} (the API key) is not set")
            if api_key is None and base is None:
                raise MirrorworldError(
                    f"{DEFAULT_KEY_ENV} is not set: OpenAI's API needs a key (or give --base-url of another server)"
                )
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.retries = int(retries)
        # A local server needs no key, but the SDK refuses to start without one: it is sent the usual placeholder.
        self.client = openai.OpenAI(base_url=base, api_key=api_key or NO_KEY, timeout=self.timeout, max_retries=retries)
        self.base_url = str(self.client.base_url).rstrip("/")
        self.url = f"{self.base_url}/chat/completions"

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST one chat-completions request; the decoded JSON reply (an object), or an :class:`AgentError`."""
        openai = _sdk()
        fields = dict(body)
        standard = {k: fields.pop(k) for k in list(fields) if k in _STANDARD}
        try:
            raw = self.client.chat.completions.with_raw_response.create(**standard, extra_body=fields or None)
        except openai.APIStatusError as err:
            raise AgentError(f"HTTP {err.status_code} from {self.url}: {_reason(err)}") from None
        except openai.APITimeoutError:
            raise AgentError(f"no reply from {self.url} within {self.timeout:g} s ({self.retries} retries)") from None
        except openai.APIConnectionError as err:
            cause = err.__cause__ or err
            raise AgentError(f"cannot reach {self.url}: {str(cause)[:_REASON_CHARS] or type(cause).__name__}") from None
        except openai.OpenAIError as err:
            raise AgentError(f"{self.url}: {str(err)[:_REASON_CHARS]}") from None
        text = raw.text
        try:
            payload = json.loads(text)
        except ValueError:
            raise AgentError(f"{self.url} replied with a body that is not JSON: {text[:120]!r}") from None
        if not isinstance(payload, dict):
            raise AgentError(f"{self.url} replied with JSON that is not an object")
        return payload

    def describe(self) -> dict[str, Any]:
        """The transport as a run file records it (the key's variable name, never the key)."""
        return {
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "timeout_s": self.timeout,
            "retries": self.retries,
            "sdk": f"openai {sdk_version()}",
        }


_STANDARD = frozenset(
    {"model", "messages", "tools", "tool_choice", "temperature", "top_p", "max_tokens", "response_format", "seed"}
)
"""Request fields the SDK takes as arguments; any other goes in ``extra_body``."""


def _reason(err: Any) -> str:
    """The server's reason in an error response: ``error.message`` of an OpenAI-style body, else the body's start."""
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if isinstance(message, str) and message.strip():
            return message.strip()[:_REASON_CHARS]
    try:
        text = err.response.text
    except Exception:  # a response whose body cannot be read says only its status
        text = ""
    return (text.strip() or "(empty body)")[:_REASON_CHARS]


class OpenAIAgent(Agent):
    """Chat-completions agent. See the module docstring."""

    name = "openai"

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = DEFAULT_KEY_ENV,
        sampling: Sampling | None = None,
        timeout: float = 120.0,
        retries: int = 2,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        if not model:
            raise MirrorworldError("the openai agent needs a model name (--model)")
        self.model = model
        self.sampling = sampling or Sampling()
        self.endpoint = Endpoint(base_url, api_key=api_key, api_key_env=api_key_env, timeout=timeout, retries=retries)
        self.extra_body = dict(extra_body or {})
        self._usage: dict[str, int] = {}

    def reset(self, context: EpisodeContext) -> None:
        self._usage = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        body: dict[str, Any] = {"model": self.model, "messages": messages, **self.sampling.body(), **self.extra_body}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        self._usage["requests"] = self._usage.get("requests", 0) + 1  # one per turn asked, answered or not
        payload = self.endpoint.chat(body)
        self._count(payload.get("usage"))
        return _message(payload)

    def _count(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**40:
                self._usage[key] = self._usage.get(key, 0) + value

    def usage(self) -> dict[str, int] | None:
        return dict(self._usage) if self._usage else None

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model": self.model,
            **self.endpoint.describe(),
            "sampling": {k: v for k, v in asdict(self.sampling).items() if v is not None},
        }


def _message(payload: dict[str, Any]) -> Message:
    try:
        msg = payload["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise AgentError("the endpoint's reply has no choices[0].message") from None
    if not isinstance(msg, dict):
        raise AgentError("the endpoint's choices[0].message is not an object")
    content = msg.get("content")
    if content is not None and not isinstance(content, str):
        raise AgentError("the endpoint's message content is neither text nor null")
    out: Message = {"role": "assistant", "content": content}
    calls = msg.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise AgentError("the endpoint's tool_calls is not a list")
        out["tool_calls"] = calls
    return out
