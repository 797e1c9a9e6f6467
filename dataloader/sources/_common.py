"""What the sources share: index checks, size limits, optional imports, safe URLs."""

from __future__ import annotations

import importlib
import operator
import re
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

__all__ = ["check_max_bytes", "item_index", "redact", "redact_url", "require"]

_QUERY = re.compile(r"\?[^\s'\"<>]*")
# The credentials of a URL: ``scheme://user:password@``.
_USERINFO = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s'\"<>@]*@")
# What a server said after its status (an error body may repeat the request's headers).
_SERVER_TEXT = re.compile(r"(status code: \d{3}[A-Za-z' -]*):.*")


def item_index(index: Any, length: int, what: str) -> int:
    """``index`` as a position in ``range(length)``, negative counting from the end."""
    position = operator.index(index)
    if position < 0:
        position += length
    if not 0 <= position < length:
        raise IndexError(f"{what} index {index} out of range for {length} items")
    return position


def check_max_bytes(max_bytes: Any) -> int | None:
    if max_bytes is None:
        return None
    if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
        raise ValueError(f"max_bytes should be a non-negative int or None, got {max_bytes!r}")
    return max_bytes


def require(module: str, extra: str, user: str) -> ModuleType:
    """Import an optional dependency, or say which extra of ours installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{user} needs {module}, which is not installed: "
            f'pip install "dataloader[{extra}]"'
        ) from exc


def redact_url(url: str) -> str:
    """``url`` without credentials, query or fragment: what error messages may show."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "<unparsable URL>"
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{port}{parts.path}"


def redact(text: str) -> str:
    """The first line of ``text`` without URL queries, URL credentials or a server's text.

    For the messages of other libraries' errors (obstore's), which name the
    request's URL and may quote the server's reply.

    Examples
    --------
    >>> from dataloader.sources._common import redact
    >>> redact("GET https://u:pw@h/k?X-Amz-Signature=s failed\\ndetails")
    'GET https://h/k failed'
    >>> redact("Server returned non-2xx status code: 403 Forbidden: <Error>...</Error>")
    'Server returned non-2xx status code: 403 Forbidden'
    """
    first = text.strip().splitlines()[0] if text.strip() else ""
    return _SERVER_TEXT.sub(r"\1", _USERINFO.sub(r"\1", _QUERY.sub("", first)))
