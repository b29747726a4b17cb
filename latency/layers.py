"""The layer rule of ``latency/``, in one place: which stages each stage may import.

Each folder is one stage of the data flow (docs/architecture.md) and imports only the stages
listed for it here — downward. ``tests/test_architecture.py`` checks every import of every
module against this table (function-local imports included), that the table has no circle,
and that the stages in ``TORCH_FREE`` import neither torch nor Streamlit.
"""
from __future__ import annotations

LAYERS: dict[str, set[str]] = {
    # values: records, configuration, errors, clocks, formatting; the generation scheduler's
    # policy (pure decisions, which the server and the simulator both run)
    "core": set(),
    # the machine: devices, cores, environment (torch from here up)
    "host": {"core"},
    # what is served: the Pipeline contract, the registry, the levers
    "pipelines": {"core", "host"},
    # the server, its one builder, the OIP/HTTP app
    "serve": {"core", "host", "pipelines"},
    # the client: load generators and transports (the HTTP client speaks the server's OIP)
    "loadgen": {"core", "serve"},
    # what was measured, as values: statistics, summaries, snapshots, results, comparisons
    "analysis": {"core"},
    # the serving system without a model: queueing theory, simulation, capacity, what-if
    "simulation": {"core", "analysis"},
    # the run history and files
    "storage": {"core", "analysis"},
    # figures for people (Plotly; the lesson handout drawn with matplotlib)
    "figures": {"core", "analysis", "simulation", "storage"},
    # one run from start to end, and plans of several
    "execution": {"core", "host", "pipelines", "serve", "loadgen", "analysis", "storage"},
    # the command line, on top
    "cli": {"core", "host", "pipelines", "serve", "loadgen", "analysis", "simulation", "storage",
            "figures", "execution"},
    # beside the command line: the live workshop (lessons with their runs, question and
    # answer; the room; its shared run groups), which the dashboard uses and the CLI does not;
    # a lesson's theory is the simulation stage's queueing
    "workshop": {"core", "analysis", "simulation", "execution"},
}

#: stages usable without torch or Streamlit (``import latency.<stage>`` pulls in neither).
TORCH_FREE: tuple[str, ...] = ("core", "analysis", "simulation", "storage", "figures")
