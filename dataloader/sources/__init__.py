"""Datasets over files, HTTP servers, object stores and tar shards.

``FileDataset`` reads local files on the worker threads. ``HttpDataset``
(extra ``http``: aiohttp) and ``ObjectStoreDataset`` (extra ``s3``:
obstore) are :class:`~dataloader.AsyncDataset` s: their requests run on the
loader's event loop, many at once. Importing this module needs neither
extra; using a class without its extra raises ``ImportError`` naming it.
``TarDataset`` streams samples (dicts of member bytes) out of tar shards in
the webdataset layout, from any of those places, within ``ShardLimits``;
``TarWriter`` writes them.

Examples
--------
>>> from dataloader.sources import Retry
>>> Retry().max_retries
3
"""

from dataloader._errors import ShardError
from dataloader.sources._file import FileDataset
from dataloader.sources._http import HttpDataset
from dataloader.sources._limits import ShardLimits
from dataloader.sources._object_store import ObjectStoreDataset
from dataloader.sources._retry import Retry
from dataloader.sources._tar_dataset import TarDataset
from dataloader.sources._tar_writer import TarWriter

__all__ = [
    "FileDataset", "HttpDataset", "ObjectStoreDataset", "Retry", "ShardError", "ShardLimits",
    "TarDataset", "TarWriter",
]
