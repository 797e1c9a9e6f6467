"""The test videos and audio, made on this machine by Debian's ``ffmpeg`` command.

No media file is committed: ``make_media(folder)`` encodes a camera pan
over a real photograph (Debian's wallpaper photographs, else
scikit-image's; ffmpeg's moving pattern where neither is installed) and
two tones (``dataloader._media.samples``) into each file below.  Run it
alone to look at the files::

    python tests/media_files.py /tmp/media
"""

from __future__ import annotations

import sys
from pathlib import Path

from dataloader import Dataset
from dataloader._media.samples import encode, photo_input, tones_input
from dataloader.kernels import decode_video

# Stands for the video input in the arguments below: the pan over a
# photograph, 208x120 (not a multiple of 16: codecs pad and crop their
# blocks) at 25 frames a second for 3 seconds, made once per folder.
PATTERN = ["<picture>"]
TONES = tones_input(sample_rate=44100, seconds=3)
# Keyframes every 12 frames, so that clips need seeks inside the file.
GOP = ["-g", "12", "-keyint_min", "12", "-sc_threshold", "0"]
X264 = ["-c:v", "libx264", "-preset", "veryfast", "-bf", "3", "-pix_fmt", "yuv420p", *GOP]
# name: the arguments between the inputs and the output file.
VIDEOS = {
    # B-frames (decoded out of order), and an AAC track beside the video.
    "h264_bframes.mp4": [*PATTERN, *TONES, *X264, "-c:a", "aac", "-shortest"],
    "hevc.mkv": [*PATTERN, "-c:v", "libx265", "-pix_fmt", "yuv420p",
                 "-x265-params", "keyint=12:min-keyint=12:bframes=2:log-level=error"],
    "vp9.webm": [*PATTERN, "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8",
                 "-pix_fmt", "yuv420p", *GOP],
    "av1.mkv": [*PATTERN, "-c:v", "libaom-av1", "-cpu-used", "8", "-pix_fmt", "yuv420p", *GOP],
    # A variable frame rate: frames 40 ms apart for a second, then 68 and 18 ms apart in turn.
    "vfr.mkv": [*PATTERN, "-vf", "settb=1/1000,setpts='(N*0.04"
                "+if(gt(N,25),(N-25)*0.003+mod(N,2)*0.025,0))/TB'", *X264,
                "-fps_mode", "passthrough", "-enc_time_base", "1:1000"],
    # MPEG-TS timestamps start at 1.4 s, not 0.
    "offset.ts": [*PATTERN, *X264],
    # Full-range BT.709 colours, as tagged in the stream.
    "bt709_full.mp4": [*PATTERN, "-vf", "scale=out_color_matrix=bt709:out_range=full",
                       *X264, "-pix_fmt", "yuvj420p", "-colorspace", "bt709",
                       "-color_range", "pc"],
}
# 12 seconds of two rising tones (nothing repeats: a sample off is seen),
# long enough for windows reached by a seek.
CHIRPS = ["-f", "lavfi", "-i", "aevalsrc=0.4*sin(2*PI*(200*t+40*t*t))"
          "|0.3*sin(2*PI*(500*t+25*t*t)):s=44100:d=12"]
AUDIO = {
    "tones.m4a": [*TONES, "-c:a", "aac"],
    "tones.ogg": [*TONES, "-c:a", "libvorbis"],
    "tones.wav": [*TONES, "-c:a", "pcm_s16le"],
    "chirps.m4a": [*CHIRPS, "-c:a", "aac"],
    "chirps.ogg": [*CHIRPS, "-c:a", "libvorbis"],
    "chirps.mp3": [*CHIRPS, "-c:a", "libmp3lame"],
    "chirps.flac": [*CHIRPS, "-c:a", "flac"],
    "chirps.wav": [*CHIRPS, "-c:a", "pcm_s16le"],
}


def make_media(folder: Path) -> dict[str, Path]:
    """Encode every file of ``VIDEOS`` and ``AUDIO`` into ``folder`` (kept when present)."""
    folder.mkdir(parents=True, exist_ok=True)
    picture = photo_input(folder, height=120, width=208, rate=25, seconds=3)

    def inputs(arguments: list[str]) -> list[str]:
        return [part for argument in arguments
                for part in (picture if argument == PATTERN[0] else [argument])]

    return {name: path if (path := folder / name).exists() else encode(inputs(arguments), path)
            for name, arguments in {**VIDEOS, **AUDIO}.items()}


class Clips(Dataset):
    """Clip i of a video: 4 frames from frame 3 * i, every other one, resized."""

    def __init__(self, path):
        self.path = path

    def __len__(self):
        return 8

    def __getitem__(self, index):
        return decode_video(self.path, range(3 * index, 3 * index + 8, 2), size=(48, 80))


if __name__ == "__main__":
    for path in make_media(Path(sys.argv[1])).values():
        print(path)
