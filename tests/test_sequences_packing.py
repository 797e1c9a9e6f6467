"""``PackedDataset`` and ``collate_packed``: against a packer in Python, resumed, on workers."""

import json
from itertools import islice, pairwise

import numpy as np
import pytest
from resuming import run_in_pieces

from dataloader import DataLoader, PackedDataset, collate_packed, shard

WORKER_KINDS = {
    "direct": {"num_workers": 0},
    "threads": {"num_workers": 2, "worker_type": "thread"},
    "processes": {"num_workers": 2, "worker_type": "process"},
}


def documents(count, seed=0, longest=300, dtype=np.int32):
    """Documents of lognormal lengths (some longer than the rows), tokens numbering them."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(3.5, 1.0, count).astype(int), 0, longest)
    return [np.full(length, number + 1, dtype) for number, length in enumerate(lengths)]


def reference_rows(docs, seq_len, window, best_fit):
    """The rows, as lists of documents, packed one document at a time in Python."""
    rows, carry, source = [], [], iter(docs)
    while True:
        read = list(islice(source, window))
        ended = len(read) < window
        pieces = [d[s:s + seq_len] for d in read for s in range(0, len(d), seq_len)]
        bins, fills = ([list(carry)], [sum(map(len, carry))]) if carry else ([], [])
        for piece in sorted(pieces, key=len, reverse=True):
            fitting = [b for b in range(len(bins)) if fills[b] + len(piece) <= seq_len]
            if not fitting:
                bins.append([piece])
                fills.append(len(piece))
                continue
            chosen = min(fitting, key=lambda b: fills[b] * -1) if best_fit else fitting[0]
            bins[chosen].append(piece)
            fills[chosen] += len(piece)
        kept = None
        if not ended and bins and min(fills) < seq_len:
            kept = fills.index(min(fills))
        rows += [row for b, row in enumerate(bins) if b != kept]
        carry = bins[kept] if kept is not None else []
        if ended and not carry:
            return rows


def as_row(documents_of_row, seq_len):
    tokens = np.concatenate(documents_of_row) if documents_of_row else np.zeros(0)
    return np.pad(tokens, (0, seq_len - len(tokens))).tolist()


@pytest.mark.parametrize("method", ["best_fit", "first_fit"])
@pytest.mark.parametrize("seq_len,window", [(128, 50), (256, 7), (64, 1)])
def test_rows_are_the_reference_packers(method, seq_len, window):
    docs = documents(400)
    expected = reference_rows(docs, seq_len, window, method == "best_fit")
    rows = list(PackedDataset(docs, seq_len, window=window, method=method))
    assert [row["input_ids"].tolist() for row in rows] == [as_row(r, seq_len) for r in expected]
    for row, documents_of_row in zip(rows, expected, strict=True):
        lengths = [len(d) for d in documents_of_row]
        used = sum(lengths)
        bounds = np.cumsum([0, *lengths]).tolist() + ([seq_len] if used < seq_len else [])
        assert row["cu_seqlens"].tolist() == bounds and row["cu_seqlens"].dtype == np.int32
        positions = [p for n in lengths for p in range(n)] + [0] * (seq_len - used)
        segments = [s + 1 for s, n in enumerate(lengths) for _ in range(n)]
        assert row["position_ids"].tolist() == positions
        assert row["segment_ids"].tolist() == segments + [0] * (seq_len - used)


def test_every_token_is_in_one_row_and_attention_never_crosses_documents():
    docs = documents(500, seed=3)
    rows = list(PackedDataset(docs, 128, window=64))
    tokens = np.concatenate([row["input_ids"] for row in rows])
    for number, document in enumerate(docs, start=1):
        assert np.count_nonzero(tokens == number) == len(document)
    for row in rows:
        segments = row["segment_ids"]
        attends = (segments[:, None] == segments[None, :]) & (segments[:, None] > 0)
        for start, end in pairwise(row["cu_seqlens"]):
            block = np.zeros_like(attends)
            block[start:end, start:end] = segments[start] > 0
            attends &= ~block
        assert not attends.any()  # nothing outside the diagonal blocks of cu_seqlens


def test_carrying_the_least_filled_row_wastes_less_than_padding_every_window():
    docs = documents(3000, seed=1, longest=2048)
    real = sum(map(len, docs))
    rows = list(PackedDataset(docs, 512, window=40))
    no_carry = sum(len(reference_rows(docs[i:i + 40], 512, 40, True))
                   for i in range(0, len(docs), 40))
    assert len(rows) < no_carry
    assert 1 - real / (len(rows) * 512) < 0.02


# 112 documents end with a whole window: the row carried out of it is given alone.
@pytest.mark.parametrize("count", [120, 112])
@pytest.mark.parametrize("source_kind", ["list", "shard", "mappings"])
def test_a_resumed_iterator_gives_exactly_the_remaining_rows(source_kind, count):
    docs = documents(count, seed=2, dtype=np.uint16)
    source = {"list": docs, "shard": shard(docs, 0, 1),
              "mappings": [{"tokens": d} for d in docs]}[source_kind]
    packed = PackedDataset(source, 96, window=16, key="tokens" if source_kind == "mappings"
                           else None)
    whole = [row["input_ids"].tolist() for row in packed]
    for stop in [*range(0, len(whole), 3), len(whole) - 1]:
        first = iter(packed)
        for _ in range(stop):
            next(first)
        resumed = iter(packed)
        resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
        rest = list(resumed)
        assert [row["input_ids"].tolist() for row in rest] == whole[stop:]
        assert all(row["input_ids"].dtype == np.uint16 for row in rest)


def test_collate_packed_gives_flash_attentions_arguments():
    rows = list(PackedDataset(documents(60), 64, window=8))[:5]
    batch = collate_packed(rows)
    assert batch["input_ids"].shape == batch["position_ids"].shape == (5, 64)
    flat_segments = (batch["segment_ids"] + 1000 * np.arange(5)[:, None]).ravel()
    bounds = batch["cu_seqlens"]
    assert bounds.dtype == np.int32 and bounds[0] == 0 and bounds[-1] == 5 * 64
    for start, end in pairwise(bounds):
        assert len(set(flat_segments[start:end])) == 1  # one document (or one padding) each
        assert batch["position_ids"].ravel()[start] == 0
    assert batch["max_seqlen"] == int(np.diff(bounds).max())


@pytest.mark.parametrize("arguments,error,message", [
    ({"source": 5, "seq_len": 8}, TypeError, "source should be an iterable"),
    ({"source": [], "seq_len": 0}, ValueError, "seq_len should be a positive"),
    ({"source": [], "seq_len": 8, "window": 1.5}, TypeError, "window should be a positive"),
    ({"source": [], "seq_len": 8, "method": "worst_fit"}, ValueError,
     "method should be one of 'best_fit', 'first_fit'"),
    ({"source": [], "seq_len": 8, "pad_value": 0.5}, TypeError, "pad_value should be an int"),
])
def test_bad_arguments_are_named(arguments, error, message):
    with pytest.raises(error, match=message):
        PackedDataset(**arguments)


@pytest.mark.parametrize("docs,message", [
    ([np.arange(3.0)], r"document 0 should be a 1-D integer array, got a float64 array"),
    ([np.arange(3), "text"], "document 1 should be a 1-D integer array, got str"),
    ([np.arange(3), np.arange(3, dtype=np.int8)], "document 1 is int8"),
])
def test_bad_documents_are_named(docs, message):
    with pytest.raises(TypeError, match=message):
        list(PackedDataset(docs, 8))
    with pytest.raises(ValueError, match="empty batch"):
        collate_packed([])


def as_lists(batch):
    return [batch["input_ids"].tolist(), batch["cu_seqlens"].tolist()]


@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_packed_batches_resumed_twice_continue_exactly_on_every_worker_kind(kind):
    docs = documents(400, seed=5)

    def make():
        packed = PackedDataset(shard(docs, 0, 1), 128, window=32)
        return DataLoader(packed, batch_size=4, collate_fn=collate_packed, timeout=120,
                          **WORKER_KINDS[kind])

    with make() as loader:
        expected = []
        for _ in range(2):
            epoch = []
            for batch in loader:
                epoch.append(as_lists(batch))
                del batch
            expected.append(epoch)
    tokens = [t for batch in expected[0] for row in batch[0] for t in row if t]
    assert sorted(tokens) == sorted(t for d in docs for t in d.tolist())
    assert run_in_pieces(make, (3, len(expected[0]) - 1, 4), 2, record=as_lists) == expected
