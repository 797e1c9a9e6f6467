/* Small helpers over pthread condition variables: monotonic deadlines. */
#ifndef DL_SYNC_H
#define DL_SYNC_H

#include <pthread.h>
#include <time.h>

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
