"""On a free-threaded CPython, importing ``dataloader`` keeps the GIL disabled.

Every extension module declares ``Py_mod_gil = Py_MOD_GIL_NOT_USED``
(Cython's ``freethreading_compatible``); one that did not would make the
interpreter enable the GIL at import, silently serialising the workers.
"""

import os
import subprocess
import sys
import sysconfig

import pytest

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))

EXTENSIONS = [
    "codecs", "collate", "epoch", "image", "io", "ops", "pipeline", "pool", "resize", "rules",
    "shuffle", "stats", "stream", "tar",
]


@pytest.mark.skipif(not FREE_THREADED, reason="a GIL build of CPython: its GIL is always on")
def test_importing_every_extension_keeps_the_gil_disabled():
    code = "\n".join([
        "import sys",
        "import dataloader, dataloader.kernels",
        *[f"import dataloader._core.{name}" for name in EXTENSIONS],
        "print(sys._is_gil_enabled())",
    ])
    # PYTHON_GIL=0 would force the GIL off and hide a module that needs it.
    env = {key: value for key, value in os.environ.items() if key != "PYTHON_GIL"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False", result.stderr


def test_every_extension_is_listed():
    from pathlib import Path

    import dataloader._core as core

    built = {path.name.split(".")[0] for path in Path(core.__file__).parent.iterdir()
             if path.suffix in (".so", ".pyd")}
    assert built <= set(EXTENSIONS), built - set(EXTENSIONS)
