// Names the build defines (scripts/build.mjs), for the type checker.

/** The painting worker's bundle, as text. */
declare const PAINT_WORKER_SOURCE: string;
