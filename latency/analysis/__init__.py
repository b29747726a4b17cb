"""What a run measured, as values: statistics, the typed Summary and its findings, the
verdict, live snapshots, the RunResult, comparisons of runs and A/B arms. Depends only on the
values in ``core``: no torch, no server."""
