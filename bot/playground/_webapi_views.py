"""The Web API's `views.*` methods: modals opened (with a trigger that expires) and updated, and
App Home views published, each checked against Slack's limits (`check_view`)."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from typing import Any

from ._limits import check_view
from ._rules import TRIGGER_SECONDS
from ._webapi_args import Handler, _ApiError, json_arg
from ._workspace_model import OpenedView, Workspace

__all__ = ["VIEWS_METHODS"]


async def _views_open(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    trigger_id = str(args.get("trigger_id") or "")
    user = ws.triggers.pop(trigger_id, None)
    if user is None:
        raise _ApiError("invalid_trigger_id")
    issued = ws.trigger_times.pop(trigger_id, None)
    if issued is not None and ws.clock() - issued > TRIGGER_SECONDS:
        raise _ApiError("expired_trigger_id")
    view = json_arg(args, "view")
    check_view(view, kind="modal")
    opened = OpenedView(
        id=f"V{uuid.uuid4().hex[:10].upper()}",
        user=user,
        view=view,
        trigger_id=trigger_id,
        hash=uuid.uuid4().hex[:8],
    )
    ws.views[opened.id] = opened
    await ws.publish("view_opened", asdict(opened))
    return {"view": {"id": opened.id, "hash": opened.hash, **view}}


async def _views_update(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    view_id = str(args.get("view_id") or "")
    opened = ws.views.get(view_id)
    if opened is None or opened.closed:
        raise _ApiError("not_found")
    view = json_arg(args, "view")
    check_view(view, kind="modal")
    opened.view = view
    opened.hash = uuid.uuid4().hex[:8]
    await ws.publish("view_updated", asdict(opened))
    return {"view": {"id": opened.id, "hash": opened.hash, **view}}


async def _views_publish(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """A person's App Home view, checked as Slack checks it: a known user, a view of type
    `home` within Slack's limits (`check_view`)."""
    user = str(args.get("user_id") or "")
    if user not in ws.users:
        raise _ApiError("user_not_found")
    view = json_arg(args, "view")
    check_view(view, kind="home")
    ws.home_views[user] = view
    view_id = f"VHOME{user}"
    await ws.publish("home_published", {"user": user, "view": view})
    return {"view": {"id": view_id, "type": "home", **view}}


VIEWS_METHODS: dict[str, Handler] = {
    "views.open": _views_open,
    "views.update": _views_update,
    "views.publish": _views_publish,
}
"""Each method's handler, by the method's name."""
