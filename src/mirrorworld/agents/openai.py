"""An agent backed by any OpenAI-compatible chat-completions endpoint.

Uses only the standard library (``urllib``): ``POST {base_url}/chat/completions``
with the conversation and the tools, and plays the returned message. The API
key comes from the ``api_key`` argument or ``OPENAI_API_KEY``. Transport
failures and malformed responses raise :class:`AgentError` after ``retries``.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

from mirrorworld.agents.base import Agent, Message
from mirrorworld.errors import AgentError

__all__ = ["OpenAIAgent", "chat_endpoint", "post_chat"]


class OpenAIAgent(Agent):
    """Chat-completions agent. See the module docstring."""

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        temperature: float = 0.0,
        timeout: float = 120.0,
        retries: int = 2,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.url = chat_endpoint(base_url)
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.temperature = temperature
        self.timeout = timeout
        self.retries = retries
        self.extra_body = extra_body or {}

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Message:
        body = {
            "model": self.model,
            "messages": messages,
            "tools": tools,
            "tool_choice": "auto",
            "temperature": self.temperature,
            **self.extra_body,
        }
        return _message(post_chat(self.url, body, api_key=self.api_key, timeout=self.timeout, retries=self.retries))


def chat_endpoint(base_url: str) -> str:
    """``{base_url}/chat/completions``, refusing anything but an http(s) URL."""
    if not base_url.startswith(("http://", "https://")):
        raise AgentError(f"base URL must start with http:// or https://, got {base_url!r}")
    return base_url.rstrip("/") + "/chat/completions"


def post_chat(url: str, body: dict[str, Any], *, api_key: str | None, timeout: float, retries: int) -> Any:
    """POST a chat-completions request, retrying 5xx, 429 and network errors; the decoded JSON reply.

    Raises :class:`~mirrorworld.errors.AgentError` (an ``infrastructure``
    failure) with the last reason when no usable reply came back.
    """
    data = json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    last = ""
    for attempt in range(retries + 1):
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read().decode())
        except urllib.error.HTTPError as err:
            last = f"HTTP {err.code} from {url}"
            if err.code < 500 and err.code != 429:
                break
        except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
            last = f"cannot reach {url}: {getattr(err, 'reason', err)}"
        except ValueError:
            last = f"{url} returned a response that is not JSON"
            break
        time.sleep(min(2.0, 0.2 * 2**attempt))
    raise AgentError(last)


def _message(payload: Any) -> Message:
    try:
        msg = payload["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise AgentError("the endpoint's response has no choices[0].message") from None
    if not isinstance(msg, dict):
        raise AgentError("the endpoint's message is not an object")
    out: Message = {"role": "assistant", "content": msg.get("content")}
    if msg.get("tool_calls"):
        out["tool_calls"] = msg["tool_calls"]
    return out
