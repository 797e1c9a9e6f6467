#define _GNU_SOURCE
#include "dl_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dl_sync.h"

typedef struct dl_task {
    dl_task_fn fn;
    void *arg;
    struct dl_task *next;
} dl_task_t;

typedef struct {
    dl_pool_t *pool;
    int index;
} dl_thread_start_t;

struct dl_pool {
    pthread_mutex_t mutex;
    pthread_cond_t work_ready;    /* a task was queued, or shutdown began */
    pthread_cond_t thread_exited; /* a thread left its loop */
    dl_task_t *head, *tail;       /* FIFO of queued tasks, guarded by mutex */
    int shutting_down;
    int n_threads;
    int n_running;                /* threads still in their loop */
    int refcount;                 /* the owner + each live thread */
    pthread_t *threads;
    dl_pool_hooks_t hooks;
};

static void pool_release(dl_pool_t *pool)
{
    pthread_mutex_lock(&pool->mutex);
    int last = --pool->refcount == 0;
    pthread_mutex_unlock(&pool->mutex);
    if (!last) return;
    pthread_mutex_destroy(&pool->mutex);
    pthread_cond_destroy(&pool->work_ready);
    pthread_cond_destroy(&pool->thread_exited);
    free(pool->threads);
    free(pool);
}

/* Take the next task, or NULL when shutting down with an empty queue. */
static dl_task_t *next_task(dl_pool_t *pool, int *cancelled)
{
    pthread_mutex_lock(&pool->mutex);
    while (pool->head == NULL && !pool->shutting_down)
        pthread_cond_wait(&pool->work_ready, &pool->mutex);
    dl_task_t *task = pool->head;
    if (task != NULL) {
        pool->head = task->next;
        if (pool->head == NULL) pool->tail = NULL;
    }
    *cancelled = pool->shutting_down;
    pthread_mutex_unlock(&pool->mutex);
    return task;
}

static void *thread_main(void *raw)
{
    dl_thread_start_t start = *(dl_thread_start_t *)raw;
    free(raw);
    dl_pool_t *pool = start.pool;
    if (pool->hooks.thread_start) pool->hooks.thread_start(pool->hooks.ctx, start.index);
    int cancelled;
    dl_task_t *task;
    while ((task = next_task(pool, &cancelled)) != NULL) {
        task->fn(task->arg, cancelled);
        free(task);
    }
    if (pool->hooks.thread_stop) pool->hooks.thread_stop(pool->hooks.ctx, start.index);
    pthread_mutex_lock(&pool->mutex);
    pool->n_running--;
    pthread_cond_broadcast(&pool->thread_exited);
    pthread_mutex_unlock(&pool->mutex);
    pool_release(pool);
    return NULL;
}

static int start_thread(dl_pool_t *pool, int index, size_t stack_bytes, const char *prefix)
{
    dl_thread_start_t *start = malloc(sizeof *start);
    if (start == NULL) return ENOMEM;
    start->pool = pool;
    start->index = index;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, stack_bytes);
    /* Threads are joined by dl_pool_shutdown or never (detached below). */
    int rc = pthread_create(&pool->threads[index], &attr, thread_main, start);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        free(start);
        return rc;
    }
    char name[16];
    snprintf(name, sizeof name, "%s%d", prefix, index);
    pthread_setname_np(pool->threads[index], name);
    return 0;
}

dl_pool_t *dl_pool_create(int n_threads, size_t stack_bytes, const char *name_prefix,
                          dl_pool_hooks_t hooks)
{
    dl_pool_t *pool = calloc(1, sizeof *pool);
    if (pool == NULL) return NULL;
    pool->threads = calloc((size_t)n_threads, sizeof *pool->threads);
    if (pool->threads == NULL) {
        free(pool);
        return NULL;
    }
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->work_ready, NULL);
    dl_cond_init_monotonic(&pool->thread_exited);
    pool->hooks = hooks;
    pool->refcount = 1;
    for (int i = 0; i < n_threads; i++) {
        pthread_mutex_lock(&pool->mutex);
        pool->refcount++;
        pool->n_running++;
        pool->n_threads++;
        pthread_mutex_unlock(&pool->mutex);
        int rc = start_thread(pool, i, stack_bytes, name_prefix);
        if (rc != 0) {
            pthread_mutex_lock(&pool->mutex);
            pool->refcount--;
            pool->n_running--;
            pool->n_threads--;
            pthread_mutex_unlock(&pool->mutex);
            dl_pool_shutdown(pool, 1, -1.0);
            errno = rc;
            return NULL;
        }
    }
    return pool;
}

int dl_pool_submit(dl_pool_t *pool, dl_task_fn fn, void *arg)
{
    dl_task_t *task = malloc(sizeof *task);
    if (task == NULL) return -1;
    task->fn = fn;
    task->arg = arg;
    task->next = NULL;
    pthread_mutex_lock(&pool->mutex);
    if (pool->shutting_down) {
        pthread_mutex_unlock(&pool->mutex);
        free(task);
        return -1;
    }
    if (pool->tail) pool->tail->next = task;
    else pool->head = task;
    pool->tail = task;
    pthread_cond_signal(&pool->work_ready);
    pthread_mutex_unlock(&pool->mutex);
    return 0;
}

int dl_pool_shutdown(dl_pool_t *pool, int join, double timeout_seconds)
{
    struct timespec deadline;
    dl_deadline_after(&deadline, timeout_seconds < 0 ? 0.0 : timeout_seconds);
    pthread_mutex_lock(&pool->mutex);
    pool->shutting_down = 1;
    pthread_cond_broadcast(&pool->work_ready);
    int timed_out = 0;
    while (join && pool->n_running > 0 && !timed_out) {
        if (timeout_seconds < 0)
            pthread_cond_wait(&pool->thread_exited, &pool->mutex);
        else
            timed_out = pthread_cond_timedwait(&pool->thread_exited, &pool->mutex, &deadline)
                        == ETIMEDOUT;
    }
    int all_exited = pool->n_running == 0;
    pthread_mutex_unlock(&pool->mutex);
    /* Exited threads are joined to free their resources; the others are
     * detached and free themselves when they finish. */
    for (int i = 0; i < pool->n_threads; i++) {
        if (join && all_exited) pthread_join(pool->threads[i], NULL);
        else pthread_detach(pool->threads[i]);
    }
    pool_release(pool);
    return join && !all_exited;
}

int dl_pool_owns_current_thread(const dl_pool_t *pool)
{
    pthread_t self = pthread_self();
    for (int i = 0; i < pool->n_threads; i++)
        if (pthread_equal(pool->threads[i], self)) return 1;
    return 0;
}

int dl_pool_size(const dl_pool_t *pool) { return pool->n_threads; }
