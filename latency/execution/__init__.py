"""One profiling run from start to end: full validation of a config, the engine that executes
it, the run process and the messages it sends, the machine-wide run lock, the run manager that
queues a room's runs, and plans made of several runs (A/B, the lesson)."""
