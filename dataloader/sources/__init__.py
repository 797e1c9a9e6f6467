"""Datasets over files, HTTP servers, object stores and tar shards.

``FileDataset`` reads local files on the worker threads. ``HttpDataset``
(extra ``http``: aiohttp) and ``ObjectStoreDataset`` (extra ``s3``:
obstore) are :class:`~dataloader.AsyncDataset` s: their requests run on the
loader's event loop, many at once. Importing this module needs neither
extra; using a class without its extra raises ``ImportError`` naming it.
``TarDataset`` streams samples (dicts of member bytes) out of tar shards in
the webdataset layout, from any of those places, within ``ShardLimits``;
``TarWriter`` writes them. ``ParquetDataset`` and ``ArrowDataset`` (extra
``arrow``: pyarrow) index the rows of columnar files, local or remote (read
by ranges over HTTP or from an object store), or stream them
a group at a time (``RowGroupStream``); ``TokenDataset`` cuts windows out of
a flat file of token ids.

Examples
--------
>>> from dataloader.sources import Retry
>>> Retry().max_retries
3
"""

from dataloader._errors import ShardError
from dataloader.sources._arrow import ArrowDataset
from dataloader.sources._file import FileDataset
from dataloader.sources._http import HttpDataset
from dataloader.sources._limits import ShardLimits
from dataloader.sources._object_store import ObjectStoreDataset
from dataloader.sources._parquet import ParquetDataset
from dataloader.sources._retry import Retry
from dataloader.sources._row_stream import RowGroupStream
from dataloader.sources._tar_dataset import TarDataset
from dataloader.sources._tar_writer import TarWriter
from dataloader.sources._tokens import TokenDataset

__all__ = [
    "ArrowDataset", "FileDataset", "HttpDataset", "ObjectStoreDataset", "ParquetDataset", "Retry",
    "RowGroupStream", "ShardError", "ShardLimits", "TarDataset", "TarWriter", "TokenDataset",
]
