// Node-only entry point (`@meshtrain/model/node`): file-system code around the pure formats of
// `@meshtrain/model`, shared by node-trainer and the relay. Nothing under src/ outside src/node may import
// node: modules, so the main entry stays browser-safe.
export * from './fs.ts';
export * from './dataset/errors.ts';
export * from './dataset/prepare.ts';
export * from './dataset/load.ts';
export * from './dataset/brown.ts';
