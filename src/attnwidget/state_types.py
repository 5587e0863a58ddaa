"""The widget's state as Python types
(generated from src/attnwidget/state.py by scripts/state_types.py: do not edit)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypedDict

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike


class StateFields(Protocol):
    """Every piece of the widget's state, as its trait holds it."""

    tokens: list[str]
    key_tokens: list[str] | None
    cross: bool
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    x: np.ndarray | None
    residual: bool
    mask: np.ndarray | None
    bias: np.ndarray | None
    temperature: float
    causal: bool
    sink: bool
    scale: float | None
    softcap: float | None
    sinks: Sequence[float] | None
    position: str
    rope_base: float
    alibi_slopes: Sequence[float] | None
    focus: int
    stage: str
    head: int
    difference_map: bool
    cell: tuple[int, int] | None
    controls: bool
    sentences: list[str]
    text_lengths: list[int]
    sentence_index: int
    value_axes: list[str]
    value_basis: np.ndarray | None
    layer: int
    n_layers: int
    layer_numbers: list[int]
    layer_kinds: list[str]
    sparse_layers: list[int]
    model_lambda: Sequence[float] | None
    model_q: np.ndarray | None
    model_k: np.ndarray | None
    model_v: np.ndarray | None
    model_basis: np.ndarray | None
    model_masks: np.ndarray | None
    mask_of_layer: list[int]
    model_bias: np.ndarray | None
    term_names: list[str]
    terms: np.ndarray | None
    model_terms: np.ndarray | None
    model_sinks: np.ndarray | None
    next_token: bool
    model_causal: bool
    reads_model: bool
    weights_only: str
    layer_arrays: list | None
    overview: dict | None
    layer_shown: bool
    summary: str
    qk_map: bool
    measure: str
    measures: dict
    offered_measures: list[str]
    measure_data: dict | None
    computed: dict | None
    kv_method: str
    kv_budget: int
    kv_keys: list[int]
    model_name: str
    position_about: str
    image: dict | None
    blocks: list[str]
    block: str
    step: int
    exercise: str
    guess: Sequence[float] | None
    revealed: bool
    goal: float
    scores_hint: bool


class Options(TypedDict, total=False):
    """AttentionWidget's keyword arguments (None, where allowed beyond the field's own values: the
    widget chooses)."""

    tokens: Sequence[str]
    key_tokens: Sequence[str] | None
    q: ArrayLike
    k: ArrayLike
    v: ArrayLike
    x: ArrayLike | None
    residual: bool
    mask: ArrayLike | None
    bias: ArrayLike | None
    temperature: float
    causal: bool | None
    sink: bool
    scale: float | None
    softcap: float | None
    sinks: Sequence[float] | None
    position: str
    rope_base: float
    alibi_slopes: Sequence[float] | None
    focus: int | None
    stage: str | None
    head: int
    difference_map: bool
    cell: Sequence[int] | None
    controls: bool
    sentence_index: int
    value_axes: Sequence[str] | None
    summary: str
    qk_map: bool
    measure: str
    kv_method: str
    kv_budget: int
    kv_keys: Sequence[int]
    step: int | None
    exercise: str
    goal: float
    scores_hint: bool
