"""Agents on the model recipes of docs/models.md, for `handback doctor` tests."""

from __future__ import annotations

import os

from openai import AsyncAzureOpenAI

from bot import Agent, OpenAIModel, Tool


def deploy(service: str, environment: str) -> str:
    """Deploy a service."""
    return f"{service} is live in {environment}"


# Azure OpenAI by deployment name and api-version: the client reads AZURE_OPENAI_ENDPOINT,
# AZURE_OPENAI_API_KEY and OPENAI_API_VERSION, exactly as in docs/models.md.
azure_agent = Agent(
    name="azure",
    model=OpenAIModel(os.environ.get("AZURE_DEPLOYMENT", "gpt-4o-prod"), client=AsyncAzureOpenAI()),
    tools=[Tool(deploy, requires_approval=True)],
)
