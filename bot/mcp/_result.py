"""An MCP tool's `CallToolResult` as the text the model sees.

The text is the server's, untrusted: it goes to the model as a tool result (as any tool's
result does) and is escaped wherever handback shows it to people, like every tool result.
"""

from __future__ import annotations

import json

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

__all__ = ["result_text"]


def result_text(server: str, tool: str, result: CallToolResult) -> str:
    """`content` (text as is, other kinds named), or `structuredContent` as JSON when there is
    no text; `isError` says so first, so the model cannot mistake it."""
    parts = [_content_text(block) for block in result.content]
    # The spec asks a server that returns structured content to send it as text too; when it
    # sent no text at all, the structured content is all there is.
    if result.structured_content is not None and not any(
        isinstance(block, TextContent) for block in result.content
    ):
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    body = "\n".join(part for part in parts if part) or "(no content)"
    if result.is_error:
        return f"Error: tool `{tool}` of the {server} server reported an error: {body}"
    return body


def _content_text(block: ContentBlock) -> str:
    match block:
        case TextContent():
            return block.text
        case ImageContent():
            return f"[image: {block.mime_type}]"
        case AudioContent():
            return f"[audio: {block.mime_type}]"
        case EmbeddedResource():
            resource = block.resource
            if isinstance(resource, BlobResourceContents):
                return f"[resource {resource.uri}: {resource.mime_type or 'binary'}]"
            return resource.text
        case ResourceLink():
            return f"[resource link: {block.uri}]"
    return f"[{getattr(block, 'type', 'content')}]"
