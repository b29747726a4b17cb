"""One profiling run from start to end: full validation of a config, the engine that executes it,
the run process and the messages it sends, the run lock (one measurement at a time per user),
the run manager that queues runs one at a time, and A/B plans made of several runs. The
workshop built on these runs (lessons, the room, run groups) is ``latency.workshop``."""
