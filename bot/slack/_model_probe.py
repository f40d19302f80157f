"""`handback doctor`'s model check: one small Chat Completions call with a tool.

A mistyped model name, a deployment that does not exist, or a server that cannot call tools
(vLLM without `--enable-auto-tool-choice`, an Ollama model without tool support) would otherwise
pass every start-up check and fail at the first message. The call asks for one short word with
one trivial tool offered; only when it is refused is a second call made without the tool, to tell
"this model refuses tools" from every other refusal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .._model import OpenAIModel

__all__ = ["ModelProbe", "probe_model"]

TIMEOUT = 30.0
"""Seconds for each probe call: a cold local model (Ollama loading weights) can take a while."""

_MESSAGES = [{"role": "user", "content": "Reply with the single word: ok"}]
_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "handback_probe",
            "description": "Never needed; offered only to check that tools are accepted.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


@dataclass(kw_only=True, frozen=True)
class ModelProbe:
    """What the model server said, in one line."""

    ok: bool
    kind: Literal["ok", "not_found", "no_tools", "refused", "unreachable"]
    detail: str


async def probe_model(model: OpenAIModel) -> ModelProbe:
    """Ask the model once (twice when refused), without retries, and say what came of it."""
    from openai import APIConnectionError, APIStatusError, NotFoundError

    client = (await model.client()).with_options(max_retries=0, timeout=TIMEOUT)
    create: Any = client.chat.completions.create
    try:
        await create(model=model.name, messages=_MESSAGES, tools=_TOOLS)
    except NotFoundError as error:
        return ModelProbe(
            ok=False,
            kind="not_found",
            detail=f"the server has no model `{model.name}` ({_said(error)}): check the name "
            "(on Azure, the deployment name)",
        )
    except APIConnectionError as error:
        return ModelProbe(ok=False, kind="unreachable", detail=f"out of reach ({_one_line(error)})")
    except APIStatusError as first:
        try:
            await create(model=model.name, messages=_MESSAGES)
        except (APIStatusError, APIConnectionError):
            return ModelProbe(
                ok=False,
                kind="refused",
                detail=f"the server refused a call (HTTP {first.status_code}: {_said(first)})",
            )
        return ModelProbe(
            ok=False,
            kind="no_tools",
            detail=f"`{model.name}` answers but refuses tool calls (HTTP {first.status_code}: "
            f"{_said(first)}): handback needs a model and server with tool calling (vLLM: "
            "--enable-auto-tool-choice --tool-call-parser ...; Ollama: a model tagged `tools`)",
        )
    return ModelProbe(ok=True, kind="ok", detail="answered a call with tools")


def _said(error: Any) -> str:
    """The server's own message, from OpenAI's `{"error": {"message"}}` or vLLM's flat body."""
    body = getattr(error, "body", None)
    message: object = None
    if isinstance(body, dict):
        inner = body.get("error")
        message = inner.get("message") if isinstance(inner, dict) else body.get("message")
    return _one_line(message if isinstance(message, str) and message else error)


def _one_line(value: object, limit: int = 200) -> str:
    """A server's text on one line, without control characters (it is not ours: a terminal
    escape in it must not reach the operator's terminal)."""
    text = " ".join("".join(c if c.isprintable() else " " for c in str(value)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
