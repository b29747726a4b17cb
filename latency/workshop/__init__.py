"""The live workshop, a stage above ``execution``: the course of lessons (each a question, its
runs and the answer computed from them), the room's presentation and guesses, and the run
groups a room shares. No CLI path needs it; the dashboard's Workshop page and Optimisation Lab
do."""
