"""The child process of the crash hunt (``tests/test_crash_hunt.py``).

Reads cases from stdin and writes one outcome per case to stdout, each a
pickle behind an 8-byte length. A case names a public callable and its
arguments; arrays travel as recipes (a base array and the view operations
that make it non-contiguous, reversed or broadcast), since pickling a view
would copy it. A crash kills only this process: the test sees the pipe
close and the exit signal, and starts another one for the next case.
"""

import faulthandler
import os
import pickle
import resource
import struct
import sys
import warnings

import numpy as np

# A request for more memory than any valid case needs fails fast (as a
# MemoryError the test reports) instead of thrashing a shared machine.
MEMORY_LIMIT = 6 << 30

ARRAY, IMAGE, BATCH, TRANSFORM, COLLATOR = (
    "__array__", "__image__", "__batch__", "__transform__", "__collator__")


def build_array(base, ops):
    """``base`` with view operations applied: strided slices, axis swaps, broadcasts."""
    array = base
    for op, *args in ops:
        if op == "slice":
            # (Indexing a 0-d array with () would give a scalar, not a view.)
            array = array[tuple(slice(None, None, step) for step in args[0])] if args[0] \
                else array[...]
        elif op == "swapaxes":
            array = np.swapaxes(array, *args)
        elif op == "broadcast":
            array = np.broadcast_to(array, args[0])
        elif op == "fortran":
            array = np.asfortranarray(array)
        elif op == "readonly":
            array = array.view()
            array.flags.writeable = False
    return array


def materialize(spec):
    """The objects a case describes: arrays, Images, transforms (nested in lists too)."""
    from dataloader import ImageCollator, kernels, transforms

    if isinstance(spec, tuple) and spec and isinstance(spec[0], str):
        tag = spec[0]
        if tag == ARRAY:
            return build_array(spec[1], spec[2])
        if tag == IMAGE:
            return kernels.Image.from_array(materialize(spec[1]), layout=spec[2])
        if tag == BATCH:
            return kernels.ImageBatch.from_array(materialize(spec[1]), layout=spec[2])
        if tag == TRANSFORM:
            return getattr(transforms, spec[1])(*materialize(spec[2]), **materialize(spec[3]))
        if tag == COLLATOR:
            return ImageCollator(**spec[1])
    if isinstance(spec, list):
        return [materialize(item) for item in spec]
    if isinstance(spec, tuple):
        return tuple(materialize(item) for item in spec)
    if isinstance(spec, dict):
        return {key: materialize(value) for key, value in spec.items()}
    return spec


def image_rule_broken(result):
    """Why an image a call returned breaks the image rule, or None."""
    from dataloader.kernels import Image

    if isinstance(result, tuple) and result:
        result = result[0]
    if not isinstance(result, (np.ndarray, Image)) or np.ndim(result) not in (2, 3):
        return None
    shape = tuple(result.shape)
    return f"returned an empty image, of shape {shape}" if 0 in shape else None


def run(case):
    """Run one case; return ``(outcome, detail)``."""
    import dataloader
    from dataloader import kernels, transforms

    kind, name, args, kwargs, call = case
    module = {"transforms": transforms, "kernels": kernels, "dataloader": dataloader}[kind]
    target = module
    for part in name.split("."):
        target = getattr(target, part)
    # decode_audio's (channels, n) is no image: a window past the end is empty.
    made_from_image_input = kind == "transforms" or name not in ("to_float", "stack",
                                                                 "decode_audio")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built_args, built_kwargs = materialize(args), materialize(kwargs)
        result = target(*built_args, **built_kwargs)
        if call is not None:
            call_args, call_kwargs = materialize(call)
            result = result(*call_args, **call_kwargs)
        if name == "DataLoader":
            result = [batch for batch in result]
            result = result[0] if result else None
    except (ValueError, TypeError) as exc:
        return "rejected", f"{type(exc).__name__}: {exc}"
    except BaseException as exc:  # noqa: BLE001 - any other exception is a finding
        import traceback

        return "error", "".join(traceback.format_exception(exc))
    broken = image_rule_broken(result) if made_from_image_input else None
    if broken:
        return "error", broken
    return "ok", type(result).__name__


def main():
    faulthandler.enable()
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    # Replies go to a private copy of stdout; anything else printed there
    # (by Python or C) goes to stderr instead of breaking the framing.
    stdin, stdout = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    import dataloader.kernels  # noqa: F401 - loaded before the first case is timed

    stdout.write(struct.pack("<Q", 0))
    stdout.flush()
    while True:
        header = stdin.read(8)
        if len(header) < 8:
            return
        case = pickle.loads(stdin.read(struct.unpack("<Q", header)[0]))
        reply = pickle.dumps(run(case))
        stdout.write(struct.pack("<Q", len(reply)) + reply)
        stdout.flush()


if __name__ == "__main__":
    main()
