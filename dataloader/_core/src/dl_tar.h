/* A streaming tar member reader over a file descriptor, without Python.
 *
 * The reader reads the descriptor front to back in large blocks into one
 * buffer and never seeks, parsing the headers that tar and Python's tarfile
 * write: v7, POSIX ustar (the prefix field), GNU (long names 'L', base-256
 * numbers) and pax ('x' extended headers: path and size; 'g' global
 * headers are read and ignored). Every header's checksum is verified.
 * dl_tar_next stops at each regular file member with its name, size and
 * offsets; dl_tar_data then copies the member's bytes out, reading a
 * member larger than the buffer straight into the caller's memory. Memory
 * is the buffer, grown only for pax or long-name headers larger than it:
 * the headers before one member, together, up to max_meta bytes (at most
 * DL_TAR_MAX_META). A regular member larger than max_member is an error
 * found from its header, before its data is read.
 *
 * The rules, offsets and messages of errors are those of the Python parser
 * (dataloader/sources/_tar.py), which tests compare against this one on
 * corrupted and truncated shards. */
#ifndef DL_TAR_H
#define DL_TAR_H

#include <stddef.h>
#include <stdint.h>

#define DL_TAR_BLOCK 512
/* The most bytes of pax and GNU long-name headers before one member (their
 * 512-byte blocks included): max_meta's default and ceiling. */
#define DL_TAR_MAX_META (16 << 20)

/* Return codes of dl_tar_next and dl_tar_data. */
#define DL_TAR_MEMBER 1  /* a regular member: name, size and offsets are set */
#define DL_TAR_END 0     /* the end-of-archive block, or the end of the stream at a header */
#define DL_TAR_ERROR -1  /* a corrupt or truncated shard: reason and error_offset are set */
#define DL_TAR_AGAIN -2  /* more bytes are needed and may_read was 0; nothing was consumed */
#define DL_TAR_IO -3     /* read(2) failed: errno_value is set */
#define DL_TAR_NOMEM -4

typedef struct {
    int fd;
    /* Bounds, set by the caller after dl_tar_init: the largest regular
     * member (-1: none) and the most bytes of headers before one member. */
    int64_t max_member, max_meta;
    unsigned char *buf;        /* buf[pos, len) holds the stream's bytes from `offset` */
    size_t cap, pos, len;
    int64_t offset;            /* the shard offset of buf[pos] */
    int eof;                   /* read(2) returned 0 */
    int ended;                 /* DL_TAR_END was returned */
    int large;                 /* the last sizeable member was read straight into its memory */
    int64_t direct_end;        /* the shard offset where that member ended, or -1 */
    size_t lookahead;          /* bytes read into the buffer after such a member */
    /* Bytes to pass over before the next header: the data of a member
     * that is not returned (its header at skip_header), then padding. */
    int64_t skip_data, skip_data_size, skip_header, skip_pad;
    /* The member of the last DL_TAR_MEMBER. */
    char *name;                /* NUL-terminated; name_len bytes (may hold NULs from pax) */
    size_t name_len, name_cap;
    int64_t size;
    int64_t header_offset;     /* its own header */
    int64_t start;             /* its first header (a pax or long-name header included) */
    int data_pending;          /* dl_tar_data has not been called for it */
    /* The last error. */
    int64_t error_offset;
    int errno_value;
    char reason[192];
} dl_tar_t;

/* A reader of fd, whose current position is shard offset `offset` (a
 * header boundary), reading `block` bytes at a time. Returns 0 or
 * DL_TAR_NOMEM. */
int dl_tar_init(dl_tar_t *tar, int fd, int64_t offset, size_t block);
void dl_tar_free(dl_tar_t *tar);

/* Parse up to the next regular member (DL_TAR_MEMBER), or DL_TAR_END. A
 * member's data not taken by dl_tar_data is skipped first. With may_read
 * 0 it returns DL_TAR_AGAIN rather than call read(2), having consumed
 * nothing but the skipped bytes already buffered: the caller holding the
 * interpreter retries without it. */
int dl_tar_next(dl_tar_t *tar, int may_read);

/* Bytes of the current member's data already in the buffer (at most its size). */
int64_t dl_tar_buffered(const dl_tar_t *tar);

/* Bytes from the reader's position to the end of a regular file, or -1
 * for a pipe or socket: a member larger than that is truncated, which is
 * known before memory is allocated for it. */
int64_t dl_tar_remaining(const dl_tar_t *tar);

/* Copy the current member's `size` bytes into dst. Returns 0, or
 * DL_TAR_ERROR (truncated), DL_TAR_IO; reads only if dl_tar_buffered is
 * less than the size. */
int dl_tar_data(dl_tar_t *tar, unsigned char *dst);

#endif
