"""handback's agent runtime: agents whose tools pause with `suspend()` and resume later."""

import typing as _typing

from state import Approval, ApprovalRuleError

from ._agent import Agent
from ._errors import (
    ApprovalPolicyError,
    HandbackError,
    InvalidResumeValue,
    ResumeError,
    RunAlreadyResumed,
    RunNotFound,
    RunNotPaused,
    RunStopped,
    UnknownInteraction,
    UsageError,
)
from ._model import Model, ModelResponse, OpenAIModel, ToolCall
from ._run import AgentRun
from ._suspend import CallContext, Cancel, current_call, suspend
from ._tool import ArgumentsError, Tool

if _typing.TYPE_CHECKING:
    from ._config_file import ConfigFileError, agent_from_file

__all__ = [
    "Agent",
    "AgentRun",
    "Approval",
    "ApprovalPolicyError",
    "ApprovalRuleError",
    "ArgumentsError",
    "CallContext",
    "Cancel",
    "ConfigFileError",
    "HandbackError",
    "InvalidResumeValue",
    "Model",
    "ModelResponse",
    "OpenAIModel",
    "ResumeError",
    "RunAlreadyResumed",
    "RunNotFound",
    "RunNotPaused",
    "RunStopped",
    "Tool",
    "ToolCall",
    "UnknownInteraction",
    "UsageError",
    "agent_from_file",
    "current_call",
    "suspend",
]


def __getattr__(name: str) -> _typing.Any:
    # The config file reader brings in the MCP SDK: only for those who read a file.
    if name in ("ConfigFileError", "agent_from_file"):
        from . import _config_file

        return getattr(_config_file, name)
    raise AttributeError(f"module 'bot' has no attribute {name!r}")
