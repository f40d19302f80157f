"""Where handback keeps runs, pending interactions, threads, its inbox of accepted work and its
audit log (Redis or SQLite)."""

from ._answer_schema import AnswerSchemaError, check_schema, schema_errors
from ._approval import RULE_KEY, Approval, GrantScope, approval_of
from ._approval_answer import ApprovalAnswer, approves, read_approval
from ._beat import Heartbeat, Held, Lost
from ._errors import (
    ApprovalRuleError,
    CorruptRecordError,
    HandbackError,
    StoreClosedError,
    StoreError,
    StoreURLError,
    UsageError,
)
from ._grant import Grant, GrantClaim, grant_id_for, used_grant
from ._health import StoreReport, check_store, missing_sqlite_file, resolve_store_url
from ._inbox import WorkItem
from ._keys import AUDIT_CAP, GRANT_GRACE, HOME_VIEWER_TTL, LIVENESS_TTL
from ._nudges import nudge_times
from ._open import open_store, store_from_url
from ._protocol import (
    AuditLog,
    ConversationStore,
    GrantStore,
    HomeViewers,
    Inbox,
    InteractionStore,
    RunStore,
    Store,
)
from ._records import (
    AnswerClaim,
    AuditAction,
    AuditEntry,
    InteractionClaim,
    InteractionRecord,
    InteractionStatus,
    NestedRun,
    Nudge,
    NudgeKind,
    PendingCall,
    PendingInteraction,
    RunClaim,
    RunRecord,
    RunStatus,
    ThreadLease,
    ThreadStop,
    ThreadTake,
    TurnClaim,
    Vote,
)
from ._redis import RedisStore
from ._sqlite import SQLiteStore
from ._url import mask_url

__all__ = [
    "AUDIT_CAP",
    "GRANT_GRACE",
    "HOME_VIEWER_TTL",
    "LIVENESS_TTL",
    "RULE_KEY",
    "AnswerClaim",
    "AnswerSchemaError",
    "Approval",
    "ApprovalAnswer",
    "ApprovalRuleError",
    "AuditAction",
    "AuditEntry",
    "AuditLog",
    "ConversationStore",
    "CorruptRecordError",
    "Grant",
    "GrantClaim",
    "GrantScope",
    "GrantStore",
    "HandbackError",
    "Heartbeat",
    "Held",
    "HomeViewers",
    "Inbox",
    "InteractionClaim",
    "InteractionRecord",
    "InteractionStatus",
    "InteractionStore",
    "Lost",
    "NestedRun",
    "Nudge",
    "NudgeKind",
    "PendingCall",
    "PendingInteraction",
    "RedisStore",
    "RunClaim",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "SQLiteStore",
    "Store",
    "StoreClosedError",
    "StoreError",
    "StoreReport",
    "StoreURLError",
    "ThreadLease",
    "ThreadStop",
    "ThreadTake",
    "TurnClaim",
    "UsageError",
    "Vote",
    "WorkItem",
    "approval_of",
    "approves",
    "check_schema",
    "check_store",
    "grant_id_for",
    "mask_url",
    "missing_sqlite_file",
    "nudge_times",
    "open_store",
    "read_approval",
    "resolve_store_url",
    "schema_errors",
    "store_from_url",
    "used_grant",
]
