"""The results dashboard: `streamlit run dashboard` (entry: dashboard/streamlit_app.py).

loaders.py reads the DuckDB database (read-only, one connection per page render),
analysis.py computes what the charts show, charts.py draws them with Altair (the charts the
report draws too, and their data, come from the package: anatomy/report/charts.py and
anatomy/report/chart_data.py), tables.py formats the run tables, and views/ holds one file per page.
The dashboard imports the package; the package never imports the dashboard.
"""
