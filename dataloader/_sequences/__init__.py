"""Sequences: the stage of variable-length items (tokenised text, audio tokens).

``padding`` pads each field of a batch into pooled batch memory
(``PadCollator``); ``buckets`` groups items of similar length into batches
of a fixed size or a token budget, equal in number on every rank
(``BucketBatchSampler``); ``packing`` packs documents into rows of a fixed
length (``PackedDataset``, ``collate_packed``). ``arguments`` checks what
they are given. See ``docs/sequences.md``.
"""
