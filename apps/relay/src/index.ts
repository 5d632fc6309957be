// apps/relay: the coordinator service. Programmatic entry points for tools that start a relay in-process
// (node-trainer local-testnet, e2e) and for clients that sign admin requests or checkpoint uploads.
export type { Command } from './command.ts';
export { startRelayServer } from './server.ts';
export type { RelayServerOptions, RunningRelay } from './server.ts';
export { Relay, RelayError, PERMISSIONLESS } from './relay.ts';
export type { CreateRunOptions, RelayOptions, RelayLog, SessionHandle } from './relay.ts';
export { RunHost } from './run-host.ts';
export { RelayStore } from './store.ts';
export { CoordinatorSession, CLOSE, MAX_BAD_FRAMES_IN_A_ROW } from './session.ts';
export { createRelayApp } from './app.ts';
export { relayServices, startP2P, checkpointCanonical, CHECKPOINT_SIGNATURE_TAG } from './wiring.ts';
export {
  adminCanonical,
  signAdminRequest,
  ADMIN_SIGNATURE_TAG,
  ADMIN_WINDOW_MS,
  HEADER_KEY,
  HEADER_SIGNATURE,
  HEADER_TIMESTAMP,
} from './middleware/admin-auth.ts';
export { loadOrCreateRelayIdentity } from './identity.ts';
