"""The OpenAI-compatible wire: bodies the local server refuses, and streamed tool calls
without an index (as Gemini sends them) kept apart."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from bot import Agent
from bot.testing import OpenAICompatServer
from state import Store

from .conftest import (
    events_of,
    last_tool_results,
)


async def test_compat_server_refuses_bad_bodies() -> None:
    async with OpenAICompatServer(lambda m: "hi") as server, aiohttp.ClientSession() as http:
        url = f"{server.base_url}/chat/completions"
        for body in [
            b"{not json",
            b"[]",
            b'"text"',
            b"{}",
            b'{"messages": "hi"}',
            b'{"messages": [1]}',
        ]:
            async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
                assert r.status == 400, body
                error = (await r.json())["error"]
                assert error["type"] == "invalid_request_error" and "messages" in error["message"]
        assert server.requests == []
        ok = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        async with http.post(url, json=ok) as r:
            assert r.status == 200
            assert (await r.json())["choices"][0]["message"]["content"] == "hi"


async def test_streamed_tool_calls_without_index(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gemini's OpenAI-compatible stream leaves out `tool_calls[].index`; calls must not merge."""
    bodies: list[dict[str, Any]] = []

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        bodies.append(body)
        messages = body["messages"]
        if messages[-1]["role"] == "user":
            deltas: list[dict[str, Any]] = [
                {"tool_calls": [_call("fc-1", "lookup", '{"host": "db1"}')]},
                {"tool_calls": [_call("fc-2", "lookup", '{"host":')]},
                {"tool_calls": [{"function": {"arguments": ' "db2"}'}}]},
            ]
        else:
            deltas = [{"content": "hosts: " + " | ".join(last_tool_results(messages))}]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for delta in [*deltas, {}]:
            chunk = {
                "id": "gemini",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "gemini",
                # Gemini also ends a tool-call turn with `stop`.
                "choices": [
                    {"index": 0, "delta": delta, "finish_reason": None if delta else "stop"}
                ],
            }
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    def lookup(host: str) -> str:
        return f"{host} up"

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
        agent = Agent(name="a", model="openai/gemini", tools=[lookup], store=store)
        _, out, _ = await events_of(agent(prompt="check"))
        assert out.output == "hosts: db1 up | db2 up"
        calls = bodies[-1]["messages"][-3]["tool_calls"]
        assert [(c["id"], c["function"]["arguments"]) for c in calls] == [
            ("fc-1", '{"host": "db1"}'),
            ("fc-2", '{"host": "db2"}'),
        ]
    finally:
        await runner.cleanup()


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
