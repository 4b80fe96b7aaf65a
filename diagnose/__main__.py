"""`python -m diagnose ...` is `mdiag ...` (where the `mdiag` script is not on PATH)."""
from diagnose.cli.main import entry

if __name__ == "__main__":
    entry()
