"""Load a generated in-memory dataset through the loader and report batches/s."""

import time

import numpy as np

from dataloader import DataLoader, Dataset


class Features(Dataset):
    """Rows of a feature matrix with their labels, generated in memory."""

    def __init__(self, n_items: int, n_features: int) -> None:
        rng = np.random.default_rng(0)
        self.features = rng.standard_normal((n_items, n_features), dtype=np.float32)
        self.labels = rng.integers(0, 10, size=n_items)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict:
        return {"x": self.features[index], "y": int(self.labels[index])}


def main() -> None:
    dataset = Features(n_items=50_000, n_features=128)
    loader = DataLoader(dataset, batch_size=256, shuffle=True, seed=0)
    for epoch in range(3):
        start = time.perf_counter()
        n_batches = 0
        for batch in loader:
            n_batches += 1
        elapsed = time.perf_counter() - start
        print(
            f"epoch {epoch}: {n_batches} batches of {batch['x'].shape[1:]} float32 "
            f"+ labels, {n_batches / elapsed:,.0f} batches/s"
        )


if __name__ == "__main__":
    main()
