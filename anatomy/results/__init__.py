"""Run folders into one database, read back as one `Results`: collect, the reader, reference, progress."""
