"""mdiag: name the root cause of a failed distributed training job from its logs.

    >>> from diagnose import diagnose
    >>> d = diagnose(["logs/megatron-1234.err"])
    >>> d.root_cause.category, d.root_cause.rank, d.root_cause.evidence
"""
from __future__ import annotations

__version__ = "0.1.0"

from .pipeline import diagnose  # noqa: E402

__all__ = ["diagnose", "__version__"]
