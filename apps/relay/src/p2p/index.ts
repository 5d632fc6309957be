// The relay's libp2p node behind the public HTTP port (stack.md §6.5).
export { startRelayP2P, loadOrCreateNodeKey } from './relay-p2p.ts';
export type { RelayP2P, RelayP2POptions } from './relay-p2p.ts';
export { attachUpgradeDispatcher } from './upgrade-dispatcher.ts';
export type { UpgradeDispatcher, UpgradeDispatcherOptions, UpgradeListener } from './upgrade-dispatcher.ts';
