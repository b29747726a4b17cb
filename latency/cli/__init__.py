"""``python -m latency`` (console script ``latency``): the command line, on top of every
stage."""
