"""One file per model family."""
