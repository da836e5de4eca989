"""The files every step shares: atomic writes, locks, the run folder, and shipped weights."""
