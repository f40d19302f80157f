"""Models for tests, benchmarks and demos: no network beyond 127.0.0.1, no API key."""

from ._function_model import FunctionModel, ScriptReply
from ._openai_server import OpenAICompatServer

__all__ = ["FunctionModel", "OpenAICompatServer", "ScriptReply"]
