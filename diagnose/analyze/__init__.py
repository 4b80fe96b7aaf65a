"""Analysis: tracebacks rebuilt from candidate lines (tracebacks), events named by the patterns (label),
the root cause chosen among them (root), what the report says around it (explain), the job's shape
(context), checks and figures for the report (findings), and failure fingerprints across jobs
(fingerprint)."""
