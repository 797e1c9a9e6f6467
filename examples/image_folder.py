"""An image folder through native transforms into torch tensors, without a copy.

Decoding, cropping, flipping and normalising run on the worker threads
without the GIL; each image is written straight into its slot of a pooled
batch, which ``torch.from_dlpack`` then wraps as a tensor.
"""

import tempfile

import torch
from sample_data import image_folder

from dataloader import DataLoader, ImageCollator, ImageFolder
from dataloader.transforms import (
    Compose,
    Decode,
    Normalize,
    RandomHFlip,
    RandomResizedCrop,
    ToChw,
    ToFloat,
)

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        dataset = ImageFolder(image_folder(tmp, per_class=20))
        train = Compose([Decode("RGB"), RandomResizedCrop(64), RandomHFlip(), ToFloat(),
                         Normalize(MEAN, STD), ToChw()])
        loader = DataLoader(dataset, batch_size=16, shuffle=True, num_workers=2,
                            transform=train, collate_fn=ImageCollator(), seed=0)
        print(f"{len(dataset)} images, classes {dataset.classes}")
        for images, labels in loader:
            x = torch.from_dlpack(images)               # shares the batch's memory
            y = torch.from_numpy(labels)
            print(f"batch {tuple(x.shape)} {x.dtype}, labels {y.tolist()[:6]}..., "
                  f"mean {x.mean().item():+.2f}")
        loader.close()


if __name__ == "__main__":
    main()
