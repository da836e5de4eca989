"""The results dashboard: `streamlit run dashboard` (entry: dashboard/streamlit_app.py).

loaders.py reads the DuckDB database (read-only, one short connection per query),
analysis.py computes what the charts show, charts.py draws them with Altair,
tables.py formats the run tables, and views/ holds one file per page.
"""
