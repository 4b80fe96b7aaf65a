"""mdiag: name the root cause of a failed distributed training job from its logs.

    >>> from diagnose import diagnose
    >>> d = diagnose(["logs/megatron-1234.err"])
    >>> d.root_cause.category, d.root_cause.rank, d.root_cause.evidence
"""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["diagnose", "__version__"]


def diagnose(paths, *args, **kwargs):
    """Diagnose the logs at `paths` (files, folders, globs); see diagnose.pipeline.diagnose."""
    from diagnose.pipeline import diagnose as _diagnose  # polars is imported only when there is work to do

    return _diagnose(paths, *args, **kwargs)
