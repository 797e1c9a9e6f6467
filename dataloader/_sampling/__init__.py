"""Sampling: which items an epoch loads, in which order, on which rank, and resuming it.

The first stage of the flow (see ``docs/architecture.md``). Samplers yield
indices (``sampler``), shuffles of any length come from a seeded bijection
(``shuffle``), every random choice derives from ``(seed, epoch)``
(``seeding``), ranks split an epoch (``distributed``), and a loader's
progress through it is saved and restored exactly (``state``).
"""
