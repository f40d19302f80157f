"""The offline demo model: plays the chat-ops agent's scenarios without an API key.

It is a script for `bot.testing.OpenAICompatServer`, so the bot reaches it through the real
`openai` client, exactly as it reaches a hosted model. Each turn is worked out from the
conversation since the last user message: what was asked, which tools ran and what they returned.
The tool names and arguments are `bot.chatops`'s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..testing import ScriptReply

__all__ = ["EXAMPLES", "RECENT_VERSIONS", "Intent", "demo_reply"]

Intent = Literal["deploy", "restart", "services", "status", "release_note", "help"]

SERVICES = ("api", "web", "worker")
ENVIRONMENTS = ("dev", "staging", "prod")
RECENT_VERSIONS = ("2.3", "2.2.1", "2.2", "2.1.4", "2.1", "2.0.1", "1.4.2", "1.4.1")
"""What the version question offers: enough options that it renders as a select."""

EXAMPLES = (
    "deploy api 2.3 to prod",
    "deploy",
    "deploy web to staging",
    "restart worker in prod",
    "check some services",
    "write a release note",
    "status",
)
"""Messages to try, shown on the playground page."""

_QUESTIONS = {
    "service": "Which service should I {verb}?",
    "environment": "Which environment should {service} {verb_past} in?",
    "version": "Which version of {service} should go to {environment}?",
}
_NOTE_QUESTION = "What changed in this release? One line for the release note."
_SERVICES_QUESTION = "Which services should I check?"

_MENTION = re.compile(r"<[@#!][^>]*>")
_VERSION = re.compile(r"\bv?(\d+(?:\.\d+)+(?:-[\w.]+)?)\b")
_ENV_WORDS = {
    "dev": "dev",
    "development": "dev",
    "staging": "staging",
    "stage": "staging",
    "prod": "prod",
    "production": "prod",
}


@dataclass(kw_only=True)
class _Step:
    """A tool the model called since the last user message, and what came back."""

    name: str
    arguments: dict[str, Any]
    result: str | None


@dataclass(kw_only=True)
class _Request:
    intent: Intent
    slots: dict[str, str] = field(default_factory=dict)


def demo_reply(messages: Sequence[dict[str, Any]]) -> ScriptReply:
    """The next model turn for a Chat Completions message list."""
    text, steps = _since_last_user(messages)
    request = _understand(text)
    if request.intent == "deploy":
        return _deploy(request, steps)
    if request.intent == "restart":
        return _restart(request, steps)
    if request.intent == "services":
        return _services(steps)
    if request.intent == "status":
        return _status(request, steps)
    if request.intent == "release_note":
        return _release_note(steps)
    return _help()


# ------------------------------------------------------------------ reading the chat


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # The multi-part form: keep only the text parts.
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _since_last_user(messages: Sequence[dict[str, Any]]) -> tuple[str, list[_Step]]:
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    text = _content(messages[last_user]) if last_user >= 0 else ""
    steps: list[_Step] = []
    by_id: dict[str, _Step] = {}
    for message in messages[last_user + 1 :]:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                # The history is replayed from the store; read it as untrusted, like any input.
                call = call if isinstance(call, dict) else {}
                function = call.get("function")
                function = function if isinstance(function, dict) else {}
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                except (json.JSONDecodeError, TypeError):
                    arguments = {}
                if not isinstance(arguments, dict):
                    arguments = {}
                step = _Step(name=str(function.get("name", "")), arguments=arguments, result=None)
                steps.append(step)
                by_id[str(call.get("id", ""))] = step
        elif message.get("role") == "tool":
            found = by_id.get(str(message.get("tool_call_id", "")))
            if found is not None:
                found.result = _content(message)
    return text, steps


def _words(text: str) -> str:
    return _MENTION.sub(" ", text).lower()


def _understand(text: str) -> _Request:
    words = _words(text)
    slots: dict[str, str] = {}
    service = next((s for s in SERVICES if re.search(rf"\b{s}s?\b", words)), None)
    if service:
        slots["service"] = service
    for word, env in _ENV_WORDS.items():
        if re.search(rf"\b{word}\b", words):
            slots["environment"] = env
            break
    version = _VERSION.search(words)
    if version:
        slots["version"] = version.group(1)
    if re.search(r"\b(deploy|roll ?out|ship|release)\b", words) and "note" not in words:
        return _Request(intent="deploy", slots=slots)
    if re.search(r"\brestart|\breboot|\bbounce\b", words):
        return _Request(intent="restart", slots=slots)
    if re.search(r"\b(release notes?|changelog|note)\b", words):
        return _Request(intent="release_note", slots=slots)
    if re.search(r"\b(services|pick|choose|check)\b", words):
        return _Request(intent="services", slots=slots)
    if re.search(r"\b(status|versions?|what runs|fleet)\b", words):
        return _Request(intent="status", slots=slots)
    return _Request(intent="help", slots=slots)


def _answer(result: str | None) -> str:
    """A tool result as text: tools return strings, JSON for anything else."""
    if result is None:
        return ""
    try:
        loaded = json.loads(result)
    except json.JSONDecodeError:
        return result
    return loaded if isinstance(loaded, str) else result


def _asked_slot(step: _Step) -> str | None:
    question = str(step.arguments.get("question", ""))
    for slot, template in _QUESTIONS.items():
        if question.startswith(template.split("{", 1)[0]):
            return slot
    return None


def _fill(request: _Request, steps: list[_Step]) -> dict[str, str]:
    slots = dict(request.slots)
    for step in steps:
        if step.name == "ask_user" and step.result is not None:
            slot = _asked_slot(step)
            if slot is not None:
                slots[slot] = _answer(step.result).strip()
    return slots


def _ask(slot: str, slots: dict[str, str], verb: str, verb_past: str) -> ScriptReply:
    question = _QUESTIONS[slot].format(
        verb=verb,
        verb_past=verb_past,
        service=slots.get("service", "it"),
        environment=slots.get("environment", "there"),
    )
    options = {"service": SERVICES, "environment": ENVIRONMENTS, "version": RECENT_VERSIONS}[slot]
    return [{"name": "ask_user", "arguments": {"question": question, "options": list(options)}}]


def _last(steps: list[_Step], name: str) -> _Step | None:
    return next((s for s in reversed(steps) if s.name == name and s.result is not None), None)


# ------------------------------------------------------------------ the scenarios


def _deploy(request: _Request, steps: list[_Step]) -> ScriptReply:
    done = _last(steps, "deploy")
    if done is not None:
        args = done.arguments
        what = f"{args.get('service')} {args.get('version')} to {args.get('environment')}"
        result = _answer(done.result)
        if result.startswith("Denied"):
            reason = result.split(":", 1)[1].strip() if ":" in result else ""
            because = f" The approver said: _{reason}_" if reason else ""
            return f"OK, I did *not* deploy {what}.{because}"
        if result.startswith(("Error", "Cancelled")):
            return f"The deploy of {what} did not happen: {result}"
        return f":rocket: Done. {result} Say `status` to see the whole fleet."
    slots = _fill(request, steps)
    for slot in ("service", "environment", "version"):
        if slot not in slots:
            return _ask(slot, slots, "deploy", "go")
    arguments = {k: slots[k] for k in ("service", "version", "environment")}
    return [{"name": "deploy", "arguments": arguments}]


def _restart(request: _Request, steps: list[_Step]) -> ScriptReply:
    done = _last(steps, "restart")
    if done is not None:
        return _answer(done.result)
    slots = _fill(request, steps)
    for slot in ("service", "environment"):
        if slot not in slots:
            return _ask(slot, slots, "restart", "be restarted")
    return [
        {
            "name": "restart",
            "arguments": {"service": slots["service"], "environment": slots["environment"]},
        }
    ]


def _services(steps: list[_Step]) -> ScriptReply:
    status = _last(steps, "fleet_status")
    picked = _last(steps, "ask_user_multi")
    if picked is None:
        return [
            {
                "name": "ask_user_multi",
                "arguments": {"question": _SERVICES_QUESTION, "options": list(SERVICES)},
            }
        ]
    try:
        chosen = [str(s) for s in json.loads(picked.result or "[]")]
    except (json.JSONDecodeError, TypeError):
        chosen = []
    if status is None:
        return [{"name": "fleet_status", "arguments": {}}]
    lines = []
    for line in _answer(status.result).splitlines():
        env, _, running = line.partition(": ")
        kept = [part for part in running.split(", ") if part.split(" ", 1)[0] in chosen]
        lines.append(f"{env}: {', '.join(kept)}")
    names = ", ".join(f"*{c}*" for c in chosen) or "nothing"
    return f"You picked {names}. Here is what runs where:\n```\n" + "\n".join(lines) + "\n```"


def _status(request: _Request, steps: list[_Step]) -> ScriptReply:
    status = _last(steps, "fleet_status")
    if status is None:
        environment = request.slots.get("environment")
        arguments = {"environment": environment} if environment else {}
        return [{"name": "fleet_status", "arguments": arguments}]
    return "Here is what runs where:\n```\n" + _answer(status.result) + "\n```"


def _release_note(steps: list[_Step]) -> ScriptReply:
    asked = _last(steps, "ask_user")
    if asked is None:
        return [{"name": "ask_user", "arguments": {"question": _NOTE_QUESTION}}]
    return f"Here is your release note:\n> :memo: {_answer(asked.result)}"


def _help() -> str:
    tries = "\n".join(f"• `{example}`" for example in EXAMPLES)
    return (
        "I am the *offline demo model*: I follow a script, so I only understand a few requests. "
        f"Try one of these:\n{tries}\n"
        "Set `OPENAI_API_KEY` before `handback dev` to talk to a real model instead."
    )
