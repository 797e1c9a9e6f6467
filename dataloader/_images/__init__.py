"""Images: the image stage of the flow, plugged into the generic loader.

``arguments`` checks the arguments of every transform and kernel;
``base`` is the ``Transform`` every transform class builds on; ``colour``
holds the colour and filter transforms;
``decode`` inspects and decodes encoded images; ``chains`` compiles
transforms into native chains; ``collator`` binds a chain to an epoch and
collates images into pooled batch buffers; ``folder`` is
``ImageFolder``; ``exif`` reads orientation tags; ``samples`` generates
sample photographs. The public faces are ``dataloader.transforms`` and
``dataloader.kernels``.
"""
