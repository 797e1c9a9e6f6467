"""Datasets over files, HTTP servers and object stores; items are ``bytes``.

``FileDataset`` reads local files on the worker threads. ``HttpDataset``
(extra ``http``: aiohttp) and ``ObjectStoreDataset`` (extra ``s3``:
obstore) are :class:`~dataloader.AsyncDataset` s: their requests run on the
loader's event loop, many at once. Importing this module needs neither
extra; using a class without its extra raises ``ImportError`` naming it.

Examples
--------
>>> from dataloader.sources import Retry
>>> Retry().max_retries
3
"""

from dataloader.sources._file import FileDataset
from dataloader.sources._http import HttpDataset
from dataloader.sources._object_store import ObjectStoreDataset
from dataloader.sources._retry import Retry

__all__ = ["FileDataset", "HttpDataset", "ObjectStoreDataset", "Retry"]
