"""Where results live: the SQLite run history, run files (JSON/CSV) read back, exports and
the Chrome trace. No torch."""
