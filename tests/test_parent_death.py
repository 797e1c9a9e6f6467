"""Worker processes never outlive their consumer: killed (SIGKILL, as the
out-of-memory killer or a preemption does) in any state its workers are
in, the consumer leaves no worker, no shared memory and no slot behind.

Each case runs a consumer process (``parent_death_consumer.py``) that
brings its two workers into one state and says so; the test kills it and
every worker must be gone within two seconds.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from parent_death_consumer import BATCH_SIZE, HELD_BATCHES, WORKERS

from dataloader import DataLoader

CONSUMER = Path(__file__).with_name("parent_death_consumer.py")
# How long a worker may outlive its consumer.
GONE_SECONDS = 2.0
# How long a consumer may take to bring its workers into a state (imports,
# spawn, a busy machine): within the suite's timeout of 300 s per test.
READY_SECONDS = 240.0
REPEATS = 20

# (state, how): every state with fork from the main thread (the parent-death
# signal and the watchdog); from another thread (the watchdog alone), without
# pidfd (the watchdog's fallback); under spawn and forkserver.
CASES = [
    *[(state, "fork") for state in ("item", "init", "idle", "held", "send", "stream")],
    ("item", "fork+thread"),
    ("send", "fork+thread"),
    ("item", "fork+thread+nopidfd"),
    ("item", "forkserver+nopidfd"),
    ("item", "spawn"),
    ("init", "forkserver"),
    ("idle", "forkserver"),
    ("send", "forkserver+thread"),
]


@pytest.mark.parametrize("repeat", [
    1,
    pytest.param(REPEATS, marks=[pytest.mark.soak, pytest.mark.timeout(REPEATS * 300)],
                 id=f"{REPEATS}x"),
])
@pytest.mark.parametrize(("state", "how"), CASES, ids=[f"{s}-{h}" for s, h in CASES])
def test_workers_die_with_a_killed_consumer(tmp_path, state, how, repeat):
    for run in range(repeat):
        folder = tmp_path / str(run)
        folder.mkdir()
        kill_consumer_in_state(folder, state, how)


def kill_consumer_in_state(folder, state, how):
    shm_before = set(os.listdir("/dev/shm"))
    env = {**os.environ, "PYTHONPATH": str(CONSUMER.parent)}
    if "+nopidfd" in how:
        env["PARENT_DEATH_NO_PIDFD"] = "1"
    with open(folder / "stderr", "wb") as stderr:
        consumer = subprocess.Popen(
            [sys.executable, str(CONSUMER), state, how.replace("+nopidfd", ""), str(folder)],
            stdin=subprocess.PIPE, stderr=stderr, start_new_session=True, env=env,
        )
    pids = []
    try:
        pids = wait_until_ready(consumer, folder, state)
        consumer.kill()
        consumer.wait()
        survivors = left_alive(pids, GONE_SECONDS)
        assert survivors == {}, f"{state}/{how}: workers outlived their consumer: {survivors}"
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
        for pid in pids:  # never leave a worker behind, even when the test fails
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        consumer.stdin.close()
    assert new_shared_memory(shm_before) == set()
    assert holding_slots(session=consumer.pid) == {}


def wait_until_ready(consumer, folder, state):
    """The workers' pids, once every worker is in ``state`` (see the consumer's docstring)."""
    deadline = time.monotonic() + READY_SECONDS
    while True:
        pids = [int(name.name.removeprefix("ready-")) for name in folder.glob("ready-*")]
        if len(pids) == WORKERS and _rest_ready(folder, state):
            break
        if consumer.poll() is not None:
            pytest.fail(f"the consumer exited ({consumer.returncode}):\n"
                        f"{(folder / 'stderr').read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"the workers did not reach {state!r}; the consumer's session, "
                        f"(state, wchan) by pid: {session_states(consumer.pid)}\n"
                        f"{(folder / 'stderr').read_text()}")
        time.sleep(0.02)
    if state == "send":
        # The consumer stops reading; then each worker goes on and sends its
        # batch, more than the pipe holds: it waits in the socket's send.
        consumer.send_signal(signal.SIGSTOP)
        for pid in pids:
            with open(folder / f"go-{pid}", "wb"):
                pass
        deadline = time.monotonic() + READY_SECONDS
        while not all(_waits_in_send(pid) for pid in pids):
            if time.monotonic() > deadline:
                pytest.fail(f"the workers {pids} did not block sending; the consumer's "
                            f"session, (state, wchan) by pid: {session_states(consumer.pid)}")
            time.sleep(0.02)
    return pids


def _rest_ready(folder, state):
    if state != "held":
        return True
    # Every batch of the epoch is loaded: two held by the consumer, the rest
    # waiting for it (their replies on the way or received).
    return len(list(folder.glob("item-*"))) == HELD_BATCHES * BATCH_SIZE


def _waits_in_send(pid):
    return "send" in _wchan(pid)


def _wchan(pid):
    try:
        return Path(f"/proc/{pid}/wchan").read_text()
    except FileNotFoundError:
        return ""


def left_alive(pids, seconds):
    """The processes of ``pids`` still running after ``seconds``, with their state.

    A worker whose parent died is reparented; if nobody reaps it (PID 1 of a
    container may not) it stays a zombie, which holds nothing: gone.
    """
    deadline = time.monotonic() + seconds
    while True:
        alive = {pid: state for pid in pids if (state := _state(pid)) not in (None, "Z")}
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.02)


def _state(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def new_shared_memory(before):
    """Files in /dev/shm named as a loader's (or multiprocessing's, torch's) could
    be that were not there ``before`` and stay: other programs make and unlink
    their own meanwhile."""
    def ours():
        return {name for name in set(os.listdir("/dev/shm")) - before
                if name.startswith(("sem.mp", "psm_", "torch_", "mp-")) or "dataloader" in name}

    deadline = time.monotonic() + 5
    while ours() and time.monotonic() < deadline:
        time.sleep(0.1)
    return ours()


def session_processes(session):
    """The pids of the processes of ``session`` (a consumer's, its workers...)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rpartition(") ")[2].split()
            except (FileNotFoundError, ProcessLookupError):
                continue  # gone meanwhile
            if int(stat[3]) == session:
                pids.append(int(entry))
    return pids


def session_states(session):
    return {pid: (_state(pid), _wchan(pid)) for pid in session_processes(session)}


def holding_slots(session):
    """The processes of the consumer's session (its workers, a fork server, a
    resource tracker) still mapping a batch slot or holding its descriptor,
    with how many."""
    holding = {}
    for pid in session_processes(session):
        try:
            count = Path(f"/proc/{pid}/maps").read_text().count("memfd:dataloader-batch")
            for fd in os.listdir(f"/proc/{pid}/fd"):
                count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:dataloader-batch")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue  # gone meanwhile
        if count:
            holding[pid] = count
    return holding


def test_persistent_workers_started_by_a_thread_outlive_that_thread():
    # The parent-death signal follows the thread that forked a worker, not its
    # process: workers started on a thread that ended must go on serving.
    loader = DataLoader(list(range(8)), batch_size=4, num_workers=2, worker_type="process",
                        persistent_workers=True, timeout=60)
    try:
        first = []
        runner = threading.Thread(target=lambda: first.extend(b.tolist() for b in loader))
        runner.start()
        runner.join()
        pids = loader._worker_kinds["process"].group.pids
        assert first == [[0, 1, 2, 3], [4, 5, 6, 7]]
        assert [batch.tolist() for batch in loader] == first
        assert loader._worker_kinds["process"].group.pids == pids
    finally:
        loader.close()


def test_a_forked_worker_holds_none_of_the_consumers_ends_of_the_pipes():
    # Neither its own nor its siblings' nor another loader's: with them, a
    # worker's pipe would never reach end of file, nor its send fail, once
    # the consumer is gone.
    loaders = [DataLoader(list(range(8)), batch_size=4, num_workers=2, worker_type="process",
                          persistent_workers=True, timeout=60) for _ in range(2)]
    try:
        for loader in loaders:
            assert sum(1 for _ in loader) == 2  # each batch dropped before the next
        groups = [loader._worker_kinds["process"].group for loader in loaders]
        ends = {f"socket:[{os.fstat(conn.fileno()).st_ino}]"
                for group in groups for conn in group._conns}
        assert len(ends) == 4
        for pid in [pid for group in groups for pid in group.pids]:
            held = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
            assert held & ends == set()
    finally:
        for loader in loaders:
            loader.close()
