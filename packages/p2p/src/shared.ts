/** Environment-independent API: protocols, stores, errors, MeshNode. Re-exported by index.ts and browser.ts. */
export * from './errors.ts';
export * from './hash.ts';
export * from './blob-store.ts';
export * from './blob-exchange.ts';
export * from './checkpoint-manifest.ts';
export * from './checkpoint-exchange.ts';
export * from './mesh-node.ts';
export * from './direct-links.ts';
export type { PeerTarget, ProtocolHost } from './host.ts';
export type { PeerServices, RelayClientOptions } from './compose.ts';
