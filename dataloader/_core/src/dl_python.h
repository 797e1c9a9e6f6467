/* How a pool thread lives inside the interpreter.
 *
 * Each pool thread creates one interpreter thread state when it starts and
 * keeps it until it stops: between tasks the thread is detached (holds no
 * GIL, or on free-threaded builds is not attached), and `with gil:` in a
 * task re-activates that same state instead of creating a new one, so
 * thread-locals (get_worker_info) persist and attaching is cheap.
 */
#ifndef DL_PYTHON_H
#define DL_PYTHON_H

#include <Python.h>

static __thread PyGILState_STATE dl_thread_gil_state;
static __thread PyThreadState *dl_thread_state = NULL;
static __thread int dl_thread_index = -1;

#if PY_VERSION_HEX >= 0x030D0000
#define dl_interpreter_finalizing() Py_IsFinalizing()
#else
#define dl_interpreter_finalizing() _Py_IsFinalizing()
#endif

static inline void dl_thread_enter_interpreter(int index)
{
    dl_thread_index = index;
    dl_thread_gil_state = PyGILState_Ensure();
    dl_thread_state = PyEval_SaveThread();
}

/* Whether the thread may still attach to delete its state: not once the
 * interpreter is finalizing (a thread that attaches then is stopped by the
 * runtime, so its state is left to the runtime). */
static inline int dl_thread_may_leave_interpreter(void)
{
    return dl_thread_state != NULL && !dl_interpreter_finalizing();
}

/* Re-attach the thread's state and delete it. */
static inline void dl_thread_leave_interpreter(void)
{
    PyEval_RestoreThread(dl_thread_state);
    dl_thread_state = NULL;
    PyGILState_Release(dl_thread_gil_state);
}

static inline int dl_current_thread_index(void) { return dl_thread_index; }

#endif
