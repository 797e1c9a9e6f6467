"""Images from an object store: ``ObjectStoreDataset`` over S3, GCS, Azure or local files.

The same code reads ``s3://bucket/prefix`` (credentials from the usual AWS
environment), ``gs://...``, ``az://...`` or, as here so that it runs
anywhere, a ``file://`` directory. Keys are listed once; objects are read
on the loader's event loop while native transforms decode them on the
worker threads. Needs ``pip install "dataloader[s3]"``.
"""

import tempfile

from sample_data import CLASSES, image_folder

from dataloader import DataLoader, ImageCollator
from dataloader.sources import ObjectStoreDataset
from dataloader.transforms import CenterCrop, Compose, Decode, Normalize, Resize, ToChw, ToFloat


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = image_folder(tmp, per_class=8)
        # For S3: ObjectStoreDataset.from_url("s3://my-bucket/train/", suffixes=(".jpg",),
        #                                     region="eu-west-1")
        dataset = ObjectStoreDataset.from_url(root.as_uri(), suffixes=(".jpg",))
        print(f"{len(dataset)} objects, first key {dataset.keys[0]}")
        labels = {key: CLASSES.index(key.split("/")[0]) for key in dataset.keys}

        eval_chain = Compose([Decode("RGB"), Resize(72), CenterCrop(64), ToFloat(),
                              Normalize([0.5] * 3, [0.25] * 3), ToChw()])
        with DataLoader(dataset, batch_size=8, num_workers=2, item_concurrency=4,
                        transform=eval_chain, collate_fn=ImageCollator()) as loader:
            for position, batch in enumerate(loader):
                keys = dataset.keys[position * 8 : (position + 1) * 8]
                print(f"batch {position}: {batch.shape} {batch.dtype}, "
                      f"classes {sorted({labels[key] for key in keys})}")


if __name__ == "__main__":
    main()
