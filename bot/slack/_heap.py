"""Keeping the cyclic garbage collector's full passes off the ack path.

A process serving Slack holds a few hundred thousand objects from its start (the modules of
Bolt, slack_sdk, pydantic, openai and jsonschema, the agent, the app), and a full collection
walks all of them: 50-300 ms on a small machine, during which no request is answered, so every
ack in flight waits for it. Once serving starts, those objects are frozen (`gc.freeze`): full
collections then walk only what was made since, and take a few milliseconds.

Only a process that is all ours does it: `handback run` (through `serve(freeze_heap=True)`) and
the benchmark's drivers, which do what the CLI does. A program that embeds `SlackBot` keeps its
garbage collector as it set it.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_heap"]

_frozen = False


def freeze_startup_heap() -> None:
    """Collect once, then move every object alive now out of the collector's sight; once per
    process (later calls do nothing, so a process serving twice pays the collection once)."""
    global _frozen
    if _frozen:
        return
    _frozen = True
    gc.collect()
    gc.freeze()
