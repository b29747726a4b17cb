"""The server: preprocess workers, the batch queue and the model replicas (``server``), the
one builder that makes it from a RunConfig (``builder``), and the same server behind the Open
Inference Protocol over HTTP (``oip``, ``http_app``, ``http_server``)."""
