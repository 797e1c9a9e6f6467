"""The fuzz targets (``fuzz/targets.py``) over the seed corpus and every saved reproducer.

This is ``make fuzz`` run for zero seconds: each input of the generated
seed corpus, and each file of ``fuzz/regressions/`` (inputs that once made a
target crash, hang or trip a sanitizer), must give a correct result or a
``ValueError``.
"""

import importlib.util
import io
from pathlib import Path

import numpy as np
import pytest

FUZZ = Path(__file__).parent.parent / "fuzz"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"_fuzz_{name}", FUZZ / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


targets = _load("targets")
make_corpus = _load("make_corpus")


@pytest.fixture(scope="module")
def seeds():
    return make_corpus.corpus()


def reproducers():
    """Inputs at the edges where decoders go wrong (``fuzz/regressions/README.md``)."""
    return {
        f"regressions/{path.name}": path.read_bytes()
        for path in sorted((FUZZ / "regressions").glob("*"))
        if not path.name.startswith(".") and path.name != "README.md"
    }


def test_regression_inputs_decode_or_are_rejected_as_named():
    from PIL import Image as PILImage

    from dataloader import kernels

    outcomes = {name.split(".")[-2] for name in reproducers()}
    assert outcomes == {"ok", "reject"}, outcomes
    for name, data in reproducers().items():
        if name.split(".")[-2] == "reject":
            with pytest.raises(ValueError):
                kernels.decode(data)
            continue
        with PILImage.open(io.BytesIO(data)) as image:
            expected = np.asarray(image.convert("RGB"))
        np.testing.assert_array_equal(kernels.decode(data, mode="RGB"), expected, err_msg=name)


@pytest.mark.parametrize("target", sorted(targets.TARGETS))
def test_target_over_seed_corpus_and_reproducers(target, seeds):
    run = targets.TARGETS[target]
    for name, data in {**seeds, **reproducers()}.items():
        try:
            run(data)
        except Exception as exc:
            exc.add_note(f"input {name!r}")
            raise


def test_seed_corpus_has_valid_and_broken_images(seeds):
    from dataloader import kernels

    decoded = 0
    for data in seeds.values():
        try:
            kernels.decode(data)
            decoded += 1
        except ValueError:
            pass
    assert 50 < decoded < len(seeds) - 30


def test_seed_corpus_has_valid_and_broken_media(seeds):
    import shutil

    from dataloader import kernels

    if shutil.which("ffmpeg") is None:
        pytest.skip("the media seeds are made by the ffmpeg command")
    outcomes = {}
    for name, data in seeds.items():
        if name.startswith("media-"):
            try:
                kernels.media_info(data)
                if "tones" in name:
                    kernels.decode_audio(data)
                else:
                    kernels.decode_video(data, size=(8, 8))
                outcomes[name] = "decoded"
            except ValueError:
                outcomes[name] = "refused"
    valid = [f"media-{name}" for name in make_corpus.MEDIA]
    assert all(outcomes[name] == "decoded" for name in valid), outcomes
    assert "refused" in outcomes.values() and len(outcomes) > 5 * len(valid)
