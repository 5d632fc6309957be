// Following the coordinator: summaries and light events, replaying deltas and light deltas, admitted lists
// put back into light states, and the follower that checks a replica against the relay's hashes.
export { holdsEvidence, summarizeState } from './summary.ts';
export {
  lightEventsFor,
  lightTick,
  type EvidenceEvent,
  type LightEvent,
  type LightOutcome,
} from './light-replica.ts';
export * from './wire-events.ts';
export * from './replay.ts';
export * from './light-transitions.ts';
export * from './light-delta.ts';
export * from './admitted-lists.ts';
export * from './follower.ts';
