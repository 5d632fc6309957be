/**
 * @meshtrain/p2p, Node entry point: everything, including the Node factories (relay, node-trainer peer).
 * Browser code imports `src/browser.ts` instead, which has the browser factory and the same shared API.
 */
export * from './shared.ts';
export * from './node.ts';
export * from './websockets-guard.ts';
