/* Scratch memory: a few growing buffers per thread, kept until the thread
 * ends (see dl_scratch in dl_internal.h). An image-sized buffer allocated
 * afresh for every image is above malloc's mmap threshold, so it would be
 * mapped, faulted in page by page and unmapped each time: on a busy machine
 * that costs as much as a resize pass. */
#include <pthread.h>
#include <stdlib.h>

#include "dl_internal.h"

typedef struct {
    uint8_t *data[DL_SCRATCH_SLOTS];
    size_t size[DL_SCRATCH_SLOTS];
} dl_scratch_t;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *raw)
{
    dl_scratch_t *scratch = raw;
    for (int slot = 0; slot < DL_SCRATCH_SLOTS; slot++) free(scratch->data[slot]);
    free(scratch);
}

static void scratch_key_create(void) { pthread_key_create(&scratch_key, scratch_free); }

uint8_t *dl_scratch(int slot, size_t bytes)
{
    pthread_once(&scratch_once, scratch_key_create);
    dl_scratch_t *scratch = pthread_getspecific(scratch_key);
    if (scratch == NULL) {
        if ((scratch = calloc(1, sizeof *scratch)) == NULL) return NULL;
        if (pthread_setspecific(scratch_key, scratch) != 0) {
            free(scratch);
            return NULL;
        }
    }
    if (scratch->size[slot] < bytes) {
        free(scratch->data[slot]);
        scratch->size[slot] = 0;
        if ((scratch->data[slot] = malloc(bytes)) == NULL) return NULL;
        scratch->size[slot] = bytes;
    }
    return scratch->data[slot];
}
