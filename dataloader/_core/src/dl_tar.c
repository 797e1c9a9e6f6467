/* The tar member reader of dl_tar.h. */
/* posix_fadvise: a POSIX interface, hidden by a strict C11 build without this. */
#define _POSIX_C_SOURCE 200809L
#include "dl_tar.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* Numbers that do not fit an int64_t are malformed (8 EiB members do not exist). */
#define MAX_DIGITS 18
/* Member data left to read past this size is read straight into the
 * member's memory, with at most LOOKAHEAD_BYTES after it into the buffer. */
#define DIRECT_BYTES (16 * 1024)
#define LOOKAHEAD_BYTES (8 * 1024)
/* Read after such a member beyond the span seen before it, for padding and
 * small members that differ in length from sample to sample. */
#define LOOKAHEAD_SLACK (2 * DL_TAR_BLOCK)

static int fail(dl_tar_t *tar, int64_t offset, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(tar->reason, sizeof tar->reason, format, args);
    va_end(args);
    tar->error_offset = offset;
    return DL_TAR_ERROR;
}

int dl_tar_init(dl_tar_t *tar, int fd, int64_t offset, size_t block)
{
    memset(tar, 0, sizeof *tar);
    tar->fd = fd;
    tar->offset = offset;
    tar->cap = block < 4 * DL_TAR_BLOCK ? 4 * DL_TAR_BLOCK : block;
    tar->buf = malloc(tar->cap);
    tar->name_cap = 256;
    tar->lookahead = LOOKAHEAD_BYTES;
    tar->direct_end = -1;
    tar->max_member = -1;
    tar->max_meta = DL_TAR_MAX_META;
    tar->name = malloc(tar->name_cap);
    if (tar->buf == NULL || tar->name == NULL) {
        dl_tar_free(tar);
        return DL_TAR_NOMEM;
    }
    /* Read front to back, as cat does: a larger readahead window from disk.
     * Only advice (a pipe or socket refuses it), so its result is ignored. */
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return 0;
}

void dl_tar_free(dl_tar_t *tar)
{
    free(tar->buf);
    free(tar->name);
    tar->buf = NULL;
    tar->name = NULL;
    tar->cap = tar->len = tar->pos = 0;
}

static size_t available(const dl_tar_t *tar) { return tar->len - tar->pos; }

static void consume(dl_tar_t *tar, size_t n)
{
    tar->pos += n;
    tar->offset += (int64_t)n;
}

static int read_some(dl_tar_t *tar, unsigned char *dst, size_t n, size_t *got)
{
    for (;;) {
        ssize_t r = read(tar->fd, dst, n);
        if (r >= 0) {
            *got = (size_t)r;
            if (r == 0)
                tar->eof = 1;
            return 0;
        }
        if (errno != EINTR) {
            tar->errno_value = errno;
            return DL_TAR_IO;
        }
    }
}

/* Read up to n bytes into dst and then up to tar->lookahead into the
 * buffer, which is empty (all of it was copied out before). */
static int read_into(dl_tar_t *tar, unsigned char *dst, size_t n, size_t *got)
{
    struct iovec parts[2] = {
        {dst, n},
        {tar->buf, tar->cap < tar->lookahead ? tar->cap : tar->lookahead},
    };
    tar->pos = tar->len = 0;
    for (;;) {
        ssize_t r = readv(tar->fd, parts, 2);
        if (r >= 0) {
            *got = (size_t)r;
            if (r == 0)
                tar->eof = 1;
            if ((size_t)r > n)
                tar->len = (size_t)r - n;
            return 0;
        }
        if (errno != EINTR) {
            tar->errno_value = errno;
            return DL_TAR_IO;
        }
    }
}

/* Make available() >= need unless the stream ends first. buf may move:
 * callers hold positions relative to pos. */
static int ensure(dl_tar_t *tar, size_t need, int may_read)
{
    if (available(tar) >= need || tar->eof)
        return 0;
    if (!may_read)
        return DL_TAR_AGAIN;
    if (tar->pos + need > tar->cap) {
        size_t kept = available(tar);
        memmove(tar->buf, tar->buf + tar->pos, kept);
        tar->pos = 0;
        tar->len = kept;
        if (need > tar->cap) {
            unsigned char *grown = realloc(tar->buf, need);
            if (grown == NULL)
                return DL_TAR_NOMEM;
            tar->buf = grown;
            tar->cap = need;
        }
    }
    while (available(tar) < need && !tar->eof) {
        /* Large members are read straight into their memory (dl_tar_data):
         * between them, read no more than the headers and small members
         * that probably come next, rather than copy a block of data twice. */
        size_t room = tar->cap - tar->len, want = need - available(tar);
        if (tar->large && room > want && room > LOOKAHEAD_BYTES)
            room = want > LOOKAHEAD_BYTES ? want : LOOKAHEAD_BYTES;
        size_t got;
        int status = read_some(tar, tar->buf + tar->len, room, &got);
        if (status != 0)
            return status;
        tar->len += got;
    }
    return 0;
}

/* A numeric header field: octal text (NUL- or space-terminated, spaces
 * around it allowed, empty meaning 0) or GNU base-256 (high bit set). */
static int number(dl_tar_t *tar, const unsigned char *field, size_t n, int64_t at,
                  const char *what, int64_t *value)
{
    uint64_t v = 0;
    if (field[0] & 0x80) {
        if (field[0] & 0x40)
            return fail(tar, at, "negative %s in header", what);
        for (size_t i = 1; i < n; i++) {
            if (v >> 55)
                return fail(tar, at, "%s too large in header", what);
            v = (v << 8) | field[i];
        }
        if (v >> 63)
            return fail(tar, at, "%s too large in header", what);
        *value = (int64_t)v;
        return 0;
    }
    size_t end = 0;
    while (end < n && field[end] != 0)
        end++;
    size_t begin = 0;
    while (begin < end && field[begin] == ' ')
        begin++;
    while (end > begin && field[end - 1] == ' ')
        end--;
    for (size_t i = begin; i < end; i++) {
        if (field[i] < '0' || field[i] > '7')
            return fail(tar, at, "malformed %s field in header", what);
        v = v * 8 + (uint64_t)(field[i] - '0');
    }
    *value = (int64_t)v;
    return 0;
}

static int checksum_ok(const unsigned char *header, int64_t stored)
{
    /* The sum of all bytes with the checksum field counted as spaces; some
     * old writers summed signed chars, which tarfile accepts too. */
    /* At most 512 * 255: 32-bit sums, which vectorise without widening twice. */
    uint32_t unsigned_sum = 8 * 32, high = 0;
    for (int i = 0; i < 148; i++) {
        unsigned_sum += header[i];
        high += header[i] >> 7;
    }
    for (int i = 156; i < DL_TAR_BLOCK; i++) {
        unsigned_sum += header[i];
        high += header[i] >> 7;
    }
    return stored == (int64_t)unsigned_sum || stored == (int64_t)unsigned_sum - 256 * (int64_t)high;
}

static int set_name(dl_tar_t *tar, const unsigned char *head, size_t head_len,
                    const unsigned char *tail, size_t tail_len)
{
    size_t n = head_len + (head ? 1 : 0) + tail_len;
    if (n + 1 > tar->name_cap) {
        char *grown = realloc(tar->name, n + 1);
        if (grown == NULL)
            return DL_TAR_NOMEM;
        tar->name = grown;
        tar->name_cap = n + 1;
    }
    size_t at = 0;
    if (head) {
        memcpy(tar->name, head, head_len);
        tar->name[head_len] = '/';
        at = head_len + 1;
    }
    memcpy(tar->name + at, tail, tail_len);
    tar->name[n] = 0;
    tar->name_len = n;
    return 0;
}

static size_t text_length(const unsigned char *field, size_t n)
{
    const unsigned char *nul = memchr(field, 0, n);
    return nul ? (size_t)(nul - field) : n;
}

/* The pending metadata of the member being assembled: offsets into buf
 * relative to pos (the buffer may move while the member's headers are read). */
typedef struct {
    int has_long_name, has_path, has_size;
    size_t long_name, long_name_len, path, path_len;
    int64_t size;
    size_t chain;  /* where the member's first header starts, relative to pos */
} meta_t;

static int digits(const unsigned char *text, size_t n, int64_t *value)
{
    if (n == 0 || n > MAX_DIGITS)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (text[i] < '0' || text[i] > '9')
            return -1;
        v = v * 10 + (text[i] - '0');
    }
    *value = v;
    return 0;
}

/* The records "<length> <key>=<value>\n" of a pax header at buf[pos + at]. */
static int pax(dl_tar_t *tar, size_t at, size_t n, int64_t header_at, meta_t *meta)
{
    const unsigned char *data = tar->buf + tar->pos + at;
    size_t position = 0;
    meta->has_path = meta->has_size = 0;
    while (position < n && data[position] != 0) {
        const unsigned char *space = memchr(data + position, ' ', n - position);
        int64_t length;
        if (space == NULL || digits(data + position, (size_t)(space - data) - position, &length)
            || length <= 0 || (uint64_t)length > n - position)
            return fail(tar, header_at, "malformed pax record");
        size_t record = (size_t)(space - data) + 1, end = position + (size_t)length;
        if (record >= end || data[end - 1] != '\n')
            return fail(tar, header_at, "malformed pax record");
        const unsigned char *equals = memchr(data + record, '=', end - 1 - record);
        if (equals == NULL)
            return fail(tar, header_at, "malformed pax record");
        size_t key_len = (size_t)(equals - data) - record;
        size_t value = (size_t)(equals - data) + 1;
        if (key_len == 4 && memcmp(data + record, "path", 4) == 0) {
            meta->has_path = 1;
            meta->path = at + value;
            meta->path_len = end - 1 - value;
        } else if (key_len == 4 && memcmp(data + record, "size", 4) == 0) {
            /* Checked where it applies, as the header it overrides is. */
            meta->has_size = 1;
            if (digits(data + value, end - 1 - value, &meta->size))
                meta->size = -1;
        }
        position = end;
    }
    return 0;
}

static int is_zero(const unsigned char *block)
{
    static const unsigned char zeros[DL_TAR_BLOCK];
    return block[0] == 0 && memcmp(block, zeros, DL_TAR_BLOCK) == 0;
}

static int skip_data(dl_tar_t *tar, int may_read)
{
    while (tar->skip_data > 0) {
        if (available(tar) == 0) {
            if (tar->eof)
                return fail(tar, tar->skip_header, "truncated: %lld of %lld bytes",
                            (long long)(tar->skip_data_size - tar->skip_data),
                            (long long)tar->skip_data_size);
            int status = ensure(tar, 1, may_read);
            if (status != 0)
                return status;
            continue;
        }
        size_t n = available(tar);
        if ((int64_t)n > tar->skip_data)
            n = (size_t)tar->skip_data;
        consume(tar, n);
        tar->skip_data -= (int64_t)n;
    }
    return 0;
}

/* One header, and a meta header's data, at buf[pos + *q]. Returns
 * DL_TAR_MEMBER for a regular member or any other member (*regular says
 * which), 2 after a meta header, or DL_TAR_END / an error. */
static int header(dl_tar_t *tar, size_t *q, meta_t *meta, int may_read, int *regular)
{
    int64_t at = tar->offset + (int64_t)*q;
    int status = ensure(tar, *q + DL_TAR_BLOCK, may_read);
    if (status != 0)
        return status;
    size_t have = available(tar) - *q;
    const unsigned char *h = tar->buf + tar->pos + *q;
    if (have == 0 || (have >= DL_TAR_BLOCK && is_zero(h)))
        return DL_TAR_END;
    if (have < DL_TAR_BLOCK)
        return fail(tar, at, "truncated: %zu of %d header bytes", have, DL_TAR_BLOCK);
    int64_t stored = 0, size = 0;
    if (number(tar, h + 148, 8, at, "checksum", &stored))
        return DL_TAR_ERROR;
    if (!checksum_ok(h, stored))
        return fail(tar, at, "bad header checksum");
    if (number(tar, h + 124, 12, at, "size", &size))
        return DL_TAR_ERROR;
    if (meta->has_size) {
        if (meta->size < 0)
            return fail(tar, at, "malformed pax size");
        size = meta->size;
    }
    unsigned char kind = h[156];
    int64_t pad = (DL_TAR_BLOCK - size % DL_TAR_BLOCK) % DL_TAR_BLOCK;
    if (kind == 'L' || kind == 'x' || kind == 'g') {
        if (size > tar->max_meta)
            return fail(tar, at, "a %c header of %lld bytes, more than max_header_bytes=%lld",
                        kind, (long long)size, (long long)tar->max_meta);
        /* The headers before one member, this one's data and padding included:
         * checked before the buffer grows to hold them. */
        if ((int64_t)(*q - meta->chain) + DL_TAR_BLOCK + size + pad > tar->max_meta)
            return fail(tar, at, "metadata headers of more than max_header_bytes=%lld bytes "
                        "before one member", (long long)tar->max_meta);
        size_t data = *q + DL_TAR_BLOCK;
        status = ensure(tar, data + (size_t)size + (size_t)pad + DL_TAR_BLOCK, may_read);
        if (status != 0)
            return status;
        if (available(tar) - data < (size_t)size)
            return fail(tar, at, "truncated: %zu of %lld bytes", available(tar) - data,
                        (long long)size);
        h = tar->buf + tar->pos + *q;
        if (kind == 'L') {
            meta->has_long_name = 1;
            meta->long_name = data;
            meta->long_name_len = text_length(tar->buf + tar->pos + data, (size_t)size);
        } else if (kind == 'x' && pax(tar, data, (size_t)size, at, meta)) {
            return DL_TAR_ERROR;
        }
        *q = data + (size_t)size;
        if (available(tar) - *q < (size_t)pad)
            return fail(tar, tar->offset + (int64_t)*q, "truncated: %zu of %lld padding bytes",
                        available(tar) - *q, (long long)pad);
        *q += (size_t)pad;
        return 2;
    }
    *regular = kind == '0' || kind == 0 || kind == '7';
    if (*regular && tar->max_member >= 0 && size > tar->max_member)
        return fail(tar, at, "a member of %lld bytes, more than max_member_bytes=%lld",
                    (long long)size, (long long)tar->max_member);
    if (*regular) {
        const unsigned char *base = tar->buf + tar->pos;
        if (meta->has_path && meta->path_len > 0)
            status = set_name(tar, NULL, 0, base + meta->path, meta->path_len);
        else if (meta->has_long_name)
            status = set_name(tar, NULL, 0, base + meta->long_name, meta->long_name_len);
        else if (memcmp(h + 257, "ustar\0", 6) == 0 && h[345])
            status = set_name(tar, h + 345, text_length(h + 345, 155), h, text_length(h, 100));
        else
            status = set_name(tar, NULL, 0, h, text_length(h, 100));
        if (status != 0)
            return status;
    }
    tar->size = size;
    tar->header_offset = at;
    *q += DL_TAR_BLOCK;
    return DL_TAR_MEMBER;
}

int dl_tar_next(dl_tar_t *tar, int may_read)
{
    if (tar->ended)
        return DL_TAR_END;
    if (tar->data_pending) {  /* the member's data was not taken: pass over it */
        tar->data_pending = 0;
        tar->skip_data = tar->skip_data_size = tar->size;
        tar->skip_header = tar->header_offset;
        tar->skip_pad = (DL_TAR_BLOCK - tar->size % DL_TAR_BLOCK) % DL_TAR_BLOCK;
    }
    for (;;) {
        int status = skip_data(tar, may_read);
        if (status != 0)
            return status;
        /* Padding and the member's headers are consumed together, once all
         * are read, so that DL_TAR_AGAIN leaves the reader as it was. */
        size_t pad = (size_t)tar->skip_pad;
        status = ensure(tar, pad + DL_TAR_BLOCK, may_read);
        if (status != 0)
            return status;
        if (available(tar) < pad)
            return fail(tar, tar->offset, "truncated: %zu of %zu padding bytes",
                        available(tar), pad);
        size_t q = pad;
        int64_t start = tar->offset + (int64_t)q;
        meta_t meta = {0};
        meta.chain = q;
        int regular = 0;
        while ((status = header(tar, &q, &meta, may_read, &regular)) == 2) {
        }
        if (status == DL_TAR_END) {
            tar->ended = 1;
            return DL_TAR_END;
        }
        if (status != DL_TAR_MEMBER)
            return status;
        consume(tar, q);
        tar->skip_pad = 0;
        if (regular) {
            tar->start = start;
            tar->data_pending = 1;
            return DL_TAR_MEMBER;
        }
        /* A directory, link or device: its data (if any) and padding are passed over. */
        tar->skip_data = tar->skip_data_size = tar->size;
        tar->skip_header = tar->header_offset;
        tar->skip_pad = (DL_TAR_BLOCK - tar->size % DL_TAR_BLOCK) % DL_TAR_BLOCK;
    }
}

int64_t dl_tar_remaining(const dl_tar_t *tar)
{
    struct stat st;
    if (fstat(tar->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    return (int64_t)st.st_size - tar->offset;
}

int64_t dl_tar_buffered(const dl_tar_t *tar)
{
    int64_t n = (int64_t)available(tar);
    return n < tar->size ? n : tar->size;
}

int dl_tar_data(dl_tar_t *tar, unsigned char *dst)
{
    int64_t size = tar->size, got = dl_tar_buffered(tar), data_start = tar->offset;
    memcpy(dst, tar->buf + tar->pos, (size_t)got);
    consume(tar, (size_t)got);
    while (got < size) {
        int64_t rest = size - got;
        if (tar->eof)
            return fail(tar, tar->header_offset, "truncated: %lld of %lld bytes",
                        (long long)got, (long long)size);
        if (rest < DIRECT_BYTES) {
            /* The tail through the buffer, and in the same read what follows it
             * (the next headers and small members). */
            size_t want = (size_t)rest + LOOKAHEAD_BYTES;
            if (want > tar->cap)
                want = tar->cap > (size_t)rest ? tar->cap : (size_t)rest;
            int status = ensure(tar, want, 1);
            if (status != 0)
                return status;
            size_t n = available(tar) < (size_t)rest ? available(tar) : (size_t)rest;
            memcpy(dst + got, tar->buf + tar->pos, n);
            consume(tar, n);
            got += (int64_t)n;
        } else {
            /* The rest straight into dst, and what follows it (the next
             * headers and small members) into the emptied buffer, in one
             * call: the member's bytes are copied once, as cat copies them.
             * Shards repeat a layout, so what follows is about as long as
             * what came between the last large member and this one: no more
             * of the next member is read than that, as the buffer's bytes
             * are copied twice. */
            if (tar->direct_end >= 0) {
                int64_t gap = data_start - tar->direct_end + LOOKAHEAD_SLACK;
                tar->lookahead = gap < LOOKAHEAD_BYTES ? (size_t)gap : LOOKAHEAD_BYTES;
            }
            size_t n;
            int status = read_into(tar, dst + got, (size_t)rest, &n);
            if (status != 0)
                return status;
            size_t mine = n < (size_t)rest ? n : (size_t)rest;
            tar->offset += (int64_t)mine;
            got += (int64_t)mine;
        }
    }
    tar->data_pending = 0;
    tar->skip_pad = (DL_TAR_BLOCK - size % DL_TAR_BLOCK) % DL_TAR_BLOCK;
    if (size >= DIRECT_BYTES) {
        tar->large = 1;
        tar->direct_end = data_start + size;
    } else if (size > LOOKAHEAD_BYTES) {
        tar->large = 0;
    }
    return 0;
}
