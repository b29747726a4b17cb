"""What is served: the Pipeline contract (raw input → preprocess → forward → postprocess),
the registry that finds pipelines by name, and the optimisation levers applied to them."""
