"""The exceptions handback raises; one root for the whole project.

    HandbackError                 root of everything handback raises on purpose (defined in
    │                             `state`, the package every other one depends on)
    ├── StoreError                state: bad URL, closed store, corrupt record, backend failure
    ├── InvalidAnswer (ValueError) blocks: a Slack answer that is malformed, tampered or invalid
    ├── ConfigError               bot.slack: a missing or malformed setting
    ├── UsageError (TypeError,    the calling code is wrong: bad arguments, bad tool definitions
    │   ValueError)               (defined in `state`, which raises it too)
    ├── ApprovalPolicyError       a tool's approval policy raised or returned something other
    │                             than a bool; the run ends `error` and the tool never runs
    ├── ModelCallError            a call to the model failed; its message says why in one line
    └── ResumeError               a resume was refused before any handler ran; the run is intact
        ├── RunNotFound           no run with that `parent_id` in the store
        ├── RunNotPaused          the parent ended (success, error, cancelled); nothing to resume
        ├── RunAlreadyResumed     another resume claimed the parent first (`.resumed_by`)
        ├── RunStopped            someone stopped the turn the parent belongs to (`.stop`)
        ├── UnknownInteraction    an answer names an interaction the parent is not waiting for
        └── InvalidResumeValue    an answer does not match its interaction's `response_schema`

The pause itself is not an error: it is a `BaseException` private to the runtime, so that a tool's
`except Exception:` cannot swallow it.
"""

from __future__ import annotations

from state import HandbackError, ThreadStop, UsageError

__all__ = [
    "ApprovalPolicyError",
    "HandbackError",
    "InvalidResumeValue",
    "ModelCallError",
    "ResumeError",
    "RunAlreadyResumed",
    "RunNotFound",
    "RunNotPaused",
    "RunStopped",
    "UnknownInteraction",
    "UsageError",
]


class ModelCallError(HandbackError):
    """A call to the agent's model failed (refused, out of reach, no key); the run ends `error`
    with this one line as its message, and the thread shows it."""


class ApprovalPolicyError(HandbackError):
    """A `requires_approval` policy could not be read as a yes or no; the gate stays shut."""

    def __init__(self, message: str, *, tool: str) -> None:
        super().__init__(message)
        self.tool = tool


class ResumeError(HandbackError):
    """A resume was refused before any handler ran; the parent run is still as it was."""

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class RunNotFound(ResumeError):
    pass


class RunNotPaused(ResumeError):
    def __init__(self, message: str, *, run_id: str, status: str) -> None:
        super().__init__(message, run_id=run_id)
        self.status = status


class RunAlreadyResumed(ResumeError):
    def __init__(self, message: str, *, run_id: str, resumed_by: str | None) -> None:
        super().__init__(message, run_id=run_id)
        self.resumed_by = resumed_by


class RunStopped(ResumeError):
    """The store refused the resume's claim, or the journal's started mark: the run's turn was
    stopped since it began (`RunRecord.stop_seen`), and nothing resumes a stopped turn's runs
    or starts their tools. A refused start saved the run stopped first."""

    def __init__(self, message: str, *, run_id: str, stop: ThreadStop | None = None) -> None:
        super().__init__(message, run_id=run_id)
        self.stop = stop
        """The stop, when the store named it (a refused claim; a refused start names none)."""


class UnknownInteraction(ResumeError):
    def __init__(self, message: str, *, run_id: str, interaction_id: str) -> None:
        super().__init__(message, run_id=run_id)
        self.interaction_id = interaction_id


class InvalidResumeValue(ResumeError):
    def __init__(self, message: str, *, run_id: str, interaction_id: str) -> None:
        super().__init__(message, run_id=run_id)
        self.interaction_id = interaction_id
