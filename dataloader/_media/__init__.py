"""Video and audio: decoding on FFmpeg's libraries, beside the image stage.

``source`` opens a file or bytes (and says what to install when the
library was built without FFmpeg); ``video`` chooses frames (by index, by
timestamp, as clips) and decodes them into uint8 ``(T, H, W, 3)``;
``audio`` decodes resampled float32 ``(channels, n)``; ``info`` reports
the streams. The public face is ``dataloader.kernels``.
"""
