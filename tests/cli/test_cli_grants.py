"""`handback grants` and `handback grants revoke ID`: the standing grants in force, and ending
one from the command line (audited), on both stores."""

from __future__ import annotations

import json
import time

import pytest

from state import AuditEntry, Grant, open_store

from ..state.conftest import make_grant
from .test_cli_views import handback


async def _fill(url: str) -> list[Grant]:
    now = time.time()
    grants = [
        make_grant("int_1"),
        make_grant(
            "int_2", scope="channel", thread_ts=None, granted_by="U0CAROL", expires_at=now + 60
        ),
        make_grant("int_3", created_at=now - 7200, expires_at=now - 3600),
    ]
    async with open_store(url) as store:
        for grant in grants:
            await store.add_grant(
                grant, audit=AuditEntry(at=grant.created_at, action="granted", user="U0BOB")
            )
    return grants


async def test_grants_lists_the_ones_in_force_soonest_first(store_url: str) -> None:
    thread, channel, _ = await _fill(store_url)
    listed = handback("grants", "--store", store_url)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    header = ["id", "tool", "scope", "channel", "thread", "for", "given", "by", "until", "state"]
    assert lines[0].split() == header
    assert [line.split()[0] for line in lines[1:]] == [channel.grant_id, thread.grant_id]
    assert "U0CAROL" in lines[1] and "channel" in lines[1] and "UTC" in lines[1]
    assert "1700000000.000100" in lines[2] and "U0BOB" in lines[2]
    assert all("granter.deploy" in line and "U0ALICE" in line for line in lines[1:])
    assert all(line.endswith("in force") for line in lines[1:])

    as_json = handback("grants", "--store", store_url, "--json", "--limit", "1")
    assert [json.loads(line)["grant_id"] for line in as_json.stdout.splitlines()] == [
        channel.grant_id
    ]
    [shown] = map(json.loads, as_json.stdout.splitlines())
    assert (shown["path"], shown["requesters"], shown["needs_renewal"]) == (
        "granter.deploy",
        ["U0ALICE"],
        False,
    )


async def test_revoke_ends_a_grant_once_and_audits_it(store_url: str) -> None:
    thread, _, expired = await _fill(store_url)
    done = handback("grants", "--store", store_url, "revoke", thread.grant_id, "--by", "ops-anna")
    assert done.returncode == 0, done.stderr
    assert f"Revoked grant {thread.grant_id}" in done.stdout and "U0BOB" in done.stdout
    assert thread.grant_id not in handback("grants", "--store", store_url).stdout

    again = handback("grants", "revoke", thread.grant_id, "--store", store_url)
    assert again.returncode == 1
    assert "already revoked by ops-anna" in again.stdout
    ended = handback("grants", "revoke", expired.grant_id, "--store", store_url)
    assert ended.returncode == 1 and "already ended" in ended.stdout
    unknown = handback("grants", "revoke", "grant_nope", "--store", store_url)
    assert unknown.returncode == 1 and "no grant 'grant_nope'" in unknown.stdout

    audit = handback("audit", "--store", store_url, "--json")
    revokes = [
        entry
        for entry in map(json.loads, audit.stdout.splitlines())
        if entry["action"] == "revoked"
    ]
    assert [(e["user"], thread.grant_id in e["detail"]) for e in revokes] == [("ops-anna", True)]


@pytest.mark.parametrize("args", [["grants"], ["grants", "revoke", "grant_x"]])
def test_a_missing_store_is_one_clear_line(tmp_path: object, args: list[str]) -> None:
    result = handback(*args, "--store", f"sqlite:///{tmp_path}/nope.db")
    assert result.returncode == 2
    assert result.stderr.startswith("handback: no store at") and "Traceback" not in result.stderr


def test_grants_without_a_limit_worth_printing_is_refused() -> None:
    result = handback("grants", "--limit", "0")
    assert result.returncode == 2 and "--limit must be at least 1" in result.stderr
