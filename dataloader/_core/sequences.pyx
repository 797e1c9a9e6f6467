"""Sequence kernels: variable-length items padded into a batch, documents packed into rows.

``pad_into`` copies each item of one field into its row of a preallocated
batch and pads the rest of the row with one value's bytes (on the right or
on the left), writing the attention mask in the same ``nogil`` pass;
``pad_runs_into`` does the same from a batch fetched as columns (one flat
array of values and each item's offsets in it), which ``list_lengths_into``
and ``gather_lists_into`` gather out of the groups' columns of lists
(``gather_items_into`` out of their columns of numbers), once
``locate_rows_into`` has found each row's group and its position there.
``order_into`` and ``bucket_window_into`` plan an epoch a window at a time:
they draw the window's items, sort them by length and cut them into batches
under a budget.
``assign_bins`` places documents into rows of a fixed capacity, first fit or
best fit, and ``pack_into`` copies them there with their positions and
segment ids. The Python layer (``dataloader._sequences``) checks every
argument; these functions trust what they are given.
"""
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc, qsort
from libc.string cimport memcpy, memset

from dataloader._core.shuffle cimport dl_shuffle_exact_steps

cnp.import_array()


# One 1-D source array: where its elements are, how many to copy, the bytes between them.
ctypedef struct dl_source_t:
    const char* data
    Py_ssize_t count
    Py_ssize_t stride


cdef void _fill(char* out, const char* pattern, Py_ssize_t itemsize,
                Py_ssize_t count) noexcept nogil:
    """Write ``count`` copies of the ``itemsize`` bytes at ``pattern`` from ``out`` on."""
    cdef Py_ssize_t total = count * itemsize
    cdef Py_ssize_t done = itemsize
    cdef Py_ssize_t byte
    if total == 0:
        return
    for byte in range(itemsize):
        if pattern[byte] != 0:
            break
    else:
        memset(out, 0, total)
        return
    memcpy(out, pattern, itemsize)
    # Doubling copies: log2(count) calls, each from the part already written.
    while done < total:
        memcpy(out + done, out, min(done, total - done))
        done += min(done, total - done)


cdef void _copy_source(char* out, const dl_source_t* source, Py_ssize_t itemsize) noexcept nogil:
    cdef Py_ssize_t j
    if source.stride == itemsize:
        memcpy(out, source.data, source.count * itemsize)
        return
    for j in range(source.count):
        memcpy(out + j * itemsize, source.data + j * source.stride, itemsize)


cdef void _pad_rows(char* out, Py_ssize_t width, Py_ssize_t itemsize,
                    const dl_source_t* sources, Py_ssize_t n, const char* pad, bint left,
                    int64_t* mask) noexcept nogil:
    """Row ``i`` of ``out`` (``width`` elements) holds source ``i``, padded with ``pad``."""
    cdef Py_ssize_t i, j, count, start
    cdef char* row
    cdef int64_t* mask_row
    for i in range(n):
        row = out + i * width * itemsize
        count = sources[i].count
        start = width - count if left else 0
        _copy_source(row + start * itemsize, &sources[i], itemsize)
        _fill(row + (0 if left else count) * itemsize, pad, itemsize, width - count)
        if mask != NULL:
            # Three runs of one value each, which the compiler turns into wide stores.
            mask_row = mask + i * width
            for j in range(start):
                mask_row[j] = 0
            for j in range(start, start + count):
                mask_row[j] = 1
            for j in range(start + count, width):
                mask_row[j] = 0


cdef dl_source_t* _runs(const char* values, Py_ssize_t itemsize, const int64_t[::1] offsets,
                        const int64_t[::1] counts) except NULL:
    """Item ``i``: ``counts[i]`` elements from element ``offsets[i]`` of ``values``
    (freed by the caller)."""
    cdef Py_ssize_t i, n = counts.shape[0]
    cdef dl_source_t* sources = <dl_source_t*> malloc(max(n, 1) * sizeof(dl_source_t))
    if sources == NULL:
        raise MemoryError()
    for i in range(n):
        sources[i].data = values + offsets[i] * itemsize
        sources[i].count = counts[i]
        sources[i].stride = itemsize
    return sources


cdef dl_source_t* _sources(list arrays, const int64_t[::1] counts) except NULL:
    """The arrays' data, ``counts[i]`` elements of array ``i`` (freed by the caller)."""
    cdef Py_ssize_t i, n = len(arrays)
    cdef cnp.ndarray array
    cdef dl_source_t* sources = <dl_source_t*> malloc(max(n, 1) * sizeof(dl_source_t))
    if sources == NULL:
        raise MemoryError()
    for i in range(n):
        array = arrays[i]
        sources[i].data = <const char*> cnp.PyArray_DATA(array)
        sources[i].count = counts[i]
        sources[i].stride = cnp.PyArray_STRIDE(array, 0)
    return sources


def pad_into(list arrays, cnp.ndarray out, const int64_t[::1] counts, bytes pad, bint left,
             mask=None):
    """Row ``i`` of ``out`` (C-contiguous, ``(n, width)``): the first ``counts[i]``
    elements of ``arrays[i]`` (1-D, ``out``'s dtype), the rest ``pad`` (one element's
    bytes); tokens last when ``left``. ``mask`` (int64 ``(n, width)``, optional): 1 where
    a row holds a token, else 0."""
    cdef int64_t[:, ::1] mask_view
    cdef int64_t* mask_data = NULL
    if mask is not None:
        mask_view = mask
        mask_data = &mask_view[0, 0] if mask_view.shape[0] * mask_view.shape[1] else NULL
    cdef char* out_data = <char*> cnp.PyArray_DATA(out)
    cdef Py_ssize_t width = cnp.PyArray_DIM(out, 1)
    cdef Py_ssize_t itemsize = cnp.PyArray_ITEMSIZE(out)
    cdef const char* pattern = pad
    cdef Py_ssize_t n = len(arrays)
    cdef dl_source_t* sources = _sources(arrays, counts)
    with nogil:
        _pad_rows(out_data, width, itemsize, sources, n, pattern, left, mask_data)
    free(sources)


def pad_runs_into(cnp.ndarray values, const int64_t[::1] offsets, cnp.ndarray out,
                  const int64_t[::1] counts, bytes pad, bint left, mask=None):
    """``pad_into`` with item ``i`` the elements of ``values`` (C-contiguous 1-D, ``out``'s
    dtype) from ``offsets[i]`` on (``offsets``: ``n + 1`` entries, ``counts[i]`` at most
    ``offsets[i + 1] - offsets[i]``)."""
    cdef int64_t[:, ::1] mask_view
    cdef int64_t* mask_data = NULL
    if mask is not None:
        mask_view = mask
        mask_data = &mask_view[0, 0] if mask_view.shape[0] * mask_view.shape[1] else NULL
    cdef char* out_data = <char*> cnp.PyArray_DATA(out)
    cdef Py_ssize_t width = cnp.PyArray_DIM(out, 1)
    cdef Py_ssize_t itemsize = cnp.PyArray_ITEMSIZE(out)
    cdef const char* pattern = pad
    cdef Py_ssize_t n = counts.shape[0]
    cdef dl_source_t* sources = _runs(<const char*> cnp.PyArray_DATA(values), itemsize,
                                      offsets, counts)
    with nogil:
        _pad_rows(out_data, width, itemsize, sources, n, pattern, left, mask_data)
    free(sources)


# One group's column of lists: its offsets (int32 or int64) and its values.
ctypedef struct dl_lists_t:
    const char* offsets
    bint wide
    const char* values


cdef inline int64_t _offset(const dl_lists_t* group, int64_t row) noexcept nogil:
    if group.wide:
        return (<const int64_t*> group.offsets)[row]
    return (<const int32_t*> group.offsets)[row]


cdef dl_lists_t* _groups(list offsets, list values) except NULL:
    """Each group's offsets and values (freed by the caller); ``values`` may be ``None``."""
    cdef Py_ssize_t g, n = len(offsets)
    cdef cnp.ndarray array
    cdef dl_lists_t* groups = <dl_lists_t*> malloc(max(n, 1) * sizeof(dl_lists_t))
    if groups == NULL:
        raise MemoryError()
    for g in range(n):
        array = offsets[g]
        groups[g].offsets = <const char*> cnp.PyArray_DATA(array)
        groups[g].wide = cnp.PyArray_ITEMSIZE(array) == 8
        groups[g].values = NULL
        if values is not None:
            array = values[g]
            groups[g].values = <const char*> cnp.PyArray_DATA(array)
    return groups


cdef int _compare_int64(const void* a, const void* b) noexcept nogil:
    cdef int64_t x = (<const int64_t*> a)[0], y = (<const int64_t*> b)[0]
    return (x > y) - (x < y)


cdef Py_ssize_t _upper_bound(const int64_t* sorted_values, Py_ssize_t n,
                             int64_t value) noexcept nogil:
    """The first position of ``sorted_values`` (ascending) holding more than ``value``."""
    cdef Py_ssize_t low = 0, high = n, middle
    while low < high:
        middle = (low + high) // 2
        if sorted_values[middle] <= value:
            low = middle + 1
        else:
            high = middle
    return low


def locate_rows_into(const int64_t[::1] ends, const int64_t[::1] wanted,  # IN
                     int64_t[::1] group_of, int64_t[::1] rows,  # OUT
                     int64_t[::1] touched):  # OUT
    """Where positions ``wanted`` (each in ``[0, ends[-1])``) lie among groups ending
    at ``ends`` (ascending cumulative row counts). ``touched`` gets the groups touched,
    ascending, and the count is returned; ``group_of[i]``: the index in ``touched`` of
    row ``i``'s group, ``rows[i]``: its position in that group. All arrays but ``ends``
    have ``len(wanted)`` entries.
    """
    cdef Py_ssize_t i, count, n = wanted.shape[0], groups = ends.shape[0]
    cdef int64_t number, lowest, highest
    if n == 0:
        return 0
    with nogil:
        lowest, highest = groups, 0
        for i in range(n):
            number = _upper_bound(&ends[0], groups, wanted[i])
            rows[i] = wanted[i] - (ends[number - 1] if number else 0)
            group_of[i] = number
            lowest, highest = min(lowest, number), max(highest, number)
    # The rows' group numbers deduplicated in O(n): by marking a span of numbers when it
    # is not much wider than the batch (a batch's rows spread over few groups, or many
    # groups over few rows each), else by sorting them.
    if highest - lowest < 4 * n:
        return _touched_by_marks(group_of, touched, lowest, highest - lowest + 1)
    with nogil:
        count = _touched_by_sorting(group_of, touched)
    return count


cdef Py_ssize_t _touched_by_marks(int64_t[::1] group_of, int64_t[::1] touched,
                                  int64_t lowest, Py_ssize_t span) except -1:
    """``locate_rows_into``'s last step, with group numbers within ``span`` of ``lowest``."""
    cdef Py_ssize_t i, count = 0, n = group_of.shape[0]
    cdef int64_t* index_of = <int64_t*> malloc(span * sizeof(int64_t))
    if index_of == NULL:
        raise MemoryError()
    with nogil:
        for i in range(span):
            index_of[i] = -1
        for i in range(n):
            index_of[group_of[i] - lowest] = 0
        for i in range(span):
            if index_of[i] == 0:
                index_of[i] = count
                touched[count] = lowest + i
                count += 1
        for i in range(n):
            group_of[i] = index_of[group_of[i] - lowest]
    free(index_of)
    return count


cdef Py_ssize_t _touched_by_sorting(int64_t[::1] group_of, int64_t[::1] touched) noexcept nogil:
    """``locate_rows_into``'s last step, for group numbers spread far apart."""
    cdef Py_ssize_t i, count = 0, n = group_of.shape[0]
    for i in range(n):
        touched[i] = group_of[i]
    qsort(&touched[0], n, sizeof(int64_t), _compare_int64)
    for i in range(n):
        if count == 0 or touched[i] != touched[count - 1]:
            touched[count] = touched[i]
            count += 1
    for i in range(n):
        group_of[i] = _upper_bound(&touched[0], count, group_of[i]) - 1
    return count


def list_lengths_into(list offsets, const int64_t[::1] group_of,  # IN
                      const int64_t[::1] rows, int64_t[::1] lengths):  # IN, OUT
    """``lengths[i]``: the length of row ``rows[i]`` of the lists of group ``group_of[i]``,
    whose offsets are ``offsets[group_of[i]]`` (contiguous int32 or int64)."""
    cdef Py_ssize_t i, n = rows.shape[0]
    cdef dl_lists_t* groups = _groups(offsets, None)
    cdef const dl_lists_t* group
    with nogil:
        for i in range(n):
            group = &groups[group_of[i]]
            lengths[i] = _offset(group, rows[i] + 1) - _offset(group, rows[i])
    free(groups)


def gather_lists_into(list offsets, list values, const int64_t[::1] group_of,  # IN
                      const int64_t[::1] rows, const int64_t[::1] targets,  # IN
                      cnp.ndarray out):  # OUT
    """Copy row ``rows[i]`` of the lists of group ``group_of[i]`` (``offsets`` and
    ``values`` of the group, contiguous, ``values`` of ``out``'s dtype) to ``out`` (1-D,
    C-contiguous) from element ``targets[i]`` on."""
    cdef Py_ssize_t i, n = rows.shape[0]
    cdef Py_ssize_t itemsize = cnp.PyArray_ITEMSIZE(out)
    cdef char* out_data = <char*> cnp.PyArray_DATA(out)
    cdef dl_lists_t* groups = _groups(offsets, values)
    cdef const dl_lists_t* group
    cdef int64_t start, stop
    with nogil:
        for i in range(n):
            group = &groups[group_of[i]]
            start = _offset(group, rows[i])
            stop = _offset(group, rows[i] + 1)
            if stop > start:
                memcpy(out_data + targets[i] * itemsize, group.values + start * itemsize,
                       (stop - start) * itemsize)
    free(groups)


def gather_items_into(list values, const int64_t[::1] group_of,  # IN
                      const int64_t[::1] rows, cnp.ndarray out):  # IN, OUT
    """``out[i]`` (1-D, C-contiguous): element ``rows[i]`` of ``values[group_of[i]]``
    (contiguous, ``out``'s dtype)."""
    cdef Py_ssize_t i, g, n = rows.shape[0]
    cdef Py_ssize_t itemsize = cnp.PyArray_ITEMSIZE(out)
    cdef char* out_data = <char*> cnp.PyArray_DATA(out)
    cdef Py_ssize_t count = len(values)
    cdef cnp.ndarray array
    cdef const char** data = <const char**> malloc(max(count, 1) * sizeof(char*))
    if data == NULL:
        raise MemoryError()
    for g in range(count):
        array = values[g]
        data[g] = <const char*> cnp.PyArray_DATA(array)
    with nogil:
        for i in range(n):
            memcpy(out_data + i * itemsize, data[group_of[i]] + rows[i] * itemsize, itemsize)
    free(data)


def assign_bins(const int64_t[::1] lengths, int64_t[::1] fill, Py_ssize_t open_bins,
                int64_t capacity, bint best_fit, int64_t[::1] bin_of):
    """Place each length (in the given order) in a bin of ``capacity``; return the bins used.

    ``fill`` holds the bins' contents, the first ``open_bins`` already in use,
    and has room for one more bin per length. Item ``i`` goes to
    ``bin_of[i]``: the first bin with room for it (``best_fit=False``), or
    the one it leaves least room in, the first of those (``best_fit=True``);
    a new bin when none has room. Every length is at most ``capacity``.
    """
    cdef Py_ssize_t i, b, chosen
    cdef Py_ssize_t used = open_bins
    cdef int64_t length, room, best_room
    with nogil:
        for i in range(lengths.shape[0]):
            length = lengths[i]
            chosen = used
            best_room = capacity + 1
            for b in range(used):
                room = capacity - fill[b] - length
                if room >= 0 and room < best_room:
                    chosen, best_room = b, room
                    if not best_fit or room == 0:
                        break
            if chosen == used:
                fill[used] = 0
                used += 1
            fill[chosen] += length
            bin_of[i] = chosen
    return used


def pack_into(list documents, const int64_t[::1] counts, const int64_t[::1] row_ends,
              cnp.ndarray tokens, int64_t[:, ::1] positions, int32_t[:, ::1] segments,
              bytes pad):
    """Row ``r`` of ``tokens`` (C-contiguous ``(rows, seq_len)``, the documents' dtype):
    documents ``row_ends[r - 1]`` to ``row_ends[r] - 1`` (``counts`` elements of each)
    one after the other, then ``pad``. ``positions``: each token's position in its
    document, 0 in the padding; ``segments``: 1 for the row's first document, 2 for
    its second..., 0 in the padding."""
    cdef char* out_data = <char*> cnp.PyArray_DATA(tokens)
    cdef Py_ssize_t seq_len = cnp.PyArray_DIM(tokens, 1)
    cdef Py_ssize_t itemsize = cnp.PyArray_ITEMSIZE(tokens)
    cdef Py_ssize_t rows = row_ends.shape[0]
    cdef const char* pattern = pad
    cdef Py_ssize_t r, d, j, first, used
    cdef int32_t segment
    cdef dl_source_t* sources = _sources(documents, counts)
    with nogil:
        first = 0
        for r in range(rows):
            used = 0
            segment = 0
            for d in range(first, row_ends[r]):
                segment += 1
                _copy_source(out_data + (r * seq_len + used) * itemsize, &sources[d], itemsize)
                for j in range(sources[d].count):
                    positions[r, used + j] = j
                    segments[r, used + j] = segment
                used += sources[d].count
            _fill(out_data + (r * seq_len + used) * itemsize, pattern, itemsize, seq_len - used)
            for j in range(used, seq_len):
                positions[r, j] = 0
                segments[r, j] = 0
            first = row_ends[r]
    free(sources)


cdef Py_ssize_t _cut(const int64_t* padded, Py_ssize_t n, int64_t batch_size,
                     int64_t max_tokens, int64_t offset, int64_t* ends) noexcept nogil:
    """Write to ``ends`` where each batch of ``padded`` (in order) ends, plus ``offset``:
    at most ``batch_size`` items whose count times their longest is at most
    ``max_tokens`` (an item alone always makes a batch). Returns the batches."""
    cdef Py_ssize_t i = 0, written = 0
    cdef int64_t items, longest, widened
    while i < n:
        items, longest = 0, 0
        while i < n:
            widened = max(longest, padded[i])
            if items and (items + 1 > batch_size or (items + 1) * widened > max_tokens):
                break
            items, longest = items + 1, widened
            i += 1
        ends[written] = offset + i
        written += 1
    return written


cdef void _radix_sort(int64_t* keys, int64_t* items, int64_t* spare_keys, int64_t* spare_items,
                      Py_ssize_t n, int key_bytes) noexcept nogil:
    """Sort ``items`` by ``keys`` (non-negative, below ``256 ** key_bytes``), stably, a
    byte at a time from the lowest; the spare arrays (``n`` entries) are scratch."""
    cdef Py_ssize_t counts[256]
    cdef Py_ssize_t j, total, bucket
    cdef int shift
    cdef int64_t* swap
    for shift in range(0, 8 * key_bytes, 8):
        memset(counts, 0, sizeof(counts))
        for j in range(n):
            counts[(keys[j] >> shift) & 255] += 1
        total = 0
        for bucket in range(256):
            total, counts[bucket] = total + counts[bucket], total
        for j in range(n):
            bucket = (keys[j] >> shift) & 255
            spare_keys[counts[bucket]] = keys[j]
            spare_items[counts[bucket]] = items[j]
            counts[bucket] += 1
        keys, spare_keys = spare_keys, keys
        items, spare_items = spare_items, items
    if key_bytes % 2:  # the sorted arrays are the spares: copy them back
        memcpy(spare_keys, keys, n * sizeof(int64_t))
        memcpy(spare_items, items, n * sizeof(int64_t))


cdef void _radix_sort_packed(int64_t* values, int64_t* spare, Py_ssize_t n,
                             int key_bytes) noexcept nogil:
    """Sort packed entries (``_packed``) by their key, stably, a byte at a time from
    the lowest; ``spare`` (``n`` entries) is scratch."""
    cdef Py_ssize_t counts[256]
    cdef Py_ssize_t j, total, bucket
    cdef int shift
    cdef int64_t* swap
    for shift in range(_PACK_SHIFT, _PACK_SHIFT + 8 * key_bytes, 8):
        memset(counts, 0, sizeof(counts))
        for j in range(n):
            counts[(<uint64_t> values[j] >> shift) & 255] += 1
        total = 0
        for bucket in range(256):
            total, counts[bucket] = total + counts[bucket], total
        for j in range(n):
            bucket = (<uint64_t> values[j] >> shift) & 255
            spare[counts[bucket]] = values[j]
            counts[bucket] += 1
        values, spare = spare, values
    if key_bytes % 2:  # the sorted entries are in the spare array: copy them back
        memcpy(spare, values, n * sizeof(int64_t))


# A packed entry holds an item's padded length above its index, so that the
# shuffle and the sorts move both at once and no window gathers lengths by
# index (a random read per item): indices below 2**40, lengths below 2**24.
cdef int _PACK_SHIFT = 40
cdef int64_t _INDEX_MASK = (<int64_t> 1 << 40) - 1
cdef int _PACKED_KEY_BYTES = 3
PACKED_KEY_BYTES = _PACKED_KEY_BYTES


cdef bint _packs(Py_ssize_t n, int key_bytes) noexcept nogil:
    return key_bytes <= _PACKED_KEY_BYTES and n <= _INDEX_MASK


cdef inline int64_t _entry(const int64_t[::1] padded, int64_t index, bint packed) noexcept nogil:
    return <int64_t> (<uint64_t> padded[index] << _PACK_SHIFT) | index if packed else index


def order_into(const int64_t[::1] padded, int key_bytes, int64_t[::1] order):  # IN; OUT
    """An epoch's entries before its shuffle: item ``i``'s index, packed above its
    padded length when ``key_bytes`` allows (``_PACK_SHIFT``)."""
    cdef Py_ssize_t n = padded.shape[0], i
    cdef bint packed = _packs(n, key_bytes)
    with nogil:
        for i in range(n):
            order[i] = <int64_t> (<uint64_t> padded[i] << _PACK_SHIFT) | i if packed else i


def bucket_window_into(const int64_t[::1] padded, int key_bytes,  # IN
                       uint64_t[::1] state, int64_t[::1] order,  # IN/OUT (or None); IN/OUT
                       Py_ssize_t start, Py_ssize_t size,  # IN
                       int64_t batch_size, int64_t max_tokens,  # IN
                       int64_t[::1] scratch, int64_t[::1] ends):  # SCRATCH; OUT
    """Plan the window ``order[start:start + size]`` of an epoch (entries from
    ``order_into``, windows planned first to last). With a ``state``, draw its
    items first: the shuffle's steps ``start`` to ``start + size``
    (``dl_shuffle_exact_steps``), which advance ``state``. Then sort the window
    by padded length (below ``256 ** key_bytes``), stably, leave item indices in
    it, and cut it into batches as ``_cut`` does. ``ends`` (room for ``size``)
    gets each batch's end in ``order``; returns how many batches. ``scratch``
    holds at least ``3 * size`` entries."""
    cdef Py_ssize_t n = padded.shape[0], i, count
    cdef bint packed = _packs(n, key_bytes)
    cdef int64_t* window
    cdef int64_t* keys
    if size == 0:
        return 0
    window, keys = &order[start], &scratch[0]
    with nogil:
        if state is not None:
            dl_shuffle_exact_steps(&order[0], n, start, start + size, &state[0])
        if packed:
            _radix_sort_packed(window, keys + size, size, key_bytes)
            for i in range(size):
                keys[i] = <int64_t> (<uint64_t> window[i] >> _PACK_SHIFT)
                window[i] &= _INDEX_MASK
        else:
            for i in range(size):
                keys[i] = padded[window[i]]
            _radix_sort(keys, window, keys + size, keys + 2 * size, size, key_bytes)
        count = _cut(keys, size, batch_size, max_tokens, start, &ends[0])
    return count
