"""Streamlit-side glue shared by the pages: the server-wide run manager, the session's
identity, and figure caches. The engine (``latency/``) never imports this."""
