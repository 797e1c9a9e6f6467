/* Small helpers over pthread condition variables: monotonic deadlines, and
 * the brief spin a thread does before it sleeps on one. */
#ifndef DL_SYNC_H
#define DL_SYNC_H

#include <pthread.h>
#include <sched.h>
#include <sys/types.h>
#include <time.h>

/* A brief spin, before a thread sleeps until another hands it something (a
 * consumer waiting for a batch, a batch runner waiting for the next queued
 * batch): a hand-off that comes within it costs no futex sleep and wake-up,
 * each several microseconds, far more on a virtual CPU that has halted.
 * Between checks the spinning thread yields the CPU, to the thread it waits
 * for when both share the CPU (a spin that keeps the CPU, checking every few
 * hundred nanoseconds, measured slower here: it kept that thread off the CPU).
 * The spin ends after DL_SPIN_NS, checked after every yield (a yield can
 * give the CPU to another process for a whole time slice). A batch that
 * takes longer costs the waiting thread this much CPU time. */
#define DL_SPIN_NS 50000

typedef struct {
    long long start;
} dl_spin_t;

static inline long long dl_now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
}

static inline void dl_spin_start(dl_spin_t *spin)
{
    spin->start = dl_now_ns();
}

/* One wait of the spin: 1 after yielding the CPU, 0 once the spin is over. */
static inline int dl_spin_again(dl_spin_t *spin)
{
    if (dl_now_ns() - spin->start >= DL_SPIN_NS) return 0;
    sched_yield();
    return 1;
}

/* A spinning thread's look at a value that others change under a mutex: it
 * takes the mutex only once the value says there is something to do. */
static inline int dl_peek_int(const int *value) { return __atomic_load_n(value, __ATOMIC_RELAXED); }
static inline ssize_t dl_peek_ssize(const ssize_t *value)
{
    return __atomic_load_n(value, __ATOMIC_RELAXED);
}
static inline void dl_bump(int *counter) { __atomic_add_fetch(counter, 1, __ATOMIC_RELEASE); }

/* Whether threads attached to the interpreter run one at a time (a build with
 * the GIL): a consumer gains nothing then by attaching while a worker is
 * attached, and would sleep until the worker detaches. Python.h comes first
 * in every module that uses it. */
#ifdef Py_GIL_DISABLED
#define DL_ATTACHED_ONE_AT_A_TIME 0
#else
#define DL_ATTACHED_ONE_AT_A_TIME 1
#endif

/* A condition variable whose timed waits use CLOCK_MONOTONIC, so that a
 * change of the wall clock cannot stretch or cut a wait. */
static inline int dl_cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

static inline void dl_deadline_after(struct timespec *deadline, double seconds)
{
    clock_gettime(CLOCK_MONOTONIC, deadline);
    long long nanos = (long long)(seconds * 1e9);
    deadline->tv_sec += (time_t)(nanos / 1000000000LL);
    deadline->tv_nsec += (long)(nanos % 1000000000LL);
    if (deadline->tv_nsec >= 1000000000L) {
        deadline->tv_sec += 1;
        deadline->tv_nsec -= 1000000000L;
    }
}

static inline double dl_monotonic_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

#endif
