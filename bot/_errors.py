"""The exceptions handback raises, every package's, drawn once here (`tests/test_error_tree.py`
checks this drawing against the classes, both ways). One root: `except HandbackError` catches
every error handback raises on purpose, and nothing else. A name in parentheses is a further base.

```
HandbackError                         root (in `state`, the package every other depends on)
├── UsageError (TypeError, ValueError)  the calling code is wrong: bad arguments, bad tool
│   │                                 definitions; fix the code, retrying cannot help
│   ├── AgentRefError                 bot: `MODULE:ATTR` does not name an `Agent`
│   │   └── ConfigFileError           bot: a config file with problems, one line each
│   ├── AnswerSchemaError             state: a `response_schema` that cannot validate anything
│   └── ApprovalRuleError             state: an `Approval` rule that can never work
├── StoreError                        state: the backend failed (unreachable, locked, not a
│   │                                 database); the redis-py or sqlite3 error is its cause
│   ├── StoreURLError (ValueError)    a store URL that cannot be opened (a setting's mistake)
│   ├── StoreClosedError (UsageError)  a store used after `aclose()`
│   └── CorruptRecordError            a stored value that does not read back as its record
├── ConfigError                       bot.slack: a missing or malformed setting
├── ApprovalPolicyError               a tool's approval policy raised or returned something
│                                     other than a bool; the run ends `error`, the tool never ran
├── StartRefused                      the store refused a journal's started mark: the turn was
│                                     stopped, the tools did not start; the run ends stopped
├── Unanswerable                      bot.mcp: a server asked for what handback does not give
│                                     (sampling); the call ends with it as its result
├── ModelCallError                    a call to the model failed; its message says why in one line
├── ArgumentsError (ValueError)       the model (or a command) gave arguments the tool cannot
│                                     take; the message goes back to whoever sent them
├── ResumeError                       a resume was refused before any handler ran; run intact
│   ├── RunNotFound                   no run with that `parent_id` in the store
│   ├── RunNotPaused                  the parent ended (success, error, cancelled)
│   ├── RunAlreadyResumed             another resume claimed the parent first (`.resumed_by`)
│   ├── RunStopped                    someone stopped the turn the parent belongs to (`.stop`)
│   ├── UnknownInteraction            an answer names an interaction the parent is not awaiting
│   └── InvalidResumeValue            an answer that does not match its `response_schema`
├── InvalidAnswer (ValueError)        blocks: a Slack answer that is malformed, tampered or
│   │                                 invalid; the message is shown to the person
│   └── CommandError                  blocks: a slash command's text that makes no arguments
├── FieldError                        blocks: one form input that cannot be read as its type
│                                     (read into an `InvalidAnswer` for the whole form)
├── Refusal                           bot.slack: a person's answer not taken (not theirs, not
│                                     allowed); shown to them and audited
├── GroupLookupFailed                 bot.slack: Slack would not list a user group's members
└── Misfit (ValueError)               bot.slack: a signed payload that does not fit the models
```

Not in the tree, on purpose: the pause and the cancellation of a run are `BaseException`s
private to the runtime (`_suspend.py`), so that a tool's `except Exception:` cannot swallow
them; and the playground's `Refusal` is LocalSlack playing Slack's error answer (the bot meets
it as slack_sdk's `SlackApiError`, as it would meet Slack's).
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
