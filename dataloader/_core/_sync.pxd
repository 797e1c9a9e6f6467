# C-level synchronisation shared by the engine's modules: pthread mutexes and
# condition variables, monotonic time and spinning before a sleep (src/dl_sync.h).
from posix.types cimport clockid_t
from posix.time cimport timespec

cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    int pthread_mutex_init(pthread_mutex_t* mutex, void* attr)
    int pthread_mutex_destroy(pthread_mutex_t* mutex)
    int pthread_mutex_lock(pthread_mutex_t* mutex)
    int pthread_mutex_unlock(pthread_mutex_t* mutex)
    int pthread_cond_destroy(pthread_cond_t* cond)
    int pthread_cond_broadcast(pthread_cond_t* cond)
    int pthread_cond_timedwait(pthread_cond_t* cond, pthread_mutex_t* mutex,
                               const timespec* deadline)

cdef extern from "dl_sync.h" nogil:
    int dl_cond_init_monotonic(pthread_cond_t* cond)
    void dl_deadline_after(timespec* deadline, double seconds)
    double dl_monotonic_seconds()
    const bint DL_ATTACHED_ONE_AT_A_TIME
    const long long DL_SPIN_NS
    ctypedef struct dl_spin_t:
        pass
    void dl_spin_start(dl_spin_t* spin)
    bint dl_spin_again(dl_spin_t* spin)
    int dl_peek_int(const int* value)
    Py_ssize_t dl_peek_ssize(const Py_ssize_t* value)
    void dl_bump(int* counter)
