"""Where handback keeps runs, pending interactions, threads, its inbox of accepted work and its
audit log (Redis or SQLite)."""

from ._answer_schema import AnswerSchemaError, check_schema, schema_errors
from ._approval import RULE_KEY, Approval, GrantScope, approval_of
from ._approval_answer import ApprovalAnswer, read_approval
from ._codec import stop_mark
from ._errors import (
    ApprovalRuleError,
    CorruptRecordError,
    HandbackError,
    StoreClosedError,
    StoreError,
    StoreURLError,
    UsageError,
)
from ._grant import Grant, used_grant
from ._health import missing_sqlite_file, resolve_store_url
from ._inbox import WorkItem
from ._keys import AUDIT_CAP
from ._kinds import InteractionKind, is_approval, is_elicitation, kind_of
from ._open import open_store
from ._protocol import (
    AuditLog,
    ConversationStore,
    GrantStore,
    Inbox,
    InteractionStore,
    RunStore,
    Store,
)
from ._records import (
    AuditAction,
    AuditEntry,
    InteractionRecord,
    InteractionStatus,
    NestedRun,
    PendingCall,
    PendingInteraction,
    RunRecord,
    RunStatus,
    StopGuard,
    ThreadStop,
)
from ._redis import RedisStore
from ._sqlite import SQLiteStore
from ._url import mask_url

__all__ = [
    "AUDIT_CAP",
    "RULE_KEY",
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
    "GrantScope",
    "GrantStore",
    "HandbackError",
    "Inbox",
    "InteractionKind",
    "InteractionRecord",
    "InteractionStatus",
    "InteractionStore",
    "NestedRun",
    "PendingCall",
    "PendingInteraction",
    "RedisStore",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "SQLiteStore",
    "StopGuard",
    "Store",
    "StoreClosedError",
    "StoreError",
    "StoreURLError",
    "ThreadStop",
    "UsageError",
    "WorkItem",
    "approval_of",
    "check_schema",
    "is_approval",
    "is_elicitation",
    "kind_of",
    "mask_url",
    "missing_sqlite_file",
    "open_store",
    "read_approval",
    "resolve_store_url",
    "schema_errors",
    "stop_mark",
    "used_grant",
]
