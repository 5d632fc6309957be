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
export type {
  CheckpointMeta,
  CheckpointFile,
  FileInfo,
  SaveCheckpointInput,
  SaveEncodedInput,
} from './store.ts';
export { ensureInitialCheckpoint, INITIAL_STEP } from './initial.ts';
export { checkpointRoutes, summarize, MAX_UPLOADS_PER_RUN } from './routes.ts';
export type {
  CheckpointRoutesDeps,
  CheckpointSummary,
  UploadAdmission,
  UploadRefusal,
  UploadRequest,
} from './routes.ts';
export { BadCheckpointError, runCheckpointJob } from './off-thread.ts';
export type { CheckpointJob, EncodedJob } from './off-thread.ts';
