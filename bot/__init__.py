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
    RunStopped,
    UnknownInteraction,
    UsageError,
)
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
    "ResumeError",
    "RunAlreadyResumed",
    "RunNotFound",
    "RunNotPaused",
    "RunStopped",
    "Tool",
    "UnknownInteraction",
    "UsageError",
    "current_call",
    "suspend",
]
