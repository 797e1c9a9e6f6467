"""Datasets: what the loader fetches items from.

The dataset bases with ``torch.utils.data``'s names (``dataset``), torch's
wrappers and splits (``wrappers``), datasets with ``async def
__getitem__`` (``asynchronous``) and the event loop that runs them
(``event_loop``), and weighted mixing of datasets (``interleave``).
Datasets over files, servers and shards are the public ``dataloader.sources``.
"""
