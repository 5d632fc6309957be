// Checkpoint store: files on disk, seeded initial weights, the parameter hash, and the route module.
export {
  CheckpointStore,
  CheckpointConflictError,
  runDirName,
  CHECKPOINT_FILES,
  WEIGHTS_FILE,
  CONFIG_FILE,
  META_FILE,
  DEFAULT_KEEP,
} from './store.ts';
export type { CheckpointMeta, CheckpointFile, FileInfo, SaveCheckpointInput } from './store.ts';
export { computeParamHash } from './param-hash.ts';
export { ensureInitialCheckpoint, modelConfigForRun, RunModelError, INITIAL_STEP } from './initial.ts';
export { checkpointRoutes, summarize, DEFAULT_MAX_UPLOAD_BYTES } from './routes.ts';
export type {
  CheckpointRoutesDeps,
  CheckpointSummary,
  CheckpointUpload,
  CheckpointUploadVerifier,
  UploadVerdict,
} from './routes.ts';
