"""Values at the bottom of the data flow: request records, the run configuration, errors,
clocks and the one number formatter. Imports nothing of ``latency``; no torch."""
