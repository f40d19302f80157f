"""A local OpenAI-compatible Chat Completions server driven by a script.

The real `openai` client talks to it over HTTP, streaming and not, so tests and the offline demo
exercise exactly the code path a hosted model uses.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from aiohttp import web

from ._function_model import ScriptReply, to_response

__all__ = ["OpenAICompatServer"]

Script = Callable[[list[dict[str, Any]]], ScriptReply | Awaitable[ScriptReply]]


class OpenAICompatServer:
    """`/v1/chat/completions` and `/v1/models` on 127.0.0.1; an async context manager.

    By default any model name is served and tools are accepted. `models=` makes it answer
    like OpenAI for a name it does not serve (404 `model_not_found`), and `tools=False` like a
    vLLM started without `--enable-auto-tool-choice` (400 for any request carrying tools), so
    `handback doctor` can be tested against both refusals.
    """

    def __init__(
        self,
        fn: Script,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "scripted",
        models: Collection[str] | None = None,
        tools: bool = True,
    ) -> None:
        self.fn = fn
        self.host = host
        self.port = port
        self.model = model
        self.models = None if models is None else frozenset(models)
        self.tools = tools
        self.requests: list[dict[str, Any]] = []
        """Every request body received, in order."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        # Azure OpenAI's own route: the deployment in the path, `api-version` in the query, the
        # key in an `api-key` header (what `openai.AsyncAzureOpenAI` sends).
        app.router.add_post(
            "/openai/deployments/{deployment}/chat/completions", self._azure_completions
        )
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None)

    @property
    def base_url(self) -> str:
        """What `OPENAI_BASE_URL` must be set to."""
        return f"http://{self.host}:{self.port}/v1"

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def aclose(self) -> None:
        await self._runner.cleanup()

    async def __aenter__(self) -> OpenAICompatServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _models(self, request: web.Request) -> web.Response:
        names = sorted(self.models) if self.models is not None else [self.model]
        return web.json_response(
            {"object": "list", "data": [{"id": name, "object": "model"} for name in names]}
        )

    def _refusal(self, body: dict[str, Any]) -> web.Response | None:
        """What a real server says to a model it does not serve, or to tools it cannot call."""
        name = body.get("model")
        if self.models is not None and name not in self.models:
            return web.json_response(
                {
                    "error": {
                        "message": f"The model `{name}` does not exist or you do not have "
                        "access to it.",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": "model_not_found",
                    }
                },
                status=404,
            )
        if not self.tools and body.get("tools"):
            return web.json_response(
                {
                    "object": "error",
                    "message": '"auto" tool choice requires --enable-auto-tool-choice and '
                    "--tool-call-parser to be set",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                },
                status=400,
            )
        return None

    @property
    def azure_endpoint(self) -> str:
        """What `AsyncAzureOpenAI(azure_endpoint=...)` must be given."""
        return f"http://{self.host}:{self.port}"

    async def _azure_completions(self, request: web.Request) -> web.StreamResponse:
        if not request.query.get("api-version") or not request.headers.get("api-key"):
            return web.json_response(
                {"error": {"code": "404", "message": "Resource not found"}}, status=404
            )
        return await self._completions(request, model=request.match_info["deployment"])

    async def _completions(
        self, request: web.Request, *, model: str | None = None
    ) -> web.StreamResponse:
        try:
            body = await request.json()
            if model is not None:  # Azure serves the deployment of the path, whatever the body
                body["model"] = model
            messages = body["messages"]
        except (ValueError, KeyError, TypeError):
            messages = None
        # The script and the usage count read messages as a list of dicts; anything else would
        # be a 500, which the openai client retries.
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return web.json_response(
                {
                    "error": {
                        "message": "body must be a JSON object with a `messages` list of objects",
                        "type": "invalid_request_error",
                    }
                },
                status=400,
            )
        self.requests.append(body)
        refused = self._refusal(body)
        if refused is not None:
            return refused
        reply = self.fn(messages)
        if inspect.isawaitable(reply):
            reply = await reply
        response = to_response(reply)
        usage = {
            "prompt_tokens": sum(len(str(m.get("content") or "")) // 4 + 1 for m in messages),
            "completion_tokens": len(response.text) // 4 + 1,
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        calls: list[dict[str, Any]] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in response.tool_calls
        ]
        finish = "tool_calls" if calls else "stop"
        base = {
            "id": f"chatcmpl-{len(self.requests)}",
            "created": int(time.time()),
            "model": body.get("model", self.model),
        }
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": response.text or None}
            if calls:
                message["tool_calls"] = calls
            return web.json_response(
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            )
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)

        async def send(choices: list[dict[str, Any]], **extra: Any) -> None:
            chunk = {**base, "object": "chat.completion.chunk", "choices": choices, **extra}
            await stream.write(f"data: {json.dumps(chunk)}\n\n".encode())

        await send([{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}])
        words = response.text.split(" ")
        for i, word in enumerate(words if response.text else []):
            piece = word if i == len(words) - 1 else word + " "
            await send([{"index": 0, "delta": {"content": piece}, "finish_reason": None}])
        for index, call in enumerate(calls):
            args = call["function"]["arguments"]
            half = len(args) // 2
            # Split each call over two chunks, as hosted models do, to exercise reassembly.
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": args[:half]},
            }
            await send([{"index": 0, "delta": {"tool_calls": [head]}, "finish_reason": None}])
            tail = {"index": index, "function": {"arguments": args[half:]}}
            await send([{"index": 0, "delta": {"tool_calls": [tail]}, "finish_reason": None}])
        await send([{"index": 0, "delta": {}, "finish_reason": finish}])
        if (body.get("stream_options") or {}).get("include_usage"):
            await send([], usage=usage)
        await stream.write(b"data: [DONE]\n\n")
        await stream.write_eof()
        return stream
