"""The local playground: the real bot, a Slack stand-in and a Slack-like page, with no workspace,
no API key and no Redis (`handback dev`)."""

from ._demo_model import EXAMPLES, demo_reply
from ._example import example_agent, example_reply
from ._page import PageConfig, PageServer
from ._playground import APPROVERS, OFFLINE_LABEL, Playground
from ._slack import LocalSlack
from ._workspace import DEMO_PEOPLE, Person, PlaygroundSlack

__all__ = [
    "APPROVERS",
    "DEMO_PEOPLE",
    "EXAMPLES",
    "OFFLINE_LABEL",
    "LocalSlack",
    "PageConfig",
    "PageServer",
    "Person",
    "Playground",
    "PlaygroundSlack",
    "demo_reply",
    "example_agent",
    "example_reply",
]
