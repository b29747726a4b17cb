"""The figures the dashboard draws (Plotly), built by pure functions from values — summaries,
snapshots, stored runs, simulations — so tests can call them. No torch, no Streamlit.
(A value's text form lives with the value: ``latency.analysis.summary_text``.)"""
