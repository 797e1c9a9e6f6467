"""Train a small language model on a Parquet file of tokenised text, on the CPU.

The text is what this machine has at hand: the docstrings of Python's
standard library. A byte-level BPE tokenizer is trained on it with
Hugging Face's ``tokenizers``, and the token ids are written to a Parquet
file, one paragraph per row, as a corpus prepared for training would be.
The loader then reads the file (``ParquetDataset``), batches paragraphs of
similar length under a token budget (``BucketBatchSampler``) and pads them
with their attention mask (``PadCollator``), on worker threads; a small
next-token model learns from the batches, and its loss falls epoch after epoch.
"""

import re
import sysconfig
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from torch import nn

from dataloader import BucketBatchSampler, DataLoader, PadCollator
from dataloader.sources import ParquetDataset

VOCABULARY = 512
MAX_TOKENS = 4096  # padded tokens per batch
PAD = 0
DOCSTRING = re.compile(r'"""(.*?)"""', re.S)


def paragraphs(limit: int = 2000) -> list[str]:
    """Paragraphs of the standard library's docstrings."""
    found: list[str] = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        for docstring in DOCSTRING.findall(path.read_text(encoding="utf-8", errors="replace")):
            found += [part.strip() for part in docstring.split("\n\n") if len(part) > 40]
        if len(found) >= limit:
            break
    return found[:limit]


def write_corpus(texts: list[str], path: Path) -> None:
    """Tokenise ``texts`` with a BPE trained on them and write one row of ids per text."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=VOCABULARY, special_tokens=["<pad>"], show_progress=False))
    ids = [encoding.ids for encoding in tokenizer.encode_batch(texts)]
    table = pa.table({"input_ids": pa.array(ids, pa.list_(pa.int32())),
                      "length": pa.array([len(row) for row in ids], pa.int32())})
    pq.write_table(table, path, row_group_size=512)


class NextToken(nn.Module):
    """A token's embedding, a hidden layer and a projection back to the vocabulary."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Embedding(VOCABULARY, 64, padding_idx=PAD),
                                    nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, VOCABULARY))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.layers(ids)


def main() -> None:
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.parquet"
        write_corpus(paragraphs(), corpus)
        lengths = pq.read_table(corpus, columns=["length"])["length"].to_numpy()
        dataset = ParquetDataset(corpus, columns=["input_ids"])
        collator = PadCollator(pad_value=PAD, pad_to_multiple_of=8, max_length=128)
        sampler = BucketBatchSampler(lengths, max_tokens=MAX_TOKENS, padding=collator, seed=0)
        loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=collator,
                            num_workers=2, worker_type="thread")
        print(f"{len(dataset)} paragraphs, {int(lengths.sum())} tokens, "
              f"{len(loader)} batches of at most {MAX_TOKENS} padded tokens")
        model = NextToken()
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        with loader:
            for epoch in range(3):
                total = count = 0.0
                for batch in loader:
                    ids = torch.from_numpy(np.asarray(batch["input_ids"], np.int64))
                    mask = torch.from_numpy(batch["attention_mask"][:, 1:]).bool()
                    logits = model(ids[:, :-1])
                    loss = nn.functional.cross_entropy(logits[mask], ids[:, 1:][mask])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    total, count = total + loss.item(), count + 1
                print(f"epoch {epoch}: loss {total / count:.2f}")


if __name__ == "__main__":
    main()
