"""Hand-written mutations of the C and Cython kernels, each of which a test must catch.

A mutation tool for C would rebuild the extensions once per mutant, minutes
each; instead each entry of ``MUTATIONS`` is a plausible bug (a rounding
dropped, an inversion skipped, a branch swapped), applied to the source,
built by the editable install's rebuild on import, and run against the
tests that should catch it: the mutation is *killed* when one fails. The
sources are restored, and the extensions rebuilt, when the run ends.

Run ``python -m tools.mutation native`` (``make mutate`` does).
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = "dataloader/_core/src/"


@dataclass(frozen=True)
class Mutation:
    """Replace ``old`` (found exactly once) by ``new`` in ``path``; ``tests`` must catch it."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = (
    Mutation("CMYK JPEG samples taken as not inverted", SRC + "dl_jpeg.c",
             "int nk = src[3];", "int nk = 255 - src[3];", ("tests/core/test_codecs.py",)),
    Mutation("CMYK to RGB truncated instead of rounded", SRC + "dl_jpeg.c",
             "int t = v * nk + 128;", "int t = v * nk;", ("tests/core/test_codecs.py",)),
    Mutation("a failed JPEG decode reported as success", SRC + "dl_jpeg.c",
             "? DL_ERR_NOMEM : DL_ERR_CORRUPT;", "? DL_ERR_NOMEM : DL_OK;",
             ("tests/core/test_codecs.py",)),
    Mutation("a JPEG warning (corrupt data) ignored", SRC + "dl_jpeg.c",
             "if (level < 0) dl_jpeg_error_exit(cinfo);", "(void)level;",
             ("tests/core/test_codecs.py",)),
    Mutation("a kept JPEG header used for other header bytes at the same address",
             SRC + "dl_jpeg.c", "memcmp(state->kept_bytes, data, length) == 0", "1",
             ("tests/core/test_codecs.py",)),
    Mutation("a JPEG window decoded without its pixel of context", SRC + "dl_jpeg.c",
             "#define DL_JPEG_CONTEXT 1", "#define DL_JPEG_CONTEXT 0",
             ("tests/test_jpeg_windows.py",)),
    Mutation("a part of a resize reads its inputs from the image's origin", SRC + "dl_resize.c",
             "(*bounds)[2 * i] -= offset;", "(*bounds)[2 * i] -= 0 * offset;",
             ("tests/test_jpeg_windows.py",)),
    Mutation("a fused float tail maps every channel through the first one's table",
             SRC + "dl_resize.c",
             "out[c * plane + x * x_step] = sink->lut[c][in[x * p->channels + c]];",
             "out[c * plane + x * x_step] = sink->lut[0][in[x * p->channels + c]];",
             ("tests/test_float_tail.py",)),
    Mutation("a fused float tail's flips left out", SRC + "dl_resize.c",
             "x_step = sink->flip_x ? -1 : 1;", "x_step = 1;", ("tests/test_float_tail.py",)),
    Mutation("a fused float tail's strips all take the first strip's weights",
             SRC + "dl_resize.c", "p->bounds + 2 * (ptrdiff_t)y0,", "p->bounds,",
             ("tests/test_float_tail.py",)),
    Mutation("luma weights of red and blue swapped", SRC + "dl_codecs.h",
             "p[0] * 19595u + p[1] * 38470u + p[2] * 7471u",
             "p[0] * 7471u + p[1] * 38470u + p[2] * 19595u",
             ("tests/core/test_codecs.py", "tests/test_colour.py")),
    Mutation("equalize's step divided by 256 (older Pillow's rule)", SRC + "dl_colour.c",
             "(total - last) / 255", "(total - last) / 256", ("tests/test_colour.py",)),
    Mutation("blend rounds instead of truncating", SRC + "dl_colour.c",
             "dst[i] = (uint8_t)(int)value;", "dst[i] = (uint8_t)(int)(value + 0.5f);",
             ("tests/test_colour.py",)),
    Mutation("alpha added as 0 instead of 255", SRC + "dl_convert.c",
             "a = sc == 4 ? s[3] : 255;", "a = sc == 4 ? s[3] : 0;",
             ("tests/core/test_codecs.py", "tests/test_kernels.py")),
    Mutation("rotate90: k=1 and k=3 swapped", SRC + "dl_ops.c",
             "        if (k == 1)\n            turn_run(",
             "        if (k == 3)\n            turn_run(",
             ("tests/test_kernels.py", "tests/core/test_ops.py")),
    Mutation("the AVX2 luma weighs green by 38471", SRC + "dl_convert.c",
             "_mm256_set1_epi32(16384 << 16 | 7471)", "_mm256_set1_epi32(16385 << 16 | 7471)",
             ("tests/test_kernels.py",)),
    Mutation("a quarter turn's backward words start at their pixel", SRC + "dl_ops.c",
             "offset = dir > 0 ? 0 : -1;", "offset = 0;", ("tests/test_kernels.py",)),
    Mutation("the box blur's fractional edge weights left out", SRC + "dl_blur.c",
             "box.fw = ((1u << 24) - (uint32_t)(box.radius * 2 + 1) * box.ww) / 2;",
             "box.fw = 0;", ("tests/test_blur.py",)),
    Mutation("reflect padding repeats the edge sample", SRC + "dl_ops.c",
             "return i >= n ? period - i : i;", "return i >= n ? period - 1 - i : i;",
             ("tests/test_kernels.py", "tests/core/test_ops.py")),
    Mutation("uint8 to float scaled by 1/256", SRC + "dl_ops.c",
             "dst[i] = (float)src[i] / 255.0f;", "dst[i] = (float)src[i] / 256.0f;",
             ("tests/test_kernels.py", "tests/core/test_ops.py")),
    Mutation("normalize reads uint8 samples scaled by 1/256", SRC + "dl_ops.c",
             "if (src_is_uint8) return (float)((const uint8_t *)src)[i] / 255.0f;",
             "if (src_is_uint8) return (float)((const uint8_t *)src)[i] / 256.0f;",
             ("tests/test_kernels.py", "tests/core/test_ops.py")),
    Mutation("collate: a float in a batch of ints truncated", "dataloader/_core/collate.pyx",
             "        if type(item) is not kind:",
             "        if type(item) is not kind and kind is not int:", ("tests/test_collate.py",)),
)


def _build() -> bool:
    """Rebuild the extensions (the editable install does it on import); whether it worked."""
    command = [sys.executable, "-c",
               "import dataloader._core.codecs, dataloader._core.ops, dataloader._core.collate"]
    return subprocess.run(command, cwd=ROOT, capture_output=True, check=False).returncode == 0


def _tests_fail(tests: tuple[str, ...]) -> bool:
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-m", "not soak",
               "-p", "no:cacheprovider", *tests]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, check=False)
    return result.returncode != 0


def run(mutations=MUTATIONS, log=print) -> dict[str, str]:
    """Apply each mutation in turn; ``{name: "killed" | "SURVIVED" | "does not build"}``."""
    results = {}
    for mutation in mutations:
        path = ROOT / mutation.path
        original = path.read_text(encoding="utf-8")
        if original.count(mutation.old) != 1:
            raise ValueError(f"{mutation.name}: {mutation.old!r} is not found exactly once "
                             f"in {mutation.path}: update the mutation")
        started = time.monotonic()
        try:
            path.write_text(original.replace(mutation.old, mutation.new), encoding="utf-8")
            if not _build():
                outcome = "does not build"
            else:
                outcome = "killed" if _tests_fail(mutation.tests) else "SURVIVED"
        finally:
            path.write_text(original, encoding="utf-8")
        results[mutation.name] = outcome
        log(f"  {outcome:14} {mutation.path}: {mutation.name} "
            f"({time.monotonic() - started:.0f} s)")
    if not _build():
        raise RuntimeError("the restored sources do not build")
    return results


def main(argv: list[str]) -> int:
    """``python -m tools.mutation native [WORDS...]``: every mutation, or those whose name
    contains one of ``WORDS``."""
    chosen = [m for m in MUTATIONS if not argv or any(word in m.name for word in argv)]
    if not chosen:
        print(f"no mutation's name contains any of {argv}", file=sys.stderr)
        return 2
    print(f"native kernels: {len(chosen)} hand-written mutations", flush=True)
    results = run(chosen, log=lambda line: print(line, flush=True))
    killed = sum(outcome == "killed" for outcome in results.values())
    print(f"native kernels: {killed} of {len(results)} mutations killed")
    return 0 if killed == len(results) else 1
