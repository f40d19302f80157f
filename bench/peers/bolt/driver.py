"""The floor for the click path: a bare slack-bolt `AsyncApp` on aiohttp whose action listener
only acks. Same Bolt, slack_sdk and aiohttp versions as handback's, same signed click code.

    <venv>/bin/python bench/peers/bolt/driver.py --contender bare --measure click --n 200

The app verifies the signature and parses the payload (a real handback card's click,
`click.json`), as handback's endpoint does; its `authorize` answers from memory, where handback's
Bolt calls `auth.test` once and caches it. It stores nothing.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _click import BURST_CONNECTIONS, SignedPoster
from _driver import arguments, emit
from aiohttp import web
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_bolt.authorization import AuthorizeResult

SECRET = "local-signing-secret"
PAYLOAD: dict[str, Any] = json.loads((Path(__file__).parent / "click.json").read_text())


def bare_app() -> AsyncApp:
    async def authorize(**_: Any) -> AuthorizeResult:
        return AuthorizeResult(
            enterprise_id=None, team_id="T0LOCAL", bot_token="xoxb-local", bot_user_id="U0BOT"
        )

    app = AsyncApp(signing_secret=SECRET, authorize=authorize, process_before_response=True)

    @app.action({"action_id": PAYLOAD["actions"][0]["action_id"]})
    async def on_action(ack: AsyncAck) -> None:
        await ack()

    return app


async def measure_click(n: int, concurrency: int, connections: int = 0) -> list[float]:
    runner = web.AppRunner(bare_app().web_app(path="/slack/events"), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    body = urlencode({"payload": json.dumps(PAYLOAD)})
    acks: list[float] = []
    try:
        url = f"http://127.0.0.1:{port}/slack/events"
        async with SignedPoster(url, SECRET, connections=connections) as poster:

            async def one() -> float:
                start = time.perf_counter()
                status = await poster.post(body)
                assert status == 200, status
                return (time.perf_counter() - start) * 1000

            await asyncio.gather(*(one() for _ in range(min(concurrency, 10))))
            while len(acks) < n:
                acks += await asyncio.gather(*(one() for _ in range(concurrency)))
    finally:
        await runner.cleanup()
    return acks


async def main() -> None:
    args = arguments(("bare",), __doc__ or "")
    if args.measure not in {"click", "burst"}:
        raise SystemExit("the bare Bolt app has only the click measures")
    if args.measure == "burst":  # `--n` clicks at once, once, over a bounded pool
        acks = await measure_click(args.n, args.n, BURST_CONNECTIONS)
    else:
        acks = await measure_click(args.n, args.concurrency)
    emit(contender="bare bolt app", persists="nothing", samples={"ack": acks}, does="acks")


if __name__ == "__main__":
    asyncio.run(main())
