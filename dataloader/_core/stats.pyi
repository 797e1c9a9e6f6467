
FETCH_COUNT: int
FETCH_NS: int
TRANSFORM_COUNT: int
TRANSFORM_NS: int
COLLATE_COUNT: int
COLLATE_NS: int
WAIT_COUNT: int
WAIT_NS: int
SKIPPED_COUNT: int
SKIPPED_NS: int
N_COLUMNS: int

def monotonic_ns() -> int: ...

class Row:
    """One thread's counters: ``(count, nanoseconds)`` per stage."""

    def add(self, column: int, count: int, nanoseconds: int) -> None: ...
    def totals(self) -> tuple[int, ...]: ...
