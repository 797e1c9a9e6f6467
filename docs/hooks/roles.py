"""mkdocs hook: Sphinx cross-reference roles in docstrings, shown as plain code.

The numpydoc docstrings write ``:class:`Transform``` and
``:func:`~dataloader.kernels.decode```, which Markdown renders as the role's
text followed by the code. This keeps the code, and for ``~name.path`` only
its last part, as Sphinx would.
"""

from __future__ import annotations

import re

_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj):(?=<code>)")
_TILDE = re.compile(r"<code>~(?:[\w.]+\.)?(\w+)</code>")


def on_page_content(html: str, **kwargs) -> str:
    return _TILDE.sub(r"<code>\1</code>", _ROLE.sub("", html))
