// The app core's shared types: the model both adapters give mount() (app.js), the numbers the
// page computes on (attention.js, derived.js) and the store's getters. The state itself is
// generated (state.d.ts).
import type { ArrayValue, Constants, MaskValue, State } from "./state";

export type { ArrayValue, Constants, MaskValue, State };

/** The numbers of an array as sent (float32 or float64), and every result the page computes (float64). */
export type Numbers = Float32Array | Float64Array;

/** A synced array decoded (attention.js decodeMatrix): heads × rows × cols numbers, row-major; a mask's
 * are bytes (1 where a row may read). `only`: a live model's layer holds one head's data, that head's. */
export interface Matrix<D extends Numbers | Uint8Array = Numbers> {
  data: D;
  heads: number;
  rows: number;
  cols: number;
  only?: number;
}

/** The cells rows may read (n × m, 1 where a row may), or null for every cell. */
export type Mask = Uint8Array | null;

/** What an exported page's state holds besides the widget's own (payload.py); a live page has none of it. */
export interface Exported {
  /** A model too large for the page: the layers it holds. */
  held_layers?: number[] | null;
  /** A model's several texts too large for the page: the one it holds. */
  held_texts?: number[] | null;
  /** A language model's effects, computed before the export (layers · heads numbers). */
  head_effects?: number[] | null;
  /** The step and text head_effects are of. */
  head_effects_key?: { step: number; sentence_index: number } | null;
}

/** The state as the page holds it: the widget's, and what an exported page adds. */
export type PageState = State & Exported;

/** Reads a field of the state by name: a misspelt name is a type error. */
export type Get = <K extends keyof PageState>(name: K) => PageState[K];

/** A change to the state: any of the fields, each its own type. */
export type Change = { [K in keyof State]?: State[K] };

/** How a change is sent: `soon`, part of a drag (sent at most every so often); `later`, shown now and sent by the next flush. */
export interface How {
  soon?: boolean;
  later?: boolean;
}

/** Asks for a whole change (the rules settle its follow-ups): null, or why it was refused. */
export type Propose = (change: Change, how?: How) => string | null;

/** A listener of the model: a change (`change`, `change:name`), or a message from the kernel (`msg:custom`). */
// (anywidget's EventHandler: a message's content is the kernel's, checked where it is read)
// biome-ignore lint/suspicious/noExplicitAny: as anywidget types its listeners
export type Listener = (...args: any[]) => void;

/** The model mount() draws from: a live widget's (layers.js wraps anywidget's) or an exported page's (standalone.js). */
export interface Model {
  get: Get;
  set<K extends keyof State>(name: K, value: State[K]): void;
  save_changes(): void;
  send(content: unknown): void;
  on(event: string, callback: Listener): void;
  off(event: string, callback?: Listener): void;
  /** A live model: whether this view keeps that head's arrays (a switch to it needs nothing from the kernel). */
  holds?: (block: string, layer: number, head: number) => boolean;
  /** An exported page: the arrays changed here since the export. */
  edited?: () => (keyof State)[];
}

/** For scripts and tests: the page's own numbers, pictures of it, and whether it is drawn (app.js). */
export interface PageApi {
  numbers(): { scores: number[]; weights: number[]; output: number[]; scale: number; temperature: number; exact: boolean; notice: string | null };
  work(): Work;
  /** The compressed KV cache of the head shown, and the layer's as the kernel sent it (app.js); null while off. */
  kv(): {
    method: string;
    budget: number;
    keep: number[] | null;
    error: string | null;
    row: number;
    retained: number | null;
    change: number | null;
    layer: { retained: number | null; change: number | null } | null;
  } | null;
  measure(): ReturnType<import("./views/measure.js").Measure["numbers"]>;
  image(): import("./views/image.js").ImageNumbers;
  snapshot(kind: string, scale?: number): ReturnType<typeof import("./snapshot.js").snapshotSVG> | ReturnType<typeof import("./snapshot.js").snapshotPNG>;
  model: Model;
  redraw(): void;
  /** When the page was first drawn whole (performance.now()); 0 until then. */
  firstPaint: number;
  ready(): boolean;
  /** An exported page: when its script began. */
  renderStart?: number;
}

/** The app's root element, with its API for scripts and tests. */
export type AppRoot = HTMLDivElement & { attnwidget: PageApi };

/** The live adapter's model (layers.js): it keeps the heads it was sent, and forgets them at destroy(). */

export interface LiveModel extends Model {
  holds: (block: string, layer: number, head: number) => boolean;
  destroy(): void;
}

/** The exported page's model (standalone.js): it settles each change itself. */
export interface LocalModel extends Model {
  edited: () => (keyof State)[];
  propose: Propose;
}

/** Where position enters the lab's scores (derived.js position()). */
export interface Position {
  scheme: "rope" | "alibi";
  base: number;
  /** The head shown's ALiBi slope; null with RoPE. */
  slope: number | null;
  /** The head shown's queries before RoPE turns them. */
  given: Matrix;
  /** A bias given besides ALiBi's. */
  biased: boolean;
}

/** Why row i may not read column j: the causal rule, the sink left out, the mask. */
export type ClosedWhy = "ahead" | "sink" | "mask";

/** The arithmetic of one weight, step by step (attention.js cellArithmetic). */
export type CellArithmetic = ReturnType<typeof import("./attention.js").cellArithmetic>;

/** The numbers of the head shown and the settings they depend on, as the stages take them (derived.js numbers()). */
/** Differential attention at the head shown (derived.js pair()). */
export interface Pair {
  /** The head shown. */
  head: number;
  /** The heads whose softmaxes are map 1 and map 2 of the pair. */
  heads: [number, number];
  /** The layer's λ: the model mixes the values with map 1 − λ·map 2. */
  lam: number;
  /** What the weights stage shows: the head's own map, or the pair's difference. */
  shown: "map 1" | "map 2" | "difference";
}

export interface Shown {
  temperature: number;
  causal: boolean;
  cross: boolean;
  residual: boolean;
  axes: string[];
  scaleSet: boolean;
  turnable: boolean;
  position: Position | null;
  q: Matrix;
  k: Matrix;
  v: Matrix;
  x: Matrix | null;
  basis: Matrix | null;
  bias: Matrix | null;
  mask: Mask;
  scale: number;
  softcap: number | null;
  /** The head shown's learnt sink's logit (one more column of each row's softmax, dropped), or null. */
  sink: number | null;
  scores: () => Float64Array;
  weights: () => Float64Array;
  weightRow: (i: number) => Float64Array;
  topWeight: () => number;
  scoreRange: () => [number, number];
  output: () => Float64Array;
  spread: () => number;
  pair: Pair | null;
  difference: () => Float64Array | null;
  mixed: () => Float64Array | null;
  closed: (i: number, j: number) => boolean;
  closedWhy: (i: number, j: number) => ClosedWhy | null;
  selection: (i: number) => { chosen: number; kept: number; dense: Float64Array } | null;
  cellArithmetic: (i: number, j: number) => CellArithmetic;
  /** The terms the scores are the sum of (DeBERTa's "c2c", "c2p", "p2c"), or [] (derived.js termNames). */
  termNames: string[];
  scoreTerms: (i: number, j: number) => [string, number][] | null;
}

/** One head's thumbnail as the overview draws it. */
export interface Thumb {
  data: ArrayLike<number>;
  width: number;
  height: number;
  max: number;
  averaged?: boolean;
  summary: Record<string, number>;
}

/** Every head's scores, filled in pieces by the heads view (derived.js headJob()). */
export interface HeadJob {
  q: Matrix;
  k: Matrix;
  scale: number;
  softcap: number | null;
  bias: Matrix | null;
  scores: (Float64Array | null)[];
  rows: number[];
}

/** The overview's thumbnails: computed here from every head's scores, or the kernel's (derived.js thumbnails()). */
export type ThumbWork =
  | {
      job: HeadJob;
      temperature: number;
      causal: boolean;
      mask: Mask;
      masks: Mask[] | null;
      cross: boolean;
      /** Each head's learnt sink (one per thumbnail, a model's every layer's heads), or null for none. */
      sinks: (number | null)[] | null;
      thumbs: (Thumb | null)[];
      kernel?: undefined;
      count?: undefined;
    }
  | { job: { q: { rows: number; heads: number }; k: { rows: number } }; thumbs: (Thumb | null)[]; kernel: true; count: number };

/** The names of the arrays the store decodes (a model's every layer's: where an exported page carries them). */
export type ArrayName = {
  [K in keyof State]-?: Exclude<State[K], undefined> extends ArrayValue | MaskValue | null ? K : never;
}[keyof State];

/** Each array as the store decodes it: a mask's as bytes; null where the state may have none. */
export type Decoded<K extends ArrayName> =
  Exclude<State[K], undefined> extends MaskValue | null
    ? Matrix<Uint8Array> | (null extends State[K] ? null : never)
    : Matrix | (null extends State[K] ? null : never);

/** How many rows the last computation of the scores, weights and output computed (derived.js createGrowing). */
export interface Work {
  scores: number;
  weights: number;
  output: number;
}

/** Every number the page draws, derived from the state (derived.js createStore). */
export interface Store {
  /** Every head of an array, decoded (with RoPE or ALiBi where the lab's scores take them). */
  all<K extends ArrayName>(name: K): Decoded<K>;
  /** Every layer's heads of q, k or v, stacked (null for a widget without a model's layers). */
  model(name: "q" | "k" | "v" | "value_basis"): Matrix | null;
  q(): Matrix;
  k(): Matrix;
  v(): Matrix;
  /** The largest |number| of the head's k or v over every token of the text, written so far or not. */
  wholeTop(name: "k" | "v"): number;
  x(): Matrix | null;
  basis(): Matrix | null;
  /** The columns' tokens. */
  keys(): string[];
  cross(): boolean;
  /** A field of the state as it stands: while generating, only the tokens written so far. */
  get: Get;
  /** How many tokens are written so far while generating; 0 when all are. */
  written(): number;
  work(): Work;
  /** How many keys each row reads. */
  m(): number;
  mask(): Mask;
  scale(): number;
  softcap(): number | null;
  /** The head shown's learnt sink's logit, or null. */
  sink(): number | null;
  /** Each thumbnail head's learnt sink (a model's every layer's heads, or the heads of q), or null for none. */
  allSinks(): (number | null)[] | null;
  bias(): Matrix | null;
  terms(): Matrix | null;
  termNames(): string[];
  scoreTerms(i: number, j: number): [string, number][] | null;
  allBias(): Matrix | null;
  scores(): Float64Array;
  weights(): Float64Array;
  weightRow(i: number): Float64Array;
  output(): Float64Array;
  pair(): Pair | null;
  otherWeights(): Float64Array | null;
  difference(): Float64Array | null;
  mixed(): Float64Array | null;
  norms(): Float32Array;
  scoreRange(): [number, number];
  topWeight(): number;
  spread(): number;
  agreement(): ReturnType<typeof import("./attention.js").agreement>;
  headJob(): HeadJob;
  jobIndex(): number;
  thumbnails(): ThumbWork;
  kernelOverview(): boolean;
  modelHeads(): number;
  overviewDue(): boolean;
  layerMasks(): Mask[] | null;
  withQuery(vec: number[]): ArrayValue;
  position(): Position | null;
  numbers(): Shown;
  cellArithmetic(i: number, j: number): CellArithmetic;
  closedWhy(i: number, j: number): ClosedWhy | null;
  closed(i: number, j: number): boolean;
  closedCells(): (i: number, j: number) => boolean;
  selection(i: number): { chosen: number; kept: number; dense: Float64Array } | null;
  /** The compressed KV cache of the head shown (kvcache.js), or null while kv_method is "". */
  kv(): KvCache | null;
  /** What row i loses reading only the keys the cache keeps, or null. */
  kvRow(i: number): { retained: number; change: number; kept: number } | null;
}

/** The compressed KV cache of the head shown (derived.js kv()): the keys kept, one byte each, or why it cannot say. */
export type KvCache = { method: string; budget: number } & import("./kvcache.js").Kept;

declare global {
  interface Uint8ArrayConstructor {
    /** Bytes from base64 (a newer browser's own; payload.js reads them by hand where it is missing). */
    fromBase64?: (text: string) => Uint8Array;
  }
}
