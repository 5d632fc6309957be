// @meshtrain/client: the client state machine (docs/protocol.md "Client state machine") over I/O
// interfaces, for browsers and Node.
export * from './interfaces.ts';
export * from './convert.ts';
export * from './client.ts';
export * from './relay-link.ts';
export * from './relay-api/sources.ts';
export * from './relay-api/index.ts';
export * from './data-fold.ts';
export * from './mesh-network.ts';
export * from './mesh-stats.ts';
// The meter witnesses report from, for shells that show the same figures (the browser tab's page).
export { ThroughputMeter } from './client/throughput.ts';
