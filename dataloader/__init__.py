"""dataloader: a data loading library for machine-learning training.

``DataLoader``, ``Dataset`` and the samplers have ``torch.utils.data``'s
names and meanings; batches are numpy arrays (torch tensors stay tensors).

Examples
--------
>>> from dataloader import DataLoader
>>> for batch in DataLoader(list(range(6)), batch_size=3):
...     print(batch)
[0 1 2]
[3 4 5]
"""

from dataloader._datasets.asynchronous import AsyncDataset
from dataloader._datasets.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    shard,
)
from dataloader._datasets.interleave import interleave
from dataloader._datasets.worker_info import WorkerInfo, get_worker_info
from dataloader._datasets.wrappers import StackDataset, Subset, TensorDataset, random_split
from dataloader._images.collator import ImageCollator
from dataloader._images.folder import ImageFolder
from dataloader._loader import DataLoader
from dataloader._loading.collate import default_collate, default_convert
from dataloader._loading.elastic import LoaderCheckpoint, gather_state, merge_states
from dataloader._media.audio_folder import AudioFolder, WindowSampler
from dataloader._media.clips import ClipCollator, ClipTransform
from dataloader._media.folder import ClipSampler, VideoFolder
from dataloader._sampling.distributed import DistributedSampler
from dataloader._sampling.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from dataloader._sampling.seeding import item_seed
from dataloader._sequences.buckets import BucketBatchSampler
from dataloader._sequences.packing import PackedDataset, collate_packed
from dataloader._sequences.padding import PadCollator
from dataloader.sources import FileDataset, HttpDataset, ObjectStoreDataset, Retry

__version__ = "0.1.0"

__all__ = [
    "AsyncDataset",
    "AudioFolder",
    "BatchSampler",
    "BucketBatchSampler",
    "ChainDataset",
    "ClipCollator",
    "ClipSampler",
    "ClipTransform",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedSampler",
    "FileDataset",
    "HttpDataset",
    "ImageCollator",
    "ImageFolder",
    "IterableDataset",
    "LoaderCheckpoint",
    "ObjectStoreDataset",
    "PackedDataset",
    "PadCollator",
    "RandomSampler",
    "Retry",
    "Sampler",
    "SequentialSampler",
    "StackDataset",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "VideoFolder",
    "WeightedRandomSampler",
    "WindowSampler",
    "WorkerInfo",
    "collate_packed",
    "default_collate",
    "default_convert",
    "gather_state",
    "get_worker_info",
    "interleave",
    "item_seed",
    "merge_states",
    "random_split",
    "shard",
]
