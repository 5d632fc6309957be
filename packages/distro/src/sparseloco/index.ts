// SparseLoCo (inner AdamW steps, error feedback, chunk-wise top-k, n-bit quantisation, exact outer step).
export * from './adamw.ts';
export * from './quantize.ts';
export * from './outer.ts';
export * from './ops.ts';
export * from './round.ts';
