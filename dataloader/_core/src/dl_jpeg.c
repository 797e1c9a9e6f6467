/* JPEG through libjpeg's API (libjpeg-turbo): headers, whole images and
 * windows of images, at any of the DCT scales n/8.
 *
 * Each thread keeps one decompressor and reuses it for every image. Its
 * error manager never lets libjpeg print or exit: an error, and also a
 * warning (truncated or corrupt entropy data, which libjpeg would fill with
 * gray), formats its message into the caller's `msg` and longjmps back to
 * the call, which returns a status; so no pixel that was not decoded from
 * the file is ever returned.
 *
 * A window (dl_jpeg_decode_window) is decoded with jpeg_crop_scanline and
 * jpeg_skip_scanlines: libjpeg decodes only the iMCU columns and rows that
 * hold it. The result is the same bytes as the window cut from the whole
 * image: libjpeg's fancy upsampling replicates the chroma samples at the
 * edges of what it decodes, so one pixel of context (DL_JPEG_CONTEXT) is
 * decoded around the window on every side where the image goes on, and cut
 * off. Rows after the window are not read: a window decode does not look at
 * the data after its last row.
 *
 * A header read by dl_jpeg_info stays read in the thread's decompressor, and
 * the next call starts from it when it is given the same bytes (same address
 * and size, and the header's bytes equal to a copy taken when it was read):
 * libjpeg's header state is a function of those bytes alone, so this is the
 * parse the call would make, and an info call followed by a decode of the
 * image (kernels.decode, a chain's plan and run passes) parses it once. Any
 * other call drops the kept header first. */
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "dl_internal.h"

/* Pixels decoded around a window so that its edge pixels see the chroma
 * neighbours they see in the whole image (fancy upsampling reads one chroma
 * sample on each side). */
#define DL_JPEG_CONTEXT 1

/* The longest header kept for the next call (SOI to the end of the first
 * SOS segment): a file with a longer one (large APPn segments) is parsed
 * again. Pillow writes about 600 bytes. */
#define DL_JPEG_KEPT_MAX 2048

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char *msg;   /* the running call's message buffer */
    int status;  /* what the running call returns after a jump */
} dl_jpeg_error_t;

/* One thread's decompressor and row buffers, kept until the thread ends. */
typedef struct {
    struct jpeg_decompress_struct cinfo;
    dl_jpeg_error_t error;
    uint8_t *row, *rgb;
    size_t row_size, rgb_size;
    /* The header the decompressor holds, read from `kept` (`kept_size` bytes),
     * its first `kept_length` bytes copied; kept_length 0: none. */
    const uint8_t *kept;
    size_t kept_size, kept_length;
    uint8_t kept_bytes[DL_JPEG_KEPT_MAX];
} dl_jpeg_state_t;

static void dl_jpeg_error_exit(j_common_ptr cinfo)
{
    dl_jpeg_error_t *error = (dl_jpeg_error_t *)cinfo->err;
    char text[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, text);
    snprintf(error->msg, DL_MSG_LEN, "JPEG: %s", text);
    error->status = error->pub.msg_code == JERR_OUT_OF_MEMORY ? DL_ERR_NOMEM : DL_ERR_CORRUPT;
    longjmp(error->jump, 1);
}

/* Warnings (level -1) are errors; trace messages (0 and up) are dropped. */
static void dl_jpeg_emit_message(j_common_ptr cinfo, int level)
{
    if (level < 0) dl_jpeg_error_exit(cinfo);
}

static void dl_jpeg_output_message(j_common_ptr cinfo) { (void)cinfo; }

static pthread_key_t state_key;
static pthread_once_t state_once = PTHREAD_ONCE_INIT;

static void state_free(void *raw)
{
    dl_jpeg_state_t *state = raw;
    jpeg_destroy_decompress(&state->cinfo);
    free(state->row);
    free(state->rgb);
    free(state);
}

static void state_key_create(void) { pthread_key_create(&state_key, state_free); }

/* This thread's decompressor, created on first use; NULL when out of memory. */
static dl_jpeg_state_t *thread_state(void)
{
    pthread_once(&state_once, state_key_create);
    dl_jpeg_state_t *state = pthread_getspecific(state_key);
    if (state != NULL) return state;
    if ((state = calloc(1, sizeof *state)) == NULL) return NULL;
    state->cinfo.err = jpeg_std_error(&state->error.pub);
    state->error.pub.error_exit = dl_jpeg_error_exit;
    state->error.pub.emit_message = dl_jpeg_emit_message;
    state->error.pub.output_message = dl_jpeg_output_message;
    char msg[DL_MSG_LEN];
    state->error.msg = msg;
    if (setjmp(state->error.jump)) {
        free(state);
        return NULL;
    }
    jpeg_create_decompress(&state->cinfo);
    if (pthread_setspecific(state_key, state) != 0) {
        jpeg_destroy_decompress(&state->cinfo);
        free(state);
        return NULL;
    }
    return state;
}

/* Writes `text` into `msg`; returns `status`. */
static int fail(char *msg, int status, const char *text)
{
    snprintf(msg, DL_MSG_LEN, "JPEG: %s", text);
    return status;
}

/* A buffer of at least `bytes` (grown, never shrunk), or NULL. */
static uint8_t *grown_buffer(uint8_t **buffer, size_t *size, size_t bytes)
{
    if (*size < bytes) {
        free(*buffer);
        *size = 0;
        if ((*buffer = malloc(bytes)) == NULL) return NULL;
        *size = bytes;
    }
    return *buffer;
}

void dl_jpeg_scaled_size(int height, int width, int scale, int *out_h, int *out_w)
{
    /* libjpeg's jdiv_round_up(side * scale, 8). */
    *out_h = (int)(((long long)height * scale + 7) / 8);
    *out_w = (int)(((long long)width * scale + 7) / 8);
}

int dl_jpeg_scale_for(int height, int width, int min_h, int min_w)
{
    for (int scale = 1; scale < 8; scale++) {
        int h, w;
        dl_jpeg_scaled_size(height, width, scale, &h, &w);
        if (h >= min_h && w >= min_w) return scale;
    }
    return 8;
}

/* Starts reading `data`: the state's decompressor holds its header, the
 * kept one when it was read from these bytes. */
static void read_header(dl_jpeg_state_t *state, const uint8_t *data, size_t size)
{
    j_decompress_ptr cinfo = &state->cinfo;
    if (state->kept_length > 0) {
        size_t length = state->kept_length;
        state->kept_length = 0;
        if (state->kept == data && state->kept_size == size &&
            memcmp(state->kept_bytes, data, length) == 0)
            return;
        jpeg_abort_decompress(cinfo);
    }
    jpeg_mem_src(cinfo, data, (unsigned long)size);
    if (jpeg_read_header(cinfo, TRUE) != JPEG_HEADER_OK || cinfo->image_width < 1 ||
        cinfo->image_height < 1)
        ERREXIT(cinfo, JERR_NO_IMAGE);
}

/* The whole-image coefficient arrays libjpeg allocates (jdcoefct.c) for a
 * JPEG of several scans (progressive, or one scan per component): 64
 * coefficients a block, for every block of every component (rounded up to
 * the sampling factors), where a one-scan JPEG needs a row of blocks.
 * jpeg_read_header stops at the first scan, which has set the blocks. */
static double coefficient_bytes(const struct jpeg_decompress_struct *cinfo)
{
    double bytes = 0;
    if (!cinfo->progressive_mode && cinfo->comps_in_scan >= cinfo->num_components)
        return 0;
    for (int c = 0; c < cinfo->num_components; c++) {
        const jpeg_component_info *component = &cinfo->comp_info[c];
        size_t h = (size_t)component->h_samp_factor, v = (size_t)component->v_samp_factor;
        size_t columns = (component->width_in_blocks + h - 1) / h * h;
        size_t rows = (component->height_in_blocks + v - 1) / v * v;
        bytes += (double)columns * (double)rows * DCTSIZE2 * sizeof(JCOEF);
    }
    return bytes;
}

int dl_jpeg_info(const uint8_t *data, size_t size, dl_info_t *info, char *msg)
{
    dl_jpeg_state_t *state = thread_state();
    if (state == NULL) return fail(msg, DL_ERR_NOMEM, "cannot create a decompressor");
    state->error.msg = msg;
    if (setjmp(state->error.jump)) {
        jpeg_abort_decompress(&state->cinfo);
        return state->error.status;
    }
    read_header(state, data, size);
    info->format = DL_FMT_JPEG;
    info->width = (int)state->cinfo.image_width;
    info->height = (int)state->cinfo.image_height;
    info->channels = state->cinfo.jpeg_color_space == JCS_GRAYSCALE ? 1 : 3;
    info->coefficient_bytes = coefficient_bytes(&state->cinfo);
    /* The header is kept for the next call (with the mem source, what it has
     * read is everything before next_input_byte, a pointer into `data`). */
    size_t length = (size_t)((uintptr_t)state->cinfo.src->next_input_byte - (uintptr_t)data);
    if (length > 0 && length <= size && length <= DL_JPEG_KEPT_MAX) {
        memcpy(state->kept_bytes, data, length);
        state->kept = data;
        state->kept_size = size;
        state->kept_length = length;
    } else {
        jpeg_abort_decompress(&state->cinfo);
    }
    return DL_OK;
}

/* CMYK to RGB as Pillow's convert does, each channel
 * (255 - k) - c * (255 - k) / 255, rounded, on samples stored inverted
 * (255 = no ink), as Adobe writes them. Every four-component JPEG is taken
 * to be inverted, whether or not it carries an APP14 "Adobe" segment: the
 * segment only tells CMYK from YCCK (libjpeg's jdapimin.c), libjpeg writes
 * it with every CMYK file it compresses, and a file without it is most
 * likely one whose APPn segments were stripped. Pillow (its JPEG plugin's
 * "CMYK;I" raw mode) and libjpeg-turbo's tools (cmyk.h, used by djpeg and
 * tjbench) make the same assumption, with no test of the segment. */
static void dl_cmyk_to_rgb(const uint8_t *src, uint8_t *dst, size_t n_pixels)
{
    size_t i;
    for (i = 0; i < n_pixels; i++, src += 4, dst += 3) {
        int c;
        int nk = src[3];
        for (c = 0; c < 3; c++) {
            int v = 255 - src[c];
            int t = v * nk + 128;
            int r = nk - (((t >> 8) + t) >> 8);
            dst[c] = (uint8_t)(r < 0 ? 0 : r);
        }
    }
}

/* libjpeg's output colour space for `channels` from a JPEG of
 * `jpeg_color_space`: the mode itself where libjpeg makes it as Pillow does
 * (RGB from gray repeats the gray; RGBA adds alpha 255), else the native
 * one (gray, RGB or CMYK), converted row by row. */
static J_COLOR_SPACE output_space(J_COLOR_SPACE jpeg_color_space, int channels)
{
    if (jpeg_color_space == JCS_CMYK || jpeg_color_space == JCS_YCCK) return JCS_CMYK;
    if (channels == 3) return JCS_RGB;
    if (channels == 4) return JCS_EXT_RGBA;
    return jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : JCS_RGB;
}

/* `n` decoded pixels (in `row`, of `components` samples, CMYK when `cmyk`)
 * into `out`, in `channels`. */
static int put_row(dl_jpeg_state_t *state, const uint8_t *row, int components, int cmyk,
                   uint8_t *out, int channels, int n)
{
    if (cmyk) {
        uint8_t *rgb = channels == 3 ? out : grown_buffer(&state->rgb, &state->rgb_size,
                                                          (size_t)n * 3);
        if (rgb == NULL) return DL_ERR_NOMEM;
        dl_cmyk_to_rgb(row, rgb, (size_t)n);
        if (channels != 3) dl_convert_rows(rgb, 0, 3, out, 0, channels, 1, n);
        return DL_OK;
    }
    if (row != out) dl_convert_rows(row, 0, components, out, 0, channels, 1, n);
    return DL_OK;
}

/* Fills the window's rows y0..y1-1 (window coordinates) outside the image
 * with zeros, and the columns before x0 and from x1 on of every row. */
static void zero_border(uint8_t *dst, ptrdiff_t stride, const dl_window_t *w, int channels,
                        int y0, int y1, int x0, int x1)
{
    size_t row = (size_t)w->width * channels;
    for (int y = 0; y < w->height; y++) {
        uint8_t *out = dst + y * stride;
        if (y < y0 || y >= y1 || x0 >= x1) {
            memset(out, 0, row);
        } else {
            memset(out, 0, (size_t)x0 * channels);
            memset(out + (size_t)x1 * channels, 0, (size_t)(w->width - x1) * channels);
        }
    }
}

/* Rows handed to one jpeg_read_scanlines call when they go straight into
 * the destination: libjpeg-turbo then upsamples and converts a whole row
 * group per call instead of returning to us after each row. */
#define DL_JPEG_ROWS 16

/* Decodes `window` of the image at DCT scale `scale`/8 into `dst`. With
 * `whole`, the window must be the whole scaled image (checked against the
 * header this call reads: one header parse per image). */
static int decode(const uint8_t *data, size_t size, int scale, const dl_window_t *window,
                  int whole, int channels, uint8_t *dst, ptrdiff_t row_stride, char *msg)
{
    dl_jpeg_state_t *state = thread_state();
    if (state == NULL) return fail(msg, DL_ERR_NOMEM, "cannot create a decompressor");
    j_decompress_ptr cinfo = &state->cinfo;
    state->error.msg = msg;
    if (setjmp(state->error.jump)) {
        jpeg_abort_decompress(cinfo);
        return state->error.status;
    }
    read_header(state, data, size);
    if (whole) {
        int h, w;
        dl_jpeg_scaled_size((int)cinfo->image_height, (int)cinfo->image_width, scale, &h, &w);
        if (h != window->height || w != window->width) {
            jpeg_abort_decompress(cinfo);
            snprintf(msg, DL_MSG_LEN,
                     "JPEG: decoded size %dx%d does not match the destination %dx%d",
                     h, w, window->height, window->width);
            return DL_ERR_MISMATCH;
        }
    }
    cinfo->out_color_space = output_space(cinfo->jpeg_color_space, channels);
    cinfo->scale_num = (unsigned int)scale;
    cinfo->scale_denom = 8;
    cinfo->dct_method = JDCT_ISLOW;      /* libjpeg's (and Pillow's) defaults, */
    cinfo->do_fancy_upsampling = TRUE;   /* stated: the window rule relies on them */
    jpeg_start_decompress(cinfo);
    int height = (int)cinfo->output_height, width = (int)cinfo->output_width;
    int components = cinfo->output_components, cmyk = cinfo->out_color_space == JCS_CMYK;
    /* The part of the window inside the image, in window coordinates. */
    int y0 = window->top < 0 ? -window->top : 0;
    int x0 = window->left < 0 ? -window->left : 0;
    int y1 = height - window->top < window->height ? height - window->top : window->height;
    int x1 = width - window->left < window->width ? width - window->left : window->width;
    if (!whole) zero_border(dst, row_stride, window, channels, y0, y1, x0, x1);
    if (y0 >= y1 || x0 >= x1) {
        jpeg_abort_decompress(cinfo);
        return DL_OK;
    }
    /* What libjpeg decodes: the window's image part and its context. */
    int first = window->top + y0 - DL_JPEG_CONTEXT, last = window->top + y1;
    JDIMENSION left = (JDIMENSION)(window->left + x0 > DL_JPEG_CONTEXT
                                       ? window->left + x0 - DL_JPEG_CONTEXT : 0);
    JDIMENSION right = (JDIMENSION)(window->left + x1 + DL_JPEG_CONTEXT < width
                                        ? window->left + x1 + DL_JPEG_CONTEXT : width);
    JDIMENSION decoded = right - left;
    if (decoded < (JDIMENSION)width) jpeg_crop_scanline(cinfo, &left, &decoded);
    if (first > 0) jpeg_skip_scanlines(cinfo, (JDIMENSION)first);
    /* The window's pixels start `skip` pixels into each decoded row. */
    size_t skip = (size_t)(window->left + x0) - left;
    int direct = !cmyk && components == channels && skip == 0 && decoded == (JDIMENSION)(x1 - x0);
    while ((int)cinfo->output_scanline < last) {
        int y = (int)cinfo->output_scanline - window->top;
        uint8_t *out = y >= y0 ? dst + y * row_stride + (ptrdiff_t)x0 * channels : NULL;
        if (direct && out != NULL) {
            /* Many rows at once, straight into the destination. */
            JSAMPROW rows[DL_JPEG_ROWS];
            int n = last - (int)cinfo->output_scanline;
            if (n > DL_JPEG_ROWS) n = DL_JPEG_ROWS;
            for (int k = 0; k < n; k++) rows[k] = out + k * row_stride;
            if (jpeg_read_scanlines(cinfo, rows, (JDIMENSION)n) < 1) {
                jpeg_abort_decompress(cinfo);
                return fail(msg, DL_ERR_CORRUPT, "no scanline decoded");
            }
            continue;
        }
        JSAMPROW row = grown_buffer(&state->row, &state->row_size, (size_t)decoded * components);
        if (row == NULL) {
            jpeg_abort_decompress(cinfo);
            return fail(msg, DL_ERR_NOMEM, "out of memory");
        }
        if (jpeg_read_scanlines(cinfo, &row, 1) != 1) {
            jpeg_abort_decompress(cinfo);
            return fail(msg, DL_ERR_CORRUPT, "no scanline decoded");
        }
        if (out != NULL && put_row(state, row + skip * components, components, cmyk, out,
                                   channels, x1 - x0) != DL_OK) {
            jpeg_abort_decompress(cinfo);
            return fail(msg, DL_ERR_NOMEM, "out of memory");
        }
    }
    /* A whole image is read to its end, so that data cut short after the
     * last row is an error too. */
    if (cinfo->output_scanline == cinfo->output_height) jpeg_finish_decompress(cinfo);
    else jpeg_abort_decompress(cinfo);
    return DL_OK;
}

int dl_jpeg_decode_window(const uint8_t *data, size_t size, int scale, const dl_window_t *window,
                          int channels, uint8_t *dst, ptrdiff_t row_stride, char *msg)
{
    return decode(data, size, scale, window, 0, channels, dst, row_stride, msg);
}

int dl_jpeg_decode(const uint8_t *data, size_t size, int scale, int height, int width,
                   int channels, uint8_t *dst, ptrdiff_t row_stride, char *msg)
{
    dl_window_t whole = {0, 0, height, width};
    return decode(data, size, scale, &whole, 1, channels, dst, row_stride, msg);
}
