/* The native codecs (src/dl_codecs.c) with no Python: a libFuzzer target
 * (`clang -fsanitize=fuzzer,address`), and with -DDL_STANDALONE a program
 * that runs every file named on its command line through the same function,
 * which is how `make test-asan` replays the corpus under LeakSanitizer.
 *
 * Each input's header is read; when it names a native format, the image is
 * decoded at every channel count (and every JPEG scale, and a JPEG's
 * windows) into rows padded with guard bytes, which must be intact
 * afterwards. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dl_internal.h"

/* Larger images are skipped: the fuzzer looks for bugs, not for memory. */
#define MAX_PIXELS (1 << 22)
#define GUARD 0xA5
#define ROW_PADDING 7

/* A JPEG window (dl_internal.h) decoded when `window` is given, else the
 * whole image (height x width). */
static void decode_checked(const uint8_t *data, size_t size, int scale, int height, int width,
                           int channels, const dl_window_t *window)
{
    char msg[DL_MSG_LEN];
    if (window != NULL) {
        height = window->height;
        width = window->width;
    }
    size_t row = (size_t)width * channels;
    size_t stride = row + ROW_PADDING;
    size_t total = stride * (size_t)height + ROW_PADDING;
    uint8_t *dst = malloc(total);
    if (dst == NULL)
        return;
    memset(dst, GUARD, total);
    if (window != NULL)
        dl_jpeg_decode_window(data, size, scale, window, channels, dst + ROW_PADDING,
                              (ptrdiff_t)stride, msg);
    else
        dl_decode(data, size, scale, height, width, channels, dst + ROW_PADDING,
                  (ptrdiff_t)stride, msg);
    /* Bytes outside the rows (the padding before each row) must be untouched. */
    for (int y = 0; y <= height; y++) {
        for (size_t i = 0; i < ROW_PADDING; i++) {
            if (dst[(size_t)y * stride + i] != GUARD) {
                fprintf(stderr, "dl_decode wrote outside its rows (row %d)\n", y);
                abort();
            }
        }
    }
    free(dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dl_info_t info;
    char msg[DL_MSG_LEN];
    uint8_t pixel[4];
    if (size == 0)
        return 0;
    if (dl_image_info(data, size, &info, msg) != DL_OK) {
        /* The decoder reads the header again: it must fail the same way. */
        dl_decode(data, size, 8, 1, 1, 4, pixel, 4, msg);
        return 0;
    }
    if (info.height <= 0 || info.width <= 0
        || (int64_t)info.height * info.width > MAX_PIXELS)
        return 0;
    for (int channels = 1; channels <= 4; channels++) {
        int first = info.format == DL_FMT_JPEG ? 1 : 8;
        for (int scale = first; scale <= 8; scale++) {
            int height = info.height, width = info.width;
            if (info.format == DL_FMT_JPEG)
                dl_jpeg_scaled_size(info.height, info.width, scale, &height, &width);
            decode_checked(data, size, scale, height, width, channels, NULL);
            if (info.format != DL_FMT_JPEG)
                continue;
            /* Windows: inside the image, across its edges, one pixel. */
            dl_window_t windows[] = {{height / 3, width / 3, height / 2 + 1, width / 2 + 1},
                                     {-3, width - 5, 10, 12}, {height - 1, 0, 1, 1}};
            for (size_t i = 0; i < sizeof windows / sizeof windows[0]; i++)
                decode_checked(data, size, scale, height, width, channels, &windows[i]);
        }
    }
    /* A destination that does not match the header must be refused. */
    dl_decode(data, size, 8, 1, 1, 4, pixel, 4, msg);
    return 0;
}

#ifdef DL_STANDALONE
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0 || !S_ISREG(st.st_mode))
            continue; /* a directory, or a glob that matched nothing */
        FILE *file = fopen(argv[i], "rb");
        if (file == NULL)
            return 1;
        fseek(file, 0, SEEK_END);
        long size = ftell(file);
        fseek(file, 0, SEEK_SET);
        uint8_t *data = malloc(size > 0 ? (size_t)size : 1);
        if (size < 0 || data == NULL || fread(data, 1, (size_t)size, file) != (size_t)size) {
            fprintf(stderr, "cannot read %s\n", argv[i]);
            return 1;
        }
        fclose(file);
        LLVMFuzzerTestOneInput(data, (size_t)size);
        free(data);
    }
    printf("%d inputs decoded\n", argc - 1);
    return 0;
}
#endif
