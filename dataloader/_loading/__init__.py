"""Loading: ``DataLoader`` and its epochs, from batches of indices to batches.

``loader`` holds the public class and builds each epoch's plan
(``plans``); ``arguments`` checks its counting arguments; ``fetch``
builds an epoch's recipe and skip budget for the engine's one loading
routine (``dataloader._core.load``); ``iterators`` runs map-style epochs
on the native engine (``dataloader._core.epoch``) and ``streaming``
stream epochs;
``collate`` turns items into a batch; ``pinning`` puts batches in
page-locked memory; ``worker`` answers ``get_worker_info()``; ``stats``
reads the engine's counters.
"""
