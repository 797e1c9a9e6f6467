"""What to tell a user who asks for a transform by a name this library does not have."""

from __future__ import annotations

from collections.abc import Iterable

from dataloader._errors import did_you_mean

__all__ = ["transform_hint"]

# torchvision's transforms that have no counterpart here, and what to use.
_TORCHVISION_ONLY = {
    "ToPILImage": "native transforms take and give arrays and Images; a Python transform given "
                  "to ImageFolder receives a PIL image",
    "PILToTensor": "Decode() gives a uint8 HWC image; add ToChw() for CHW",
    "ConvertImageDtype": "use ToFloat() for uint8 to float32 in [0, 1]",
    "Lambda": "native chains hold native transforms only; pass Python code as the "
              "DataLoader's transform= (or to ImageFolder)",
    "RandomApply": "use RandomChoice, or a transform's own probability p",
}


def transform_hint(name: str, names: Iterable[str]) -> str:
    """What to use instead of ``name``, which is none of ``names`` ("" when unsure).

    Examples
    --------
    >>> from dataloader._images.names import transform_hint
    >>> transform_hint("RandomHFlp", ["RandomHFlip", "Resize"])
    "did you mean 'RandomHFlip'?"
    >>> transform_hint("ToPILImage", [])  # doctest: +ELLIPSIS
    "torchvision's ToPILImage has no counterpart here: native transforms take ..."
    >>> transform_hint("Sharpen", ["Resize"])
    ''
    """
    if name in _TORCHVISION_ONLY:
        return f"torchvision's {name} has no counterpart here: {_TORCHVISION_ONLY[name]}"
    return did_you_mean(name, names).strip(" ()")
