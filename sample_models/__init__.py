"""Sample pipelines: real models from raw input to response, plus the synthetic teaching pipeline.

The registry lives in ``latency.pipelines.registry``; this package only holds the pipelines, their
data
generators (``data.py``), their small trained weights (``weights/``) and the training script
(``python -m sample_models.train``).
"""
