// The protocol's rules for messages a host receives: admission (message + state → coordinator event or typed
// refusal), the result shape a run's model allows, and parameter-hash agreement. Pure, like the coordinator.
export * from './refusal.ts';
export * from './result-shape.ts';
export * from './admission.ts';
export * from './param-hash.ts';
export * from './verification.ts';
export * from './origin.ts';
