// HTTP data provider: dataset resolution (DatasetStore) and the route module. Brown preparation is
// @meshtrain/model/node's, shared with node-trainer.
export { DatasetStore, OpenDataset } from './dataset-store.ts';
export type { DatasetStoreOptions, RunDataRef, SplitName, OpenSplit } from './dataset-store.ts';
export { dataRoutes, DEFAULT_MAX_SAMPLES_PER_REQUEST, DEFAULT_MAX_SAMPLE_BYTES } from './routes.ts';
export type { DataRoutesDeps, DataManifestResponse } from './routes.ts';
export { DatasetError } from './errors.ts';
export { apiError, parseRange, serveFile, etagMatches } from './http.ts';
export type { ApiErrorBody, ByteRange, ServeFileOptions } from './http.ts';
