"""Analysis: tracebacks rebuilt from candidate lines, events labelled by the patterns and the root cause
chosen among them (classify), the job's shape (context), checks and figures for the report (findings),
and failure fingerprints across jobs (fingerprint)."""
