// The relay's HTTP API replies and request bodies as types, inferred from the zod schemas in schemas.ts (one
// definition for every side): the relay's route handlers are typed against them (`satisfies` or explicit return
// types), and node-trainer, the browser worker, the web pages, the testnet, e2e and bench read them through
// this module. Type-only: importing it costs the browser bundle nothing.
import type { z } from 'zod';
import type * as S from './schemas.ts';

export type ApiErrorBody = z.infer<typeof S.ApiErrorBodySchema>;
export type RoundProgress = z.infer<typeof S.RoundProgressSchema>;
export type RunSummary = z.infer<typeof S.RunSummarySchema>;
export type RunList = z.infer<typeof S.RunListSchema>;
export type WitnessReport = z.infer<typeof S.WitnessReportSchema>;
export type ClientRow = z.infer<typeof S.ClientRowSchema>;
export type AcceptedBatch = z.infer<typeof S.AcceptedBatchSchema>;
export type RoundRow = z.infer<typeof S.RoundRowSchema>;
export type StepReports = z.infer<typeof S.StepReportsSchema>;
export type GrantRow = z.infer<typeof S.GrantRowSchema>;
export type ParamHashReport = z.infer<typeof S.ParamHashReportSchema>;
export type TransitionRow = z.infer<typeof S.TransitionRowSchema>;
export type RunDetail = z.infer<typeof S.RunDetailSchema>;
export type RunReply = z.infer<typeof S.RunReplySchema>;
export type GrantReply = z.infer<typeof S.GrantReplySchema>;
export type GrantRequest = z.infer<typeof S.GrantRequestSchema>;
export type DelegatesRequest = z.infer<typeof S.DelegatesRequestSchema>;
export type CheckpointSummary = z.infer<typeof S.CheckpointSummarySchema>;
export type DataSplit = z.infer<typeof S.DataSplitSchema>;
export type DataOrder = z.infer<typeof S.DataOrderSchema>;
export type DataManifestResponse = z.infer<typeof S.DataManifestResponseSchema>;
