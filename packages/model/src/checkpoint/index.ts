export * from './errors.ts';
export * from './dtype.ts';
export * from './safetensors.ts';
export * from './hf-config.ts';
export * from './checkpoint.ts';
export * from './param-hash.ts';
