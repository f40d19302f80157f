"""Where handback keeps runs, pending interactions, threads, its inbox of accepted work and its
audit log (Redis or SQLite)."""

from ._errors import (
    CorruptRecordError,
    HandbackError,
    StoreClosedError,
    StoreError,
    StoreURLError,
)
from ._inbox import WorkItem
from ._keys import THREAD_LEASE_TTL
from ._open import open_store, store_from_url
from ._protocol import AuditLog, ConversationStore, Inbox, InteractionStore, RunStore, Store
from ._records import (
    AnswerClaim,
    AuditAction,
    AuditEntry,
    InteractionClaim,
    InteractionRecord,
    InteractionStatus,
    PendingCall,
    PendingInteraction,
    RunClaim,
    RunRecord,
    RunStatus,
    ThreadLease,
    TurnClaim,
)
from ._redis import RedisStore
from ._sqlite import SQLiteStore

__all__ = [
    "THREAD_LEASE_TTL",
    "AnswerClaim",
    "AuditAction",
    "AuditEntry",
    "AuditLog",
    "ConversationStore",
    "CorruptRecordError",
    "HandbackError",
    "Inbox",
    "InteractionClaim",
    "InteractionRecord",
    "InteractionStatus",
    "InteractionStore",
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
    "StoreURLError",
    "ThreadLease",
    "TurnClaim",
    "WorkItem",
    "open_store",
    "store_from_url",
]
