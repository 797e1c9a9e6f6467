"""Video and audio on FFmpeg's libraries (``src/dl_media.h``), without the GIL.

``MediaFile`` opens a file or bytes through the library's own I/O and
keeps the demuxer between calls: ``frame_pts`` scans a video stream's
frames, ``decode_frames_into`` decodes chosen ones into a caller's array
and ``decode_audio`` resamples an audio stream. A ``MediaFile`` is used by
one thread at a time (each call of ``dataloader.kernels`` opens its own).
Argument checks live in ``dataloader._media``; this module only turns
statuses into exceptions (``_raise``).
"""
cimport numpy as cnp
from libc.stdint cimport int64_t
from libc.stdlib cimport free
from libc.string cimport memcpy

from dataloader._core._typedefs cimport float32_t, uint8_t
from dataloader._core.codecs cimport DL_ERR_NOMEM, DL_OK

import os

import numpy as np

cnp.import_array()


cdef extern from "dl_media.h" nogil:
    int DL_MSG_LEN
    int DL_ERR_OS
    int DL_VIDEO_FILTER_COUNT
    int DL_STREAM_OTHER, DL_STREAM_VIDEO, DL_STREAM_AUDIO
    ctypedef struct dl_media_t:
        pass
    ctypedef struct dl_stream_info_t:
        int kind
        char codec[32]
        double duration
        double frame_rate
        int64_t time_base_num, time_base_den
        int width, height
        int sample_rate, channels
    ctypedef struct dl_video_output_t:
        int crop_top, crop_left, crop_height, crop_width
        int height, width
        int filter
        int threads
    ctypedef struct dl_audio_output_t:
        int sample_rate, channels
        double start, end
    void dl_media_init()
    const char* dl_video_filter_name(int filter)
    int dl_media_open_memory(const uint8_t* data, size_t size, int probe_streams,
                             dl_media_t** media, char* msg)
    int dl_media_open_file(const char* path, int probe_streams, dl_media_t** media,
                           int* os_error, char* msg)
    void dl_media_close(dl_media_t* media)
    int dl_media_stream_count(const dl_media_t* media)
    void dl_media_stream_info(const dl_media_t* media, int stream, dl_stream_info_t* info)
    int dl_media_best_stream(const dl_media_t* media, int kind)
    int dl_video_scan(dl_media_t* media, int stream, char* msg)
    const int64_t* dl_video_frame_pts(const dl_media_t* media, int64_t* count)
    int64_t dl_video_index_scans()
    int dl_video_decode(dl_media_t* media, const int64_t* frames, int64_t count,
                        const dl_video_output_t* output, uint8_t* dst, char* msg)
    int dl_audio_decode(dl_media_t* media, int stream, const dl_audio_output_t* output,
                        float** samples, int64_t* count, char* msg)


dl_media_init()

# The resampling filters of a resize at decode, by name (DL_VIDEO_FILTERS).
FILTERS = {dl_video_filter_name(code).decode(): code for code in range(DL_VIDEO_FILTER_COUNT)}
_KINDS = {DL_STREAM_VIDEO: "video", DL_STREAM_AUDIO: "audio", DL_STREAM_OTHER: "other"}
_KIND_CODES = {"video": DL_STREAM_VIDEO, "audio": DL_STREAM_AUDIO}


def index_scans():
    """How many video streams this process has scanned for their frame index: files
    opened when no thread had kept that file's index (``src/dl_media.c``)."""
    return dl_video_index_scans()


cdef int _raise(int status, const char* msg, str name, str what, int os_error=0) except -1:
    """The one place a media status becomes an exception: ``MemoryError``,
    ``OSError`` (the file could not be read), else ``ValueError`` naming the file."""
    text = msg.decode("utf-8", "replace")
    if status == DL_ERR_NOMEM:
        raise MemoryError(f"{name}: {text}")
    if status == DL_ERR_OS:
        raise OSError(os_error, os.strerror(os_error), name)
    raise ValueError(f"cannot decode {what} {name}: {text}")


cdef class MediaFile:
    """An open video or audio file (a path, or bytes-like data)."""
    cdef dl_media_t* media
    cdef const uint8_t[::1] data    # the bytes the demuxer reads, kept alive
    cdef readonly str name          # the file's name in messages

    def __cinit__(self, source, str name, bint probe_streams=False):
        cdef char msg[256]
        cdef int status, os_error = 0
        cdef bytes path
        cdef const char* c_path
        msg[0] = 0
        self.name = name
        if isinstance(source, (str, os.PathLike)):
            path = os.fsencode(source)
            c_path = path
            with nogil:
                status = dl_media_open_file(c_path, probe_streams, &self.media, &os_error, msg)
        else:
            self.data = source
            with nogil:
                status = dl_media_open_memory(&self.data[0], self.data.shape[0], probe_streams,
                                              &self.media, msg)
        if status != DL_OK:
            _raise(status, msg, name, "media", os_error)

    def __dealloc__(self):
        self.close()

    def close(self):
        """Release the demuxer and the file; the object is unusable after."""
        dl_media_close(self.media)
        self.media = NULL

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    cdef dl_media_t* _open(self) except NULL:
        if self.media == NULL:
            raise ValueError(f"{self.name} is closed")
        return self.media

    def streams(self):
        """Each stream's facts, as a dict (``kind``, ``codec``, ``duration``, ...)."""
        cdef dl_media_t* media = self._open()
        cdef dl_stream_info_t info
        found = []
        for index in range(dl_media_stream_count(media)):
            dl_media_stream_info(media, index, &info)
            found.append({
                "index": index, "kind": _KINDS[info.kind], "codec": info.codec.decode(),
                "duration": info.duration if info.duration >= 0 else None,
                "frame_rate": info.frame_rate or None,
                "time_base": (info.time_base_num, info.time_base_den),
                "width": info.width, "height": info.height,
                "sample_rate": info.sample_rate, "channels": info.channels,
            })
        return found

    def best_stream(self, str kind):
        """The stream FFmpeg prefers of ``kind`` ("video" or "audio"), or -1."""
        return dl_media_best_stream(self._open(), _KIND_CODES[kind])

    def frame_pts(self, int stream):
        """Scan a video stream's packets: its frames' timestamps (int64, in the
        stream's time base, ascending)."""
        cdef dl_media_t* media = self._open()
        cdef char msg[256]
        cdef int status
        cdef int64_t count
        cdef const int64_t* pts
        msg[0] = 0
        with nogil:
            status = dl_video_scan(media, stream, msg)
        if status != DL_OK:
            _raise(status, msg, self.name, "video")
        pts = dl_video_frame_pts(media, &count)
        result = np.empty(count, np.int64)
        cdef int64_t[::1] view = result
        if count:
            memcpy(&view[0], pts, count * sizeof(int64_t))
        return result

    def decode_frames_into(self, const int64_t[::1] frames,  # IN: scanned frames, ascending
                           uint8_t[:, :, :, ::1] out,          # OUT: (T, H, W, 3)
                           crop, int filter, int threads):
        """Decode the scanned frames ``frames`` of the last scanned stream into
        ``out``, each cropped to ``crop`` (top, left, height, width) first."""
        cdef dl_media_t* media = self._open()
        cdef dl_video_output_t output
        cdef char msg[256]
        cdef int status
        msg[0] = 0
        output.crop_top, output.crop_left, output.crop_height, output.crop_width = crop
        output.height, output.width = out.shape[1], out.shape[2]
        output.filter = filter
        output.threads = threads
        if frames.shape[0] == 0:
            return
        with nogil:
            status = dl_video_decode(media, &frames[0], frames.shape[0], &output, &out[0, 0, 0, 0],
                                     msg)
        if status != DL_OK:
            _raise(status, msg, self.name, "video")

    def decode_audio(self, int stream, int sample_rate, int channels, double start, double end):
        """Samples of the window [start, end) seconds (end < 0: to the end) of an
        audio stream, resampled: float32 ``(channels, n)``."""
        cdef dl_media_t* media = self._open()
        cdef dl_audio_output_t output
        cdef char msg[256]
        cdef int status
        cdef float* samples = NULL
        cdef int64_t count = 0
        msg[0] = 0
        output.sample_rate, output.channels, output.start, output.end = (
            sample_rate, channels, start, end)
        with nogil:
            status = dl_audio_decode(media, stream, &output, &samples, &count, msg)
        if status != DL_OK:
            _raise(status, msg, self.name, "audio")
        interleaved = np.empty((count, channels), np.float32)
        cdef float32_t[:, ::1] view = interleaved
        try:
            if count:
                memcpy(&view[0, 0], samples, count * channels * sizeof(float))
        finally:
            free(samples)
        return np.ascontiguousarray(interleaved.T)
