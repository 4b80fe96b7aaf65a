"""Reading: find the logs (collect), pick candidate lines from raw bytes (scan), peel launcher prefixes
(normalize, grammar), attribute each line to its rank/host (attribute) and order it in time (timeline)."""
