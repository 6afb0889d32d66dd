"""`python -m cloze ...` (and so `torchrun -m cloze train ...`)."""

from cloze.cli import entry_point

if __name__ == "__main__":
    entry_point()
