"""The Slack app: runs an agent on mentions and DMs, renders its interactions, resumes on clicks."""

from ._app import Role, SlackBot, make_client
from ._policy import AnswerPolicy
from ._serve import check_agent, serve
from ._settings import ConfigError, Settings, load_settings

__all__ = [
    "AnswerPolicy",
    "ConfigError",
    "Role",
    "Settings",
    "SlackBot",
    "check_agent",
    "load_settings",
    "make_client",
    "serve",
]
