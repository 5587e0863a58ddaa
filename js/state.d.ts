// The widget's state as the page holds it (generated from src/attnwidget/state.py by scripts/state_types.py: do not edit).

/** An array as it travels: its shape, its numbers' type, its bytes (one head's, where `head` says which). */
export type ArrayValue = { shape: number[]; dtype: "float32" | "float64"; view: DataView; head?: number };
/** Booleans as bytes, 1 where a row may read. */
export type MaskValue = { shape: number[]; dtype: "uint8"; view: DataView };
/** A kernel's answer for the page: plain data, with the state it is for in its key. */
// biome-ignore lint/suspicious/noExplicitAny: each view checks the answer it draws (overview, measures, ...)
export type Answer = Record<string, any>;
/** A view the kernel computes (computed_views.py): its sign, where its answer is held, when it is asked;
 * a measure's also the choices an exported page's answer follows and its words. */
export type ViewSpec = {
  signed: boolean;
  held_in: "computed" | "measure_data" | "overview";
  asked_when: { [K in keyof State]?: State[K][] | null } | null; // (null: any value but null)
} & Partial<MeasureWords>;
export type MeasureWords = { follows: ("layer" | "head")[]; label: string; about: string; title: string; reads: string; across_layers: boolean };

/** The names and limits the page's rules need (rules.CONSTANTS), and the computed views. */
export interface Constants {
  stages: State["stage"][];
  blocks: string[];
  exercises: State["exercise"][];
  summaries: State["summary"][];
  measures: State["measure"][];
  kv_methods: State["kv_method"][];
  positions: State["position"][];
  model_positions: State["position"][];
  temperature_range: number[];
  row_traits: (keyof State)[];
  writable: (keyof State)[];
  read_only: (keyof State)[];
  indices: (keyof State)[];
  flags: (keyof State)[];
  stack: (keyof State)[];
  layered: Record<string, keyof State>;
  weights_only: Record<string, Record<string, string>>;
  weights_bias: string;
  no_effect: string;
  no_induction: string;
  no_sinks: string;
  model_sinks: string;
  no_qk_map: string;
  no_difference: string;
  difference_exercise: string;
  sink_exercise: string;
  scale_limit: number;
  guess_tolerance: number;
  entry_limit: number;
  generation_is_causal: string;
  reads_both_ways: string;
  two_texts: string;
  views: Record<string, ViewSpec>;
}

/** Every piece of the widget's state (src/attnwidget/state.py), and the constants. */
export interface State {
  /** The rows' tokens, one string per row of q. */
  tokens: string[];
  /** The columns' tokens: the tokens themselves in self-attention; in cross-attention the text read (a translation model's source). */
  key_tokens: string[] | null;
  /** Cross-attention: the columns are another text's tokens (key_tokens of their own). */
  cross: boolean;
  /** Queries: tokens × width, or heads × tokens × width. */
  q: ArrayValue;
  /** Keys: one row per key token, q's width (and heads). */
  k: ArrayValue;
  /** Values: one row per key token, any width (and q's heads). */
  v: ArrayValue;
  /** Each token's own embedding (tokens × value width), which the blend stage can add the mix to; or None. */
  x: ArrayValue | null;
  /** Show x + the mix in the blend stage (needs x). */
  residual: boolean;
  /** Cells a row may read besides the causal rule (queries × keys, True = may read), e.g. to leave out padding; or None. */
  mask: MaskValue | null;
  /** Added to the scores, (heads ×) queries × keys: a model's position bias (T5, ALiBi); or None. */
  bias: ArrayValue | null;
  /** T in softmax(scores / T): any finite T > 0 (the slider spans 0.1 to 5). */
  temperature: number;
  /** Each token reads only itself and the tokens before it. */
  causal: boolean;
  /** Attention sinks: the first token's column left out and every row renormalised over the rest. */
  sink: boolean;
  /** The factor on q·k; None for 1/√d. */
  scale: number | null;
  /** Soft-capping: each scale·q·k becomes softcap·tanh(s/softcap), so no score passes ±softcap (Gemma 2); None for no cap. */
  softcap: number | null;
  /** Learnt attention sinks (gpt-oss): one logit z per head, one more column of every row's softmax (divided by the temperature as the scores are), dropped after it, so that each row keeps 1 − the sink's share and no token gets the rest; None for none. A model's layer switch brings its own in (-1e30: a head, or layer, without one). */
  sinks: number[] | null;
  /** Where position enters the attention (position.py). Your own arrays: "none" (as given), "rope" (each query and key turned pair by pair by its position × θ_i, θ_i = rope_base^(−2i/width); the pairs are the first and second halves of each vector) or "alibi" (``−m·|i − j|`` added to the scores, one slope m per head). A model's widget names its own scheme, which its q and k carry already, and cannot change it: "rope", "alibi", "relative" (T5's bias), "learned", "sinusoidal", or "" where its config does not say. */
  position: "none" | "rope" | "alibi" | "relative" | "learned" | "sinusoidal" | "";
  /** RoPE's base: pair i of a width-d vector turns by position × base^(−2i/d) (position="rope"). */
  rope_base: number;
  /** ALiBi's slopes, one m per head (position="alibi"); None for the ALiBi paper's 2^(−8h/H), h = 1 … H. */
  alibi_slopes: number[] | null;
  /** The focused token (a row): its arcs, its row of weights, its output. */
  focus: number;
  /** The stage shown: one of "tokens", "qk", "scores", "weights", "blend". */
  stage: "tokens" | "qk" | "scores" | "weights" | "blend";
  /** The head shown (0 for 2-D arrays). */
  head: number;
  /** A differential attention model's widget (model_lambda): the weights and blend stages show the signed difference of the head shown's pair, map 1 − λ·map 2, which is what the model mixes the values with (rows sum to 1 − λ); False shows the head's own softmax, map 1 or map 2 of its pair (w.differential has all three). */
  difference_map: boolean;
  /** The cell whose arithmetic is shown, (row, column) in the focused row; or None. */
  cell: [number, number] | null;
  /** The page's controls are shown: the stages' buttons, the temperature, the causal, sink and position switches, the texts', blocks' and layers' selects (with the model's name), the generation stepper and the PNG and SVG buttons. False for a figure, the stages alone (a slide, a course page's illustration). */
  controls: boolean;
  /** The sentences the page can switch between, or a model's texts (from_transformers with a list); empty for one sentence, your own arrays or a model of one text. */
  sentences: string[];
  /** How many tokens each of sentences has (empty with one): the difference compares two of as many. */
  text_lengths: number[];
  /** The sentence (or model's text) shown, an index into sentences: a model's text comes with its tokens and every layer. */
  sentence_index: number;
  /** Names of the blend plot's two value axes (the built-in ones are senses of "bank"). */
  value_axes: string[];
  /** Values wider than two are plotted on their first two principal axes: (heads ×) d_v × 2; None when the values are 2-D. */
  value_basis: ArrayValue | null;
  /** The model's layer shown, by the model's own number (a hybrid's attention layers keep theirs: one of layer_numbers). */
  layer: number;
  /** How many layers with attention weights the widget holds (0 for your own arrays). */
  n_layers: number;
  /** The model's own number of each layer held, in order, where they are not 0 to n_layers − 1: a hybrid's attention layers among layers of other kinds (Jamba's 1, 3, 5, ...); empty otherwise. */
  layer_numbers: number[];
  /** What each of the model's layers is, by its number: "" for a layer held, else its kind in words (a Mamba state-space layer, linear attention, a short convolution), which computes no attention weights; empty when every layer is held. */
  layer_kinds: string[];
  /** The model's layers (by number) whose mask is sparse attention's choice of keys: each query reads the few keys an indexer chose (DeepSeek V3.2's top index_topk), not every key its rule allows. selection() and the page say how much of dense attention's weight the choice keeps. */
  sparse_layers: number[];
  /** Differential attention's λ, one per layer held (DiffLlama; Ye et al., 2025): the model mixes a pair of heads' values with map 1 − λ·map 2, head p's softmax minus λ times head p + heads/2's, each row summing to 1 − λ; None for every other model. */
  model_lambda: number[] | null;
  /** Every layer's queries, (layers · heads) × tokens × width, kept here: a layer switch brings that layer's in as q. */
  model_q?: ArrayValue | null;
  /** Every layer's keys, as model_q. */
  model_k?: ArrayValue | null;
  /** Every layer's values, as model_q. */
  model_v?: ArrayValue | null;
  /** Every layer's value axes, (layers · heads) × d_v × 2; None when the values are 2-D. */
  model_basis?: ArrayValue | null;
  /** A model's masks, each once, masks × queries × keys: the cells a layer's rows may read besides the causal rule (a sliding window, local attention); None when no layer has one. */
  model_masks?: MaskValue | null;
  /** Each layer's mask, an index into model_masks (-1: none); empty when no layer has one. A layer switch brings its mask in as `mask`. */
  mask_of_layer?: number[];
  /** A bias per layer, (layers · heads) × queries × keys (attention weights alone: their logarithms); None for a bias the same in every layer, or none. A layer switch brings its own in as `bias`. */
  model_bias?: ArrayValue | null;
  /** The terms a model's bias is the sum of, by name: DeBERTa's "c2p" (content to position) and "p2c" (position to content), those it has, beside its scale · q · k ("c2c"); empty for other widgets. */
  term_names: string[];
  /** The first of term_names (DeBERTa's c2p, or its only one) of the layer shown, (heads ×) queries × keys: the bias less it is the second. None without term_names, and once a bias of your own is set. */
  terms: ArrayValue | null;
  /** Every layer's terms, (layers · heads) × queries × keys; None without term_names. A layer switch brings its own in as `terms`. */
  model_terms?: ArrayValue | null;
  /** A model's learnt attention sinks, layers × heads logits (-1e30 where a layer has none); None for a model without. A layer switch brings its own in as `sinks`. */
  model_sinks?: ArrayValue | null;
  /** A causal language model's widget: head_effects() and the overview's "effect" summary (its effect on the next token). */
  next_token: boolean;
  /** A model's widget whose model (or block shown) reads causally, each token only itself and the tokens before it (a decoder, a causal language model, attention weights of that pattern): its numbers for a text's first tokens are its own on those tokens, so `step` can write the text. False for a model that reads both ways (an encoder, a vision transformer), whose `step` is the number of tokens, and for your own arrays (`causal` is the widget's rule, which you may change; this is the model's). */
  model_causal: boolean;
  /** A widget that can run its model again on tokens of its own: head_scores()'s and the overview's "induction". */
  reads_model: boolean;
  /** "weights" (or "weights and values") for a widget of attention weights alone (from_attentions): no q and k, so no query/key or scores stage (and no blend without values); "" otherwise. */
  weights_only: "" | "weights" | "weights and values";
  /** [block, layer, head] whose arrays a live page has been sent: the head shown of q, k and v (the page keeps those it fetched by it); None for your own arrays. */
  layer_arrays: [string, number, number] | null;
  /** A model's every layer and head at a glance, computed here when the page asks (overview.compute): thumbnails and summaries at the inputs in its "key"; None until asked, and again when those inputs change. */
  overview: Answer | null;
  /** q, k and v are the current layer's (not your own arrays): a layer switch brings them in from model_q, model_k and model_v. */
  layer_shown: boolean;
  /** The heads' overview coloured by one of head_summary()'s names ("sink_share" where the heads have learnt sinks), one of head_scores()'s over every text ("sink", "duplicate", "entropy", "streaming"), a model's own "induction" or "retrieval", or a causal language model's "effect" (head_effects()), each computed when asked; "" for none. */
  summary:
    | ""
    | "first"
    | "self"
    | "previous"
    | "effective_tokens"
    | "sink_share"
    | "effect"
    | "sink"
    | "duplicate"
    | "induction"
    | "entropy"
    | "streaming"
    | "retrieval";
  /** Beside the overview, the head shown's every query and key of every text in one 2-D map (query_key_map()), computed when the page shows it. */
  qk_map: boolean;
  /** The panel beyond one head's weights (measures.py): "norms" (weight × ‖value‖, the head shown), "mean" (the layer's heads' mean weights), "rollout" or "flow" (up to the layer shown), "difference" (two texts), or "" for none. */
  measure: "" | "norms" | "mean" | "rollout" | "flow" | "difference";
  /** Each measure's name -> "" where this widget can show it, else why not. */
  measures: Record<string, string>;
  /** The measures the page offers a button for (computed_views.offered): none for one head of one text, difference only with several texts. */
  offered_measures: string[];
  /** {measure: its matrix for the page, at the state in its "key"} (computed_views.entry), computed here when the page asks; None until then, and again when the arrays change. */
  measure_data: Answer | null;
  /** {view: its answer for the page, at the state in its "key"} for the other views computed_views.py declares (head_scores), computed here when the page asks; a view's answer is dropped when the state it is for changes. */
  computed: Answer | null;
  /** A compressed KV cache shown over the head's weights and the tokens (kvcache.py, w.kv_keep()): the keys "streaming" (StreamingLLM: the first tokens and the most recent), "h2o" (heavy hitters: the largest column sums, and the most recent), "snapkv" (the last queries' votes) or "mask" (kv_keys) keeps, kv_budget per head, and what the focused row loses without the rest; "" for none. */
  kv_method: "" | "streaming" | "h2o" | "snapkv" | "mask";
  /** The keys each head's compressed cache keeps (kv_method), a whole number ≥ 1; past the keys read, all. */
  kv_budget: number;
  /** The keys kv_method "mask" keeps, by position (the same in every head); empty for none. */
  kv_keys: number[];
  /** The model's name, for the page's title. */
  model_name: string;
  /** The page's words for a model's scheme ("RoPE, base 500,000"), shown beside its name. */
  position_about: string;
  /** A vision model's image as it saw it, to draw under its patches: {"src": a PNG data URL, "rows", "cols": the patch grid, "first": the index of the first patch token, "patch": a patch's side in pixels, "size": [height, width]}; None for other widgets. */
  image: { src: string; rows: number; cols: number; first: number; patch: number; size: [number, number] } | null;
  /** An encoder–decoder model's blocks ("encoder", "decoder", "cross"); empty for other widgets. */
  blocks: string[];
  /** The block shown: one of blocks ("" for other widgets). */
  block: string;
  /** How many tokens are written so far (1 to n; n shows them all): below n only the first `step` tokens exist and the causal rule is on. `tokens` keeps the whole text; every array (scores, weights, output, effective_tokens, rollout(), norms(), ...) is over the tokens written, `written_tokens` (= tokens[:step]), which label its rows and columns. A model's widget writes only where its model reads causally (model_causal). */
  step: number;
  /** "predict" (spread a guess over the focused row, then reveal it), "temperature" (set T for `goal` effective tokens), or "" for none. */
  exercise: "" | "predict" | "temperature";
  /** The learner's guess at the focused row's weights (one per token read, summing to 1), or None. */
  guess: number[] | null;
  /** The exercise's answer is shown. */
  revealed: boolean;
  /** The temperature exercise's target: the effective tokens the focused row should reach. */
  goal: number;
  /** The predict exercise shows the focused row's scores before the reveal (a hint: they rank the tokens as the weights will). */
  scores_hint: boolean;
  _constants: Constants;
}
