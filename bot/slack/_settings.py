"""The Slack app's configuration, read from the environment with pydantic-settings.

Configuration is an untrusted edge: anything missing or malformed becomes a `ConfigError` whose
message is one line naming the environment variable, so start-up never ends in a traceback.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from blocks import ANYONE

# Coordination records of the Slack app, kept out of `state.__all__` (not for users).
from state._keys import LIVENESS_TTL

from .._errors import HandbackError
from ._liveness import STALL_LIMIT

__all__ = [
    "ANYONE",
    "ConfigError",
    "LogFormat",
    "LogLevel",
    "Settings",
    "load_settings",
    "unknown_variables",
]

log = logging.getLogger("handback.slack")


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
SlackUi = Literal["auto", "agent", "classic"]
"""How answers show in Slack: `agent` sessions (status, streamed text, tasks, the stop button),
`classic` messages (a reaction while working, one message per answer), or `auto`: agent until
Slack says the app is not an agent, then classic."""
LogFormat = Literal["text", "json"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_MAX_DURATION = 366 * 86400.0
_SLACK_ID = re.compile(r"^[UWS][A-Z0-9]+$")
_STORE_SCHEMES = (
    "redis://",
    "rediss://",
    "redis+cluster://",
    "rediss+cluster://",
    "unix://",
    "sqlite://",
)


class ConfigError(HandbackError):
    """A setting is missing or malformed; the message is one line that names it."""


def _split_ids(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    items = value.replace(",", " ").split() if isinstance(value, str) else list(value)
    for item in items:
        if not isinstance(item, str) or not _SLACK_ID.match(item):
            raise ValueError(
                f"{item!r} is not a Slack user id (U…/W…) or user-group id (S…) in {name}"
            )
    return items


class Settings(BaseSettings):
    """Every setting the Slack app reads; the field name upper-cased is the variable's name."""

    model_config = SettingsConfigDict(case_sensitive=False, extra="ignore")

    slack_bot_token: SecretStr
    """The bot token (xoxb-) the Web API client uses."""
    slack_signing_secret: SecretStr | None = None
    """Verifies that requests come from Slack; required in HTTP mode."""
    slack_app_token: SecretStr | None = None
    """An app-level token (xapp-); when set the app connects over Socket Mode."""
    slack_api_url: str = "https://slack.com/api/"
    """The Web API base URL; tests and the playground point it at a local stand-in."""
    openai_api_key: SecretStr | None = None
    """Read by the `openai` SDK itself; checked here only so a missing key fails at start-up."""
    openai_base_url: str | None = None
    port: int = Field(default=3000, ge=1, le=65535)
    """The HTTP port in HTTP mode (path `/slack/events`, plus `GET /healthz`)."""
    host: str = "0.0.0.0"
    handback_store: str = "sqlite:///handback.db"
    """`redis://…` or `sqlite:///path` (relative to the working directory; four slashes for an
    absolute path)."""
    handback_approvers: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Who may approve tool calls: user ids and/or user-group ids, or `anyone` (anyone in the
    channel but the requester). Empty: nobody, unless the tool's own rule names approvers."""
    handback_tool_approvers: Annotated[dict[str, list[str]], NoDecode] = Field(default_factory=dict)
    """Per-tool approvers as JSON, e.g. `{"deploy": ["S0OPS"]}`; replaces the general list."""
    handback_answerers: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Who may answer questions (ask_user, confirm, …); empty means anyone in the channel."""
    handback_allow_self_approval: bool = False
    """Whether the person who started a run may approve its tool calls."""
    handback_interaction_ttl: Annotated[float, NoDecode] = 24 * 3600.0
    """Seconds (or `30m`, `24h`, `7d`) before a pending interaction expires."""
    handback_sweep_interval: Annotated[float, NoDecode] = 2.0
    """How often expired interactions, and runs answered but never resumed, are looked for."""
    handback_liveness_ttl: Annotated[float, NoDecode] = LIVENESS_TTL
    """Seconds a process keeps its work (inbox items, thread turns) after its last heartbeat:
    a dead process's work moves on this long after it died. The heartbeat runs on a thread of
    its own, so a busy process never loses its work; give every process of a store the same."""
    handback_stall_limit: Annotated[float, NoDecode] = STALL_LIMIT
    """Seconds the event loop may go without a turn before the heartbeat stops, so a stuck
    (not just busy) process lets its work go to another."""
    handback_concurrency: int = Field(default=1000, ge=1, le=100_000)
    """Work items (turns, clicks) one process runs at once; more wait in the inbox."""
    handback_shutdown_grace: Annotated[float, NoDecode] = 30.0
    """Seconds running work may take to finish after SIGTERM; what is left is handed back to
    the inbox for another process."""
    handback_slack_ui: SlackUi = "auto"
    """`auto`, `agent` or `classic` (see `SlackUi`)."""
    handback_log_level: LogLevel = "INFO"
    handback_log_format: LogFormat = "text"
    """`json` for one JSON object per line (with run, thread and work item ids when known)."""
    handback_metrics_port: int | None = Field(default=None, ge=1, le=65535)
    """A port of its own for `/metrics` and `/healthz` (on HOST): for Socket Mode, and to keep
    metrics off the port a reverse proxy exposes to Slack. HTTP mode and workers serve them on
    PORT too."""

    @field_validator("slack_bot_token")
    @classmethod
    def _bot_token(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().startswith("xoxb-"):
            raise ValueError("must be a bot token starting with xoxb-")
        return value

    @field_validator("slack_app_token")
    @classmethod
    def _app_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value():
            return None
        if value is not None and not value.get_secret_value().startswith("xapp-"):
            raise ValueError("must be an app-level token starting with xapp-")
        return value

    @field_validator("slack_signing_secret", "openai_api_key")
    @classmethod
    def _empty_is_unset(cls, value: SecretStr | None) -> SecretStr | None:
        return value if value is not None and value.get_secret_value() else None

    @field_validator("slack_api_url")
    @classmethod
    def _api_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL such as https://slack.com/api/")
        return value if value.endswith("/") else value + "/"

    @field_validator("handback_store")
    @classmethod
    def _store(cls, value: str) -> str:
        if not value.lower().startswith(_STORE_SCHEMES):
            raise ValueError(
                "must be a redis://, rediss://, redis+cluster://, rediss+cluster://, unix:// "
                "or sqlite:///path URL"
            )
        return value

    @field_validator("handback_approvers", mode="before")
    @classmethod
    def _approver_ids(cls, value: Any) -> list[str]:
        words = value.replace(",", " ").split() if isinstance(value, str) else value
        if isinstance(words, list | tuple) and [str(w).lower() for w in words] == [ANYONE]:
            return [ANYONE]
        return _split_ids(value, "the list")

    @field_validator("handback_answerers", mode="before")
    @classmethod
    def _ids(cls, value: Any) -> list[str]:
        return _split_ids(value, "the list")

    @field_validator("handback_tool_approvers", mode="before")
    @classmethod
    def _tool_ids(cls, value: Any) -> dict[str, list[str]]:
        if isinstance(value, str):
            if not value.strip():
                return {}
            try:
                value = json.loads(value)
            except json.JSONDecodeError as error:
                raise ValueError(f"is not JSON ({error.msg})") from None
        if not isinstance(value, dict):
            raise ValueError('must be a JSON object like {"deploy": ["U123", "S456"]}')
        return {str(tool): _split_ids(ids, f"tool {tool!r}") for tool, ids in value.items()}

    @field_validator(
        "handback_interaction_ttl",
        "handback_sweep_interval",
        "handback_liveness_ttl",
        "handback_stall_limit",
        "handback_shutdown_grace",
        mode="before",
    )
    @classmethod
    def _duration(cls, value: Any) -> float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds = float(value)
        else:
            match = _DURATION.match(str(value))
            if match is None:
                raise ValueError("must be seconds or a duration like 90s, 30m, 24h, 7d")
            seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        if seconds <= 0:
            raise ValueError("must be positive")
        if seconds > _MAX_DURATION:
            # Cards show their deadline as a date; past a year it is a mistake, and far enough
            # out it is not a date Python can print at all.
            raise ValueError("must be at most 366d")
        return seconds

    @field_validator("handback_log_level", mode="before")
    @classmethod
    def _level(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("handback_log_format", mode="before")
    @classmethod
    def _format(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("handback_metrics_port", mode="before")
    @classmethod
    def _empty_port(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def approvers_anyone(self) -> bool:
        """Whether `HANDBACK_APPROVERS=anyone` was chosen."""
        return self.handback_approvers == [ANYONE]

    @property
    def socket_mode(self) -> bool:
        return self.slack_app_token is not None


TEST_VARIABLES = frozenset(
    {
        "HANDBACK_TEST_REDIS",
        "HANDBACK_TEST_REDIS_ERROR",
        "HANDBACK_TEST_CHROMIUM",
        "HANDBACK_FUZZ_EXAMPLES",
        "HANDBACK_BENCH_CODE",
        "HANDBACK_BENCH_CACHE",
    }
)
"""`HANDBACK_*` variables the test suite and the benchmarks read: known, so never "unknown"."""

REMOVED: dict[str, str] = {
    "HANDBACK_WORK_LEASE": "set HANDBACK_LIVENESS_TTL instead (see docs/operations.md)",
    "HANDBACK_THREAD_LEASE_TTL": "set HANDBACK_LIVENESS_TTL instead (see docs/operations.md)",
}
"""Settings that no longer exist -> what replaces them, said in the error that stops start-up:
one heartbeat per process now keeps its inbox items and its threads alike."""

OTHER_VARIABLES = frozenset({"HANDBACK_MODEL"})
"""Read by the built-in chat-ops agent (`bot.chatops`), not by the app."""


def _known() -> frozenset[str]:
    fields = {name.upper() for name in Settings.model_fields if name.startswith("handback_")}
    return frozenset(fields | TEST_VARIABLES | OTHER_VARIABLES)


def unknown_variables(environ: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """`HANDBACK_*` variables in `environ` that handback does not read, each with the known name
    it is probably a typo of (or None). Removed settings are reported by `load_settings`."""
    known = _known()
    found = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith("HANDBACK_") or upper in known or upper in REMOVED:
            continue
        close = difflib.get_close_matches(upper, sorted(known), n=1, cutoff=0.85)
        found.append((name, close[0] if close else None))
    return found


def _check_variables(environ: Mapping[str, str]) -> None:
    for name in sorted(environ):
        if name.upper() in REMOVED:
            raise ConfigError(f"{name} was removed: {REMOVED[name.upper()]}")
    for name, close in unknown_variables(environ):
        if close is not None:
            raise ConfigError(f"{name} is not a setting: did you mean {close}?")
        log.warning("%s is not a setting handback reads; it is ignored", name)


def load_settings(*, role: Literal["all", "web", "worker"] = "all", **overrides: Any) -> Settings:
    """Read the settings from the environment; `ConfigError` names what is wrong. A process
    that takes Slack's requests (`role` all or web) needs a way to hear them: the signing
    secret (HTTP mode) or an app token (Socket Mode); a worker only works the store's inbox.
    A `HANDBACK_*` variable that is a typo of a setting, or a removed one, is an error; any
    other unknown one is logged."""
    _check_variables({**os.environ, **{name.upper(): "" for name in overrides}})
    try:
        settings = Settings(**overrides)
    except ValidationError as error:
        raise ConfigError(_one_line(error)) from None
    if (
        role != "worker"
        and settings.slack_app_token is None
        and settings.slack_signing_secret is None
    ):
        raise ConfigError(
            "SLACK_SIGNING_SECRET is missing (needed in HTTP mode; "
            "set SLACK_APP_TOKEN for Socket Mode instead)"
        )
    return settings


def _one_line(error: ValidationError) -> str:
    first = error.errors()[0]
    loc = [str(part) for part in first["loc"]]
    message = str(first["msg"]).removeprefix("Value error, ")
    if not loc:
        return message
    name = loc[0].upper()
    if first["type"] == "missing":
        return f"{name} is missing"
    return f"{name} is invalid: {message}"
