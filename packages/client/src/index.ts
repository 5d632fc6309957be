// @meshtrain/client: the client state machine (psyche-spec §3) over I/O interfaces, for browsers and Node.
export * from './interfaces.ts';
export * from './convert.ts';
export * from './client.ts';
export * from './local-hub.ts';
export * from './relay-link.ts';
export * from './relay-http.ts';
export * from './data-fold.ts';
export * from './mesh-network.ts';
