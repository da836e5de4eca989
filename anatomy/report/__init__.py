"""The words and figures made from `Results`: the report, the claims' verdicts, the charts."""
