"""The old home of the formulas (0.1.0), kept so that code importing it goes on working: one head's
attention is in :mod:`attnwidget.formulas`, what mixes heads and layers in :mod:`attnwidget.mixing`.
Importing this module warns; it goes in 0.3.0."""

import warnings

from .formulas import (  # noqa: F401
    Attention,
    allowed_cells,
    attention,
    default_scale,
    head_summaries,
    principal_axes,
    scores_of,
    summaries_of_rows,
)
from .mixing import attention_flow, attention_norms, head_grams, head_vectors, rollout  # noqa: F401

warnings.warn(
    "attnwidget.core is now attnwidget.formulas (one head's attention) and attnwidget.mixing (rollout, "
    "attention_flow, attention_norms, head_grams, head_vectors): import from those; attnwidget.core goes in 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
