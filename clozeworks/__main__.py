"""`python -m clozeworks ...` (and so `torchrun -m clozeworks train ...`)."""

from clozeworks.cli import entry_point

if __name__ == "__main__":
    entry_point()
