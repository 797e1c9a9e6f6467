"""TokenDataset: windows of a flat token file, against plain numpy slicing as nanoGPT does it."""

import pickle

import numpy as np
import pytest

from dataloader import DataLoader
from dataloader._processes.choice import resolve_worker_type
from dataloader.sources import TokenDataset

WORKER_KINDS = [
    pytest.param((0, "thread"), id="direct"),
    pytest.param((2, "thread"), id="threads"),
    pytest.param((2, "process"), id="processes"),
]
TOKENS = 1000


@pytest.fixture(params=[np.uint16, np.uint32])
def token_file(request, tmp_path):
    """A file of raw token ids, and the ids."""
    dtype = request.param
    high = np.iinfo(dtype).max
    tokens = np.random.default_rng(0).integers(0, high, TOKENS, dtype=np.int64).astype(dtype)
    path = tmp_path / "train.bin"
    tokens.tofile(path)
    return path, tokens


def window(tokens, start, seq_len):
    """nanoGPT's get_batch, for one offset."""
    x = tokens[start:start + seq_len].astype(np.int64)
    y = tokens[start + 1:start + 1 + seq_len].astype(np.int64)
    return x, y


@pytest.mark.parametrize("stride", [None, 1, 7])
def test_windows_are_nanogpts_slices(token_file, stride):
    path, tokens = token_file
    dataset = TokenDataset(path, seq_len=16, stride=stride, dtype=tokens.dtype)
    step = stride or 16
    assert len(dataset) == len(range(0, TOKENS - 16, step))
    for index in [0, 1, len(dataset) // 2, len(dataset) - 1, -1]:
        x, y = dataset[index]
        expected_x, expected_y = window(tokens, (index % len(dataset)) * step, 16)
        np.testing.assert_array_equal(x, expected_x)
        np.testing.assert_array_equal(y, expected_y)
        assert x.dtype == y.dtype == np.int64
    assert (len(dataset) - 1) * step + 16 < TOKENS <= len(dataset) * step + 16  # none left out


@pytest.mark.parametrize("kind", WORKER_KINDS)
def test_loader_batches_are_the_slices_of_the_samplers_offsets(token_file, kind):
    path, tokens = token_file
    num_workers, worker_type = kind
    dataset = TokenDataset(path, seq_len=32, stride=1, dtype=tokens.dtype)
    order = np.random.default_rng(1).permutation(len(dataset))[:200].tolist()
    loader = DataLoader(dataset, batch_size=8, sampler=order, num_workers=num_workers,
                        worker_type=worker_type)
    position = 0
    for x, y in loader:  # each batch dropped before the next is taken
        starts = order[position:position + len(x)]
        expected = [window(tokens, start, 32) for start in starts]
        np.testing.assert_array_equal(x, np.stack([e[0] for e in expected]))
        np.testing.assert_array_equal(y, np.stack([e[1] for e in expected]))
        position += len(x)
    assert position == len(order)


def test_an_array_or_a_memmap_works_as_a_file_does(token_file):
    path, tokens = token_file
    mapped = np.memmap(path, dtype=tokens.dtype, mode="r")
    for source in (tokens, mapped):
        x, _ = TokenDataset(source, seq_len=10)[3]
        np.testing.assert_array_equal(x, window(tokens, 30, 10)[0])


def test_positions_restart_at_every_document(token_file):
    path, tokens = token_file
    starts = np.array([0, 5, 6, 40, 41, 300, 999])
    dataset = TokenDataset(path, seq_len=20, stride=3, dtype=tokens.dtype, documents=starts)
    for index in range(len(dataset)):
        x, y, positions = dataset[index]
        np.testing.assert_array_equal(np.stack([x, y]), window(tokens, index * 3, 20))
        offsets = np.arange(index * 3, index * 3 + 20)
        expected = [offset - max(s for s in starts if s <= offset) for offset in offsets]
        assert positions.tolist() == expected
    loader = DataLoader(dataset, batch_size=4, num_workers=2, worker_type="process")
    x, _, positions = next(iter(loader))
    assert positions.shape == x.shape == (4, 20) and positions[1, 0] == 3 and positions[2, 0] == 0


def test_a_document_index_file_and_tokens_before_the_first_document(tmp_path, token_file):
    path, tokens = token_file
    index = tmp_path / "documents.npy"
    np.save(index, np.array([10, 50], dtype=np.uint64))
    _, _, positions = TokenDataset(path, seq_len=20, dtype=tokens.dtype, documents=index)[0]
    assert positions.tolist() == list(range(10)) + list(range(10))


def test_a_process_receives_the_path_not_the_tokens(token_file):
    path, tokens = token_file
    dataset = TokenDataset(path, seq_len=8, dtype=tokens.dtype)
    sent = pickle.dumps(dataset)
    assert len(sent) < tokens.nbytes
    np.testing.assert_array_equal(pickle.loads(sent)[5][0], dataset[5][0])


def test_bad_input_raises_naming_it(tmp_path, token_file):
    path, tokens = token_file
    with pytest.raises(FileNotFoundError):
        TokenDataset(tmp_path / "missing.bin", seq_len=8)
    with pytest.raises(ValueError, match=f"seq_len={TOKENS} needs windows of {TOKENS + 1} tokens"):
        TokenDataset(path, seq_len=TOKENS, dtype=tokens.dtype)
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"\0" * 7)
    with pytest.raises(ValueError, match="7 bytes, not a whole number of uint16 tokens"):
        TokenDataset(odd, seq_len=2)
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="has 0 tokens"):
        TokenDataset(empty, seq_len=2)
    for name, value, error in [("seq_len", 0, ValueError), ("seq_len", 2.5, TypeError),
                               ("stride", -1, ValueError), ("stride", True, TypeError)]:
        arguments = {"seq_len": 8, name: value}
        with pytest.raises(error, match=name):
            TokenDataset(tokens, **arguments)
    with pytest.raises(TypeError, match="1-D integer array"):
        TokenDataset(np.zeros((10, 10)), seq_len=2)
    with pytest.raises(ValueError, match="increasing offsets"):
        TokenDataset(tokens, seq_len=8, documents=[0, 9, 9])
    with pytest.raises(ValueError, match="increasing offsets"):
        TokenDataset(tokens, seq_len=8, documents=[0, TOKENS])
    with pytest.raises(IndexError, match="out of range"):
        TokenDataset(tokens, seq_len=8)[10_000]


def test_auto_workers_are_threads_for_windows_of_a_mapping(token_file):
    path, tokens = token_file
    dataset = TokenDataset(path, seq_len=8, dtype=tokens.dtype)
    assert resolve_worker_type("auto", dataset, num_workers=2) == "thread"
