"""The library's own exceptions, in one place.

Bad arguments and bad input raise the built-in types a torch user already
catches (``TypeError``, ``ValueError``, ``IndexError``, ``OSError`` and
its subclasses), with a message naming what was wrong. Two situations have
a class of their own, each a subclass of the built-in type it refines, so
that code catching the built-in type keeps working::

    RuntimeError
    └── EpochClosedError   the loader was closed while a batch was loading
    ValueError
    └── ShardError         a tar shard is corrupt or truncated (url, offset)

An error raised while loading a batch is the dataset's or the transform's
own exception, re-raised from that batch's ``next()`` with a note naming
the batch and the item.
"""

from __future__ import annotations

__all__ = ["EpochClosedError", "ShardError"]


class EpochClosedError(RuntimeError):
    """The loader was closed while this batch was loading.

    Examples
    --------
    >>> from dataloader._errors import EpochClosedError
    >>> issubclass(EpochClosedError, RuntimeError)
    True
    """


class ShardError(ValueError):
    """A tar shard that cannot be parsed: corrupt or truncated.

    ``url`` is the shard (without credentials or query) and ``offset`` the
    byte offset of the header at fault.

    Examples
    --------
    >>> from dataloader.sources import ShardError
    >>> error = ShardError("train-0.tar", 1024, "bad header checksum")
    >>> error.offset, str(error)
    (1024, 'train-0.tar: bad header checksum at byte 1024')
    >>> isinstance(error, ValueError)
    True
    """

    def __init__(self, url: str, offset: int, reason: str) -> None:
        super().__init__(f"{url}: {reason} at byte {offset}")
        self.url = url
        self.offset = offset
