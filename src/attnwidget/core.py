"""The old home of the formulas (0.1.0), kept so that code importing it goes on working: one head's
attention is in :mod:`attnwidget.formulas`, what mixes heads and layers in :mod:`attnwidget.mixing`.
Importing this module warns; it goes in 0.3.0."""

import warnings

from .formulas import (  # noqa: F401 (re-exported)
    CLOSED,
    SCORE_LIMIT,
    SUMMARIES,
    UNDERFLOW,
    Attention,
    allowed_cells,
    attention,
    default_scale,
    head_summaries,
    overflow_message,
    principal_axes,
    score_bound,
    scores_of,
    summaries_of_rows,
)
from .mixing import CHUNK, attention_flow, attention_norms, head_grams, head_vectors, rollout  # noqa: F401

__all__ = ["Attention", "attention", "default_scale", "principal_axes"]  # (as it was)

warnings.warn(
    "attnwidget.core is now attnwidget.formulas (one head's attention) and attnwidget.mixing (rollout, "
    "attention_flow, attention_norms, head_grams, head_vectors): import from those; attnwidget.core goes in 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
