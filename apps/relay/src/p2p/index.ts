// The relay's libp2p node behind the public HTTP port (docs/architecture.md "Runtime notes").
export { startRelayP2P, loadOrCreateNodeKey } from './relay-p2p.ts';
export type { RelayP2P, RelayP2POptions } from './relay-p2p.ts';
export { attachUpgradeDispatcher } from './upgrade-dispatcher.ts';
export type { UpgradeDispatcher, UpgradeDispatcherOptions, UpgradeListener } from './upgrade-dispatcher.ts';
