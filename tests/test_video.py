"""Video decoding compared frame by frame with PyAV's, on files made by ffmpeg here."""

import os
import random
import signal
import threading
import time

import numpy as np
import pytest
from media_files import VIDEOS, X264, Clips

from dataloader import DataLoader, kernels
from dataloader.kernels import Clip, Timestamps, decode_video, media_info

# PyAV, the reference (not installed beside a free-threaded build).
av = pytest.importorskip("av")

VIDEO_NAMES = sorted(VIDEOS)
PYAV_FILTERS = {"nearest": "POINT", "bilinear": "BILINEAR", "bicubic": "BICUBIC", "area": "AREA"}


class Reference:
    """Every frame of a video as PyAV decodes it, in order: the truth to compare with."""

    def __init__(self, path):
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            frames = list(container.decode(stream))
            self.time_base = stream.time_base
        self.pts = [frame.pts for frame in frames]
        self.times = np.array([float(frame.pts * self.time_base) for frame in frames])
        self.rgb = np.stack([frame.to_ndarray(format="rgb24") for frame in frames])
        self.frames = frames

    def shown_at(self, seconds):
        return int(np.searchsorted(self.times, seconds, side="right") - 1)


@pytest.fixture(scope="module")
def references(media):
    return {name: Reference(media[name]) for name in VIDEO_NAMES}


@pytest.mark.parametrize("name", VIDEO_NAMES)
def test_every_frame_equals_pyavs(media, references, name):
    frames = decode_video(media[name])
    reference = references[name]
    assert frames.shape == reference.rgb.shape and frames.dtype == np.uint8
    for index, (ours, theirs) in enumerate(zip(frames, reference.rgb, strict=True)):
        np.testing.assert_array_equal(ours, theirs, err_msg=f"{name}: frame {index}")


@pytest.mark.parametrize("name", VIDEO_NAMES)
def test_frames_by_number_in_any_order_with_repeats(media, references, name):
    reference = references[name]
    count = len(reference.rgb)
    rng = random.Random(name)
    wanted = [rng.randrange(count) for _ in range(6)] + [count - 1, 0, 13, 13, 12]
    frames = decode_video(media[name], wanted)
    np.testing.assert_array_equal(frames, reference.rgb[wanted])
    # Bytes decode as the file does.
    data = media[name].read_bytes()
    np.testing.assert_array_equal(decode_video(data, wanted[:3]), reference.rgb[wanted[:3]])


@pytest.mark.parametrize("name", VIDEO_NAMES)
def test_frames_by_timestamp_are_the_frames_shown_then(media, references, name):
    reference = references[name]
    times = reference.times
    # Each frame's own timestamp, a moment inside its display, and past the last one.
    seconds = [times[5], (times[20] + times[21]) / 2, times[-1] + (times[-1] - times[-2]) / 2,
               times[0], times[40] - 1e-4]
    expected = [reference.shown_at(t) for t in seconds]
    assert expected[:4] == [5, 20, len(times) - 1, 0]
    frames = decode_video(media[name], Timestamps(seconds))
    np.testing.assert_array_equal(frames, reference.rgb[expected])


@pytest.mark.parametrize("name", ["h264_bframes.mp4", "vfr.mkv", "offset.ts"])
def test_clips_by_stride_and_by_fps(media, references, name):
    reference = references[name]
    start = float(reference.times[17])
    strided = decode_video(media[name], Clip(8, start=start, stride=3))
    np.testing.assert_array_equal(strided, reference.rgb[17:17 + 24:3])
    by_rate = decode_video(media[name], Clip(10, start=start, fps=30.0))
    expected = [reference.shown_at(start + k / 30.0 + 1e-9) for k in range(10)]
    np.testing.assert_array_equal(by_rate, reference.rgb[expected])


def test_a_clip_without_a_start_begins_at_the_first_frame(media, references):
    # offset.ts's timeline starts at 1.48 s: no frame is shown at 0 s.
    reference = references["offset.ts"]
    np.testing.assert_array_equal(decode_video(media["offset.ts"], Clip(3, stride=5)),
                                  reference.rgb[[0, 5, 10]])
    np.testing.assert_array_equal(decode_video(media["offset.ts"], Clip(2, fps=12.5)),
                                  reference.rgb[[0, 2]])
    with pytest.raises(ValueError, match="no frame is shown at 0 s"):
        decode_video(media["offset.ts"], Clip(3, start=0.0))


def test_the_variable_frame_rate_file_has_irregular_frames(references):
    gaps = np.round(np.diff(references["vfr.mkv"].times), 3)
    assert {0.04, 0.068, 0.018} <= set(gaps.tolist())
    assert references["offset.ts"].times[0] > 1.0


@pytest.mark.parametrize("name", ["h264_bframes.mp4", "vp9.webm", "bt709_full.mp4"])
@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic", "area", "nearest"])
def test_resize_at_decode_equals_pyavs_reformat(media, references, name, interpolation):
    wanted = [3, 30, 31]
    # A width that is not a multiple of 8 (libswscale's SIMD blocks), and one that is.
    for height, width in [(64, 112), (61, 100)]:
        frames = decode_video(media[name], wanted, size=(height, width),
                              interpolation=interpolation)
        _assert_resized_as_pyav(frames, [references[name].frames[i] for i in wanted],
                                interpolation)


def _assert_resized_as_pyav(frames, reference_frames, interpolation):
    height, width = frames.shape[1:3]
    for ours, frame in zip(frames, reference_frames, strict=True):
        theirs = frame.reformat(width=width, height=height, format="rgb24",
                                interpolation=PYAV_FILTERS[interpolation]).to_ndarray()
        np.testing.assert_array_equal(ours, theirs)


def test_size_as_an_int_sets_the_shorter_side(media):
    assert decode_video(media["hevc.mkv"], [0], size=60).shape == (1, 60, 104, 3)


def test_crop_at_decode_equals_the_crop_of_the_whole_frame(media, references):
    reference = references["h264_bframes.mp4"]
    frames = decode_video(media["h264_bframes.mp4"], [9, 40], crop=(10, 22, 64, 100))
    np.testing.assert_array_equal(frames, reference.rgb[[9, 40], 10:74, 22:122])
    # Crop, then resize: as PyAV's reformat of the cropped frame.
    resized = decode_video(media["h264_bframes.mp4"], [9], crop=(0, 0, 120, 104), size=(60, 52))
    assert resized.shape == (1, 60, 52, 3)


def test_threads_decoding_one_file_at_once_each_get_their_frames(media, references):
    results = {}

    def decode(offset):
        results[offset] = decode_video(media["hevc.mkv"], list(range(offset, 75, 4)))

    threads = [threading.Thread(target=decode, args=(offset,)) for offset in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for offset, frames in results.items():
        np.testing.assert_array_equal(frames, references["hevc.mkv"].rgb[offset::4])


@pytest.mark.parametrize("workers", [(0, "auto"), (2, "thread"), (2, "process")],
                         ids=["direct", "threads", "processes"])
def test_clips_load_through_every_kind_of_worker(media, workers):
    num_workers, worker_type = workers
    path = media["h264_bframes.mp4"]
    expected = np.stack([Clips(path)[i] for i in range(8)])
    loader = DataLoader(Clips(path), batch_size=3, num_workers=num_workers,
                        worker_type=worker_type)
    position = 0
    for batch in loader:   # each batch dropped before the next, as training does
        assert batch.shape[1:] == (4, 48, 80, 3)
        np.testing.assert_array_equal(batch, expected[position:position + len(batch)])
        position += len(batch)
    assert position == 8


def test_a_truncated_file_raises_a_decode_error_naming_the_file(media, tmp_path, capfd):
    data = media["h264_bframes.mp4"].read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(ValueError, match=r"cannot decode .*cut\.mp4"):
        decode_video(cut)
    damaged = bytearray(media["offset.ts"].read_bytes())
    damaged[30000:36000] = bytes(6000)
    with pytest.raises(ValueError, match=r"cannot decode video <\d+ bytes>: .*frame \d+"):
        decode_video(bytes(damaged))
    assert capfd.readouterr().err == ""   # FFmpeg's log never reaches stderr


@pytest.mark.parametrize("data", [b"\x00" * 100, b"not a video at all", os.urandom(4096)])
def test_bytes_that_are_not_a_video_raise_value_error(data, capfd):
    with pytest.raises(ValueError, match="cannot decode"):
        decode_video(data)
    assert capfd.readouterr().err == ""


def test_bad_arguments_raise_errors_naming_them(media, tmp_path):
    path = media["h264_bframes.mp4"]
    with pytest.raises(IndexError, match="frame 75 is outside the video's 75 frames"):
        decode_video(path, [0, 75])
    with pytest.raises(IndexError, match="frame -1"):
        decode_video(path, [-1])
    with pytest.raises(ValueError, match="no frame is shown at 9 s"):
        decode_video(path, Timestamps([9.0]))
    with pytest.raises(ValueError, match="needs frame 78; the video has 75"):
        decode_video(path, Clip(5, start=2.8, stride=2))
    with pytest.raises(ValueError, match="crop"):
        decode_video(path, crop=(0, 0, 121, 10))
    with pytest.raises(ValueError, match="interpolation"):
        decode_video(path, interpolation="lanczos3")
    with pytest.raises(TypeError, match="frames must be"):
        decode_video(path, "0,1")
    with pytest.raises(ValueError, match="stride or fps"):
        Clip(4, stride=2, fps=5.0)
    with pytest.raises(ValueError, match="no video stream"):
        decode_video(media["tones.m4a"])
    with pytest.raises(FileNotFoundError):
        decode_video(tmp_path / "missing.mp4")
    with pytest.raises(IsADirectoryError):
        decode_video(tmp_path)
    with pytest.raises(ValueError, match="empty"):
        decode_video(b"")


def test_media_info_counts_frames_and_names_codecs(media, references):
    expected = {"h264_bframes.mp4": "h264", "hevc.mkv": "hevc", "vp9.webm": "vp9",
                "av1.mkv": "av1", "vfr.mkv": "h264", "offset.ts": "h264"}
    for name, codec in expected.items():
        video = next(s for s in kernels.media_info(media[name]) if s.kind == "video")
        times = references[name].times
        assert (video.codec, video.frames, video.width, video.height) == (
            codec, len(times), 208, 120)
        assert video.frame_rate == pytest.approx((len(times) - 1) / (times[-1] - times[0]))
    streams = kernels.media_info(media["h264_bframes.mp4"])
    assert [s.kind for s in streams] == ["video", "audio"]
    assert streams[0].frame_rate == pytest.approx(25.0)
    assert streams[1].sample_rate == 44100 and streams[1].channels == 2


def test_a_playlist_cannot_make_the_demuxer_read_another_file(media, tmp_path, capfd):
    # An HLS playlist naming a local file: FFmpeg (and PyAV) would open it; ours refuses.
    playlist = (f"#EXTM3U\n#EXT-X-TARGETDURATION:3\n#EXTINF:3.0,\n"
                f"file://{media['offset.ts']}\n#EXT-X-ENDLIST\n")
    path = tmp_path / "list.m3u8"
    path.write_text(playlist)
    with pytest.raises(ValueError, match="not a media file FFmpeg reads"):
        decode_video(path)
    with pytest.raises(ValueError, match="not a media file FFmpeg reads"):
        decode_video(playlist.encode())
    assert capfd.readouterr().err == ""


def test_without_ffmpeg_in_the_build_the_kernels_say_what_to_install(monkeypatch, media):
    import sys

    from dataloader.kernels import decode_audio, media_info

    monkeypatch.setitem(sys.modules, "dataloader._core.media", None)   # as if never built
    for call in (lambda: decode_video(media["hevc.mkv"]), lambda: decode_audio(media["tones.wav"]),
                 lambda: media_info(media["hevc.mkv"])):
        with pytest.raises(ImportError, match="apt-get install libavformat-dev"):
            call()


def test_a_file_rewritten_in_place_is_indexed_again(media, tmp_path):
    # The process keeps the frame indexes scanned, keyed by the file's identity.
    path = tmp_path / "video.mkv"
    path.write_bytes(media["hevc.mkv"].read_bytes())
    first = decode_video(path, [70], size=(24, 40))
    assert media_info(path)[0].frames == 75
    with path.open("r+b") as file:   # the same inode, another video
        file.truncate(0)
        file.write(media["vfr.mkv"].read_bytes())
    frames = media_info(path)[0].frames
    np.testing.assert_array_equal(decode_video(path, [frames - 1], size=(24, 40)),
                                  decode_video(media["vfr.mkv"], [frames - 1], size=(24, 40)))
    assert not np.array_equal(first, decode_video(path, [70], size=(24, 40)))


def test_clips_of_files_alike_in_turn_equal_pyavs(media, references, tmp_path):
    # Each thread keeps its last decoder for the next file of the same codec parameters:
    # a mirrored copy of a file is coded alike, so the two share it in turn.
    from dataloader._media.samples import encode

    mirrored = encode(["-i", str(media["h264_bframes.mp4"]), "-vf", "hflip", *X264,
                       "-an"], tmp_path / "mirrored.mp4")
    truth = {"h264_bframes.mp4": references["h264_bframes.mp4"], "mirrored": Reference(mirrored)}
    paths = {"h264_bframes.mp4": media["h264_bframes.mp4"], "mirrored": mirrored}
    for name, wanted in [("h264_bframes.mp4", [40, 41]), ("mirrored", [40, 41]),
                         ("h264_bframes.mp4", [7]), ("mirrored", [70, 3])]:
        np.testing.assert_array_equal(decode_video(paths[name], wanted), truth[name].rgb[wanted],
                                      err_msg=name)


def test_a_files_frame_index_is_scanned_once_for_every_thread_and_loader(media, tmp_path):
    # The process keeps the indexes scanned for every thread: a file opened again on
    # another thread, or by a later loader's new threads, is not read through again.
    from dataloader import ClipSampler, VideoFolder
    from dataloader._core.media import index_scans

    (tmp_path / "a").mkdir()
    path = tmp_path / "a" / "video.mp4"
    path.write_bytes(media["h264_bframes.mp4"].read_bytes())
    before = index_scans()
    expected = decode_video(path, [5, 40], size=(24, 40))
    assert index_scans() == before + 1
    decoded = []
    threads = [threading.Thread(target=lambda: decoded.append(
        decode_video(path, [5, 40], size=(24, 40)))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for clip in decoded:
        np.testing.assert_array_equal(clip, expected)
    folder = VideoFolder(tmp_path, ClipSampler(4, stride=3, clips_per_video=6), size=(24, 40))
    epochs = []
    for _ in range(2):   # a new loader each time: new worker threads
        loader = DataLoader(folder, batch_size=2, shuffle=True, seed=1, num_workers=2,
                            worker_type="thread")
        epochs.append([clips.copy() for clips, _ in loader])
        loader.close()
    for first, second in zip(*epochs, strict=True):
        np.testing.assert_array_equal(first, second)
    assert index_scans() == before + 1


def test_a_child_forked_while_threads_index_files_indexes_its_own(media, tmp_path):
    # Threads busy opening and indexing files when the process forks: the child
    # indexes and decodes a file of its own (the shared index table's lock is taken
    # around fork(), so no child inherits it held by a thread it does not have).
    copies = []
    for number in range(8):
        copies.append(tmp_path / f"copy{number}.mkv")
        copies[-1].write_bytes(media["hevc.mkv"].read_bytes())
    expected = decode_video(media["hevc.mkv"], [3], size=(24, 40))
    stop = threading.Event()

    def index_again():
        while not stop.is_set():
            for path in copies:
                os.utime(path)   # another identity: scanned and kept again
                decode_video(path, [3], size=(24, 40))

    threads = [threading.Thread(target=index_again) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                code = 3
                try:
                    fresh = tmp_path / f"child{os.getpid()}.mkv"
                    fresh.write_bytes(media["hevc.mkv"].read_bytes())
                    code = 0 if np.array_equal(decode_video(fresh, [3], size=(24, 40)),
                                               expected) else 4
                finally:
                    os._exit(code)
            assert exit_code(pid, seconds=60) == 0
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def exit_code(pid, seconds):
    """The exit code of child ``pid``, or ``None`` (and the child killed) if it is still
    running after ``seconds``: a child stuck on a lock it inherited held."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None
