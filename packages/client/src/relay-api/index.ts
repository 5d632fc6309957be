// @meshtrain/client/relay-api: the relay's HTTP API, typed once (types.ts says why not Hono's typed client),
// with the requests every side makes. Isomorphic (global fetch) and light: the web pages import it without
// the rest of the client.
export type * from './types.ts';
export * from './schemas.ts';
export { RelayApiError, readBody, relayApiErrorOf, type RelayApiFailure } from './errors.ts';
export { relayRoot, runPath, type RequestOptions } from './request.ts';
export {
  fetchCheckpointSummary,
  fetchRunConfig,
  fetchRunInfo,
  fetchRunList,
  type RunInfoOptions,
} from './runs.ts';
export { decodeSamples, fetchDataManifest, fetchSamples } from './data.ts';
export { fetchAdmittedList, fetchStoredResult } from './stored-frames.ts';
