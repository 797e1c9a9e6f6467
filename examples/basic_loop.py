"""A map-style dataset, shuffled into batches on two worker threads."""

import numpy as np

from dataloader import DataLoader, Dataset


class Squares(Dataset):
    """Item i is a dict of numbers: default_collate batches each key."""

    def __len__(self) -> int:
        return 1000

    def __getitem__(self, index: int) -> dict:
        return {"x": np.float32(index), "y": index * index}


def main() -> None:
    loader = DataLoader(Squares(), batch_size=64, shuffle=True, num_workers=2, seed=0)
    for _epoch in range(2):
        seen = 0
        for batch in loader:
            assert np.array_equal(batch["x"].astype(np.int64) ** 2, batch["y"])
            seen += len(batch["y"])
        print(f"epoch {loader.epoch}: {len(loader)} batches, {seen} items, "
              f"last batch x={batch['x'].dtype} {batch['x'].shape}, y={batch['y'].dtype}")
    figures = loader.stats()
    print(f"fetched {figures['fetch']['count']} items, "
          f"collated {figures['collate']['count']} batches")
    loader.close()


if __name__ == "__main__":
    main()
