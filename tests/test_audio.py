"""Audio decoding compared with PyAV's decode + resample, on files made by ffmpeg here."""

import numpy as np
import pytest

from dataloader import DataLoader
from dataloader.kernels import decode_audio

# PyAV, the reference (not installed beside a free-threaded build).
av = pytest.importorskip("av")

AUDIO_FILES = ["tones.m4a", "tones.ogg", "tones.wav", "h264_bframes.mp4"]
LAYOUTS = {1: "mono", 2: "stereo"}


def pyav_audio(path, sample_rate, channels):
    """PyAV's decode of the first audio stream through its resampler, flushed:
    float32 (channels, n), and the first frame's time in seconds."""
    resampler = av.AudioResampler(format="fltp", layout=LAYOUTS[channels], rate=sample_rate)
    chunks, times = [], []
    with av.open(str(path)) as container:
        for frame in container.decode(audio=0):
            times.append(frame.time)
            chunks += [out.to_ndarray() for out in resampler.resample(frame)]
    chunks += [out.to_ndarray() for out in resampler.resample(None)]
    return np.concatenate(chunks, axis=1), times[0]


@pytest.mark.parametrize("name", AUDIO_FILES)
@pytest.mark.parametrize(("sample_rate", "channels"), [(16000, 1), (44100, 2), (48000, 2)])
def test_samples_equal_pyavs_decode_and_resample(media, name, sample_rate, channels):
    ours = decode_audio(media[name], sample_rate=sample_rate, channels=channels)
    theirs, _ = pyav_audio(media[name], sample_rate, channels)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4)


@pytest.mark.parametrize("name", ["tones.m4a", "tones.ogg"])
def test_a_window_is_the_whole_streams_samples_at_those_times(media, name):
    whole, first_time = pyav_audio(media[name], 16000, 2)
    window = decode_audio(media[name], sample_rate=16000, start=0.75, end=2.25)
    begin = round((0.75 - first_time) * 16000)
    assert window.shape == (2, 24000)
    np.testing.assert_allclose(window, whole[:, begin:begin + 24000], rtol=0, atol=1e-4)
    # To the end of the stream.
    tail = decode_audio(media[name], sample_rate=16000, start=2.5)
    np.testing.assert_allclose(tail, whole[:, round((2.5 - first_time) * 16000):], atol=1e-4)


@pytest.mark.parametrize("name", ["chirps.m4a", "chirps.ogg", "chirps.mp3", "chirps.flac",
                                  "chirps.wav"])
@pytest.mark.parametrize(("sample_rate", "channels"), [(None, None), (16000, 1), (48000, 2)])
def test_a_window_reached_by_a_seek_is_the_whole_streams_samples_there(media, name,
                                                                       sample_rate, channels):
    options = {"sample_rate": sample_rate, "channels": channels}
    whole = decode_audio(media[name], **options)  # from the start
    rate = sample_rate or 44100
    _, first_time = pyav_audio(media[name], rate, channels or 2)
    for start, end in [(7.3, 9.1), (5.0, 6.0), (10.25, None)]:  # later than a seek pays
        window = decode_audio(media[name], start=start, end=end, **options)
        begin = round((start - first_time) * rate)
        stop = whole.shape[1] if end is None else begin + round((end - start) * rate)
        # A decoder restarted by a seek may round its first frames' overlap
        # otherwise (a few 1e-6 here); a sample off would be 1e-2 on these tones.
        np.testing.assert_allclose(window, whole[:, begin:stop], rtol=0, atol=1e-4)
    reference, _ = pyav_audio(media[name], rate, channels or 2)
    np.testing.assert_allclose(window, reference[:, begin:], rtol=0, atol=1e-4)
    in_memory = decode_audio(media[name].read_bytes(), start=start, **options)
    np.testing.assert_array_equal(in_memory, window)


def test_the_streams_own_rate_and_channels_by_default(media):
    samples = decode_audio(media["tones.wav"])
    assert samples.shape == (2, 3 * 44100)
    # The tones: 440 Hz at 0.5 on the left, 660 Hz at 0.3 on the right.
    t = np.arange(3 * 44100) / 44100
    np.testing.assert_allclose(samples[0], 0.5 * np.sin(2 * np.pi * 440 * t), atol=1e-4)
    np.testing.assert_allclose(samples[1], 0.3 * np.sin(2 * np.pi * 660 * t), atol=1e-4)


def test_bytes_decode_as_the_file_does(media):
    data = media["tones.ogg"].read_bytes()
    np.testing.assert_array_equal(decode_audio(data, sample_rate=8000),
                                  decode_audio(media["tones.ogg"], sample_rate=8000))


class Windows:
    """Window i of an audio file: 0.25 s from i / 4 s, at 16 kHz mono."""

    def __init__(self, path):
        self.path = path

    def __len__(self):
        return 10

    def __getitem__(self, index):
        return decode_audio(self.path, sample_rate=16000, channels=1, start=index / 4,
                            end=index / 4 + 0.25)


@pytest.mark.parametrize("workers", [(0, "auto"), (2, "thread"), (2, "process")],
                         ids=["direct", "threads", "processes"])
def test_windows_load_through_every_kind_of_worker(media, workers):
    num_workers, worker_type = workers
    dataset = Windows(media["tones.m4a"])
    expected = np.stack([dataset[i] for i in range(len(dataset))])
    loader = DataLoader(dataset, batch_size=4, num_workers=num_workers, worker_type=worker_type)
    position = 0
    for batch in loader:   # each batch dropped before the next, as training does
        np.testing.assert_array_equal(batch, expected[position:position + len(batch)])
        position += len(batch)
    assert position == len(dataset)


def test_bad_input_and_arguments_raise_clear_errors(media, capfd):
    with pytest.raises(ValueError, match="no audio stream"):
        decode_audio(media["hevc.mkv"])
    with pytest.raises(ValueError, match="end must be after start"):
        decode_audio(media["tones.wav"], start=1.0, end=1.0)
    with pytest.raises(ValueError, match="start must be >= 0"):
        decode_audio(media["tones.wav"], start=-1.0)
    with pytest.raises(ValueError, match="sample_rate"):
        decode_audio(media["tones.wav"], sample_rate=0)
    with pytest.raises(ValueError, match="channels"):
        decode_audio(media["tones.wav"], channels=65)
    with pytest.raises(TypeError, match="sample_rate must be an int"):
        decode_audio(media["tones.wav"], sample_rate=16000.0)
    # (PyAV raises InvalidDataError on the same bytes.)
    data = bytearray(media["tones.m4a"].read_bytes())
    data[10000:15000] = bytes(range(256)) * 19 + bytes(136)
    with pytest.raises(ValueError, match=r"cannot decode audio <\d+ bytes>: .* at byte \d+"):
        decode_audio(bytes(data))
    assert capfd.readouterr().err == ""   # FFmpeg's log never reaches stderr
