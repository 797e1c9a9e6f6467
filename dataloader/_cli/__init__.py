"""The ``dataloader`` command: ``main`` parses and dispatches; ``bench`` and ``pack``."""
