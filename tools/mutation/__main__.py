"""``python -m tools.mutation {python,native} ...``: see ``tools/mutation/__init__.py``."""

import sys


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in ("python", "native"):
        print("usage: python -m tools.mutation {python,native} [options]", file=sys.stderr)
        return 2
    if sys.argv[1] == "python":
        from tools.mutation.python import main as run
    else:
        from tools.mutation.native import main as run
    return run(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
