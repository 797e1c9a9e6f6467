"""Damaged video and audio files in the loader: the error names the file and the position."""

import shutil
from pathlib import Path

import pytest

from dataloader import AudioFolder, ClipSampler, DataLoader, VideoFolder, WindowSampler
from dataloader.kernels import decode_audio, decode_video, media_info


def cut_inside_a_frame(data):
    """``data`` (an MPEG-TS file) cut short from 30% of it on, where the cut leaves the
    last frame partly written: the first cut that decoding refuses."""
    for end in range(len(data) * 3 // 10, len(data), 997):
        try:
            decode_video(data[:end], size=(8, 8))
        except ValueError:
            return data[:end]
    raise AssertionError("no cut of the file damages a frame")


@pytest.fixture(scope="module")
def damaged(media, tmp_path_factory):
    """A folder per kind: one good file and one cut short inside its packets."""
    root = tmp_path_factory.mktemp("damaged")
    for kind, name in {"videos": "offset.ts", "audio": "tones.wav"}.items():
        for label in ("good", "bad"):
            (root / kind / label).mkdir(parents=True)
        shutil.copy(media[name], root / kind / "good" / name)
        data = media[name].read_bytes()
        cut = cut_inside_a_frame(data) if kind == "videos" else data[:len(data) * 3 // 10 + 1]
        (root / kind / "bad" / name).write_bytes(cut)
    return root


def test_a_truncated_video_raises_naming_the_file_frame_and_byte(damaged):
    path = damaged / "videos" / "bad" / "offset.ts"
    with pytest.raises(ValueError, match=rf"cannot decode video '{path}': frame \d+ "
                                         r"\(byte \d+\)"):
        decode_video(path, size=(32, 48))


def test_a_truncated_audio_file_raises_naming_the_file_and_byte(damaged):
    path = damaged / "audio" / "bad" / "tones.wav"
    with pytest.raises(ValueError, match=rf"cannot decode audio '{path}': .* at byte \d+"):
        decode_audio(path, end=2.5)


def test_audio_claiming_an_absurd_sample_rate_is_refused_as_corrupt():
    # Found by fuzzing: a billion samples a second made the resampler ask for
    # gigabytes (MemoryError); the file is what is wrong.
    data = (Path(__file__).parent.parent / "fuzz" / "regressions"
            / "audio-claiming-a-billion-hz.reject.mp4").read_bytes()
    with pytest.raises(ValueError, match=r"the audio claims 1073741949 Hz and 2 channels"):
        decode_audio(data, sample_rate=16000)


def test_a_file_claiming_more_than_it_holds_is_refused_as_corrupt():
    # Found by fuzzing: FFmpeg calls this "out of memory"; the file is what is wrong.
    data = (Path(__file__).parent.parent / "fuzz" / "regressions"
            / "media-claiming-more-extradata-than-it-holds.reject.bin").read_bytes()
    with pytest.raises(ValueError, match=r"not a media file FFmpeg reads: .*extradata"):
        media_info(data)


@pytest.mark.parametrize("worker_type", ["thread", "process"])
def test_the_loader_raises_the_decode_error_for_its_batch_and_goes_on(damaged, worker_type):
    # Clips longer than the cut video: they end on its last frame, cut in the middle.
    folder = VideoFolder(damaged / "videos", ClipSampler(30, random=False), size=(24, 40))
    loader = DataLoader(folder, batch_size=1, num_workers=2, worker_type=worker_type)
    outcomes = []
    it = iter(loader)
    for _ in range(len(loader)):
        try:
            _, labels = next(it)
            outcomes.append(("ok", labels.tolist()))
        except ValueError as err:
            assert "offset.ts" in str(err) and "byte" in str(err)
            outcomes.append(("error", None))
    # Batch 0 is the cut file's clip (class "bad" sorts first), batch 1 the good one's.
    assert outcomes == [("error", None), ("ok", [1])]


def test_an_audio_folder_with_a_truncated_file_skips_it_when_asked(damaged):
    folder = AudioFolder(damaged / "audio", WindowSampler(1.0, windows_per_file=2, random=False),
                         sample_rate=8000)
    loader = DataLoader(folder, batch_size=1, num_workers=2, worker_type="thread",
                        on_error="skip", max_skipped=2)
    labels = [int(label[0]) for _, label in loader]
    assert labels == [1, 1]   # both windows of the cut file reach past its end: skipped
