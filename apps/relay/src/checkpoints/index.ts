// Checkpoint store: files on disk, seeded initial weights, and the route module. The parameter hash is
// @meshtrain/model's parameterHashHex, shared with the clients that report it.
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
export { ensureInitialCheckpoint, INITIAL_STEP } from './initial.ts';
export { checkpointRoutes, summarize, DEFAULT_MAX_UPLOAD_BYTES } from './routes.ts';
export type {
  CheckpointRoutesDeps,
  CheckpointSummary,
  CheckpointUpload,
  CheckpointUploadVerifier,
  UploadVerdict,
} from './routes.ts';
