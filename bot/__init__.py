"""handback's agent runtime: agents whose tools pause with `suspend()` and resume later."""

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
    UnknownInteraction,
    UsageError,
)
from ._model import OpenAIModel
from ._run import AgentRun
from ._suspend import CallContext, Cancel, current_call, suspend
from ._tool import Tool

__all__ = [
    "Agent",
    "AgentRun",
    "Approval",
    "ApprovalPolicyError",
    "ApprovalRuleError",
    "CallContext",
    "Cancel",
    "HandbackError",
    "InvalidResumeValue",
    "OpenAIModel",
    "ResumeError",
    "RunAlreadyResumed",
    "RunNotFound",
    "RunNotPaused",
    "Tool",
    "UnknownInteraction",
    "UsageError",
    "current_call",
    "suspend",
]
