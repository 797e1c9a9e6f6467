/* A fixed-size pthread pool running C tasks from one FIFO queue.
 *
 * The pool knows nothing of Python: the owner passes hooks that run once on
 * each thread when it starts and when it stops (the Python side uses them
 * to give every thread one interpreter thread state for its whole life).
 *
 * Lifetime: the pool is reference counted by its owner and by each of its
 * threads, so the owner may shut it down from one of the pool's own
 * threads (it cannot join itself then); the last reference frees it.
 */
#ifndef DL_POOL_H
#define DL_POOL_H

#include <stddef.h>

/* A task; `cancelled` is 1 when the pool is shutting down: the task must
 * then only release what `arg` owns. */
typedef void (*dl_task_fn)(void *arg, int cancelled);

typedef struct {
    void (*thread_start)(void *ctx, int thread_index);
    void (*thread_stop)(void *ctx, int thread_index);
    void *ctx;
} dl_pool_hooks_t;

typedef struct dl_pool dl_pool_t;

/* Start `n_threads` threads named "<name_prefix><index>" with stacks of
 * `stack_bytes`. Returns NULL with errno set when a thread cannot start. */
dl_pool_t *dl_pool_create(int n_threads, size_t stack_bytes, const char *name_prefix,
                          dl_pool_hooks_t hooks);

/* Queue a task. Returns 0, or -1 when the pool is shutting down (the task
 * is not queued and `arg` stays the caller's) or memory is exhausted. */
int dl_pool_submit(dl_pool_t *pool, dl_task_fn fn, void *arg);

/* Stop accepting tasks, run the queued ones with cancelled=1, and let the
 * threads exit. With `join`, wait for the threads up to `timeout_seconds`
 * (< 0: forever) and return 0 when all have exited, 1 on timeout. Never
 * call with `join` from one of the pool's threads. Drops the owner's
 * reference: the pool must not be used afterwards. */
int dl_pool_shutdown(dl_pool_t *pool, int join, double timeout_seconds);

/* Whether the calling thread is one of `pool`'s threads. */
int dl_pool_owns_current_thread(const dl_pool_t *pool);

int dl_pool_size(const dl_pool_t *pool);

#endif
