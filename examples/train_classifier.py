"""Train a small convolutional network on an image folder, on the CPU.

The loader decodes and augments natively on worker threads; batches reach
torch through DLPack without a copy. A few dozen steps are enough for the
generated classes (each has its own colour cast) to separate.
"""

import tempfile

import torch
from sample_data import image_folder
from torch import nn

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

MEAN, STD = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]


def model(n_classes: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, n_classes),
    )


def main() -> None:
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        dataset = ImageFolder(image_folder(tmp, per_class=32))
        train = Compose([Decode("RGB"), RandomResizedCrop(48, scale=(0.3, 1.0)), RandomHFlip(),
                         ToFloat(), Normalize(MEAN, STD), ToChw()])
        loader = DataLoader(dataset, batch_size=16, shuffle=True, num_workers=2, drop_last=True,
                            transform=train, collate_fn=ImageCollator(), seed=0)
        net = model(len(dataset.classes))
        optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
        with loader:
            for epoch in range(4):
                correct = seen = 0
                total_loss = 0.0
                for images, labels in loader:
                    x, y = torch.from_dlpack(images), torch.from_numpy(labels)
                    logits = net(x)
                    loss = nn.functional.cross_entropy(logits, y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    total_loss += loss.item() * len(y)
                    correct += (logits.argmax(1) == y).sum().item()
                    seen += len(y)
                print(f"epoch {epoch}: loss {total_loss / seen:.3f}, "
                      f"accuracy {correct / seen:.2f} over {len(loader)} steps")


if __name__ == "__main__":
    main()
