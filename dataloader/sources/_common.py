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
    """The first line of ``text`` with URL query strings removed."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return _QUERY.sub("", first)
