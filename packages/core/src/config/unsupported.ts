// Psyche features a config may name that meshtrain cannot run yet. They parse (the file is a valid Psyche
// config) and are listed with a reason, so the caller can refuse to start the run or start it knowingly.
import type { RunConfigDocument } from './schema.ts';
import type { ConfigNote, RunConfig } from './types.ts';

const DATA_PROVIDER_LATER =
  "meshtrain's data provider serves [model.LLM.data_location.Relay] datasets only, so far";
const CHECKPOINT_STORE = "checkpoints live in the relay's checkpoint store; external stores are not read";

function variantOf(value: string | object): string {
  return typeof value === 'string' ? value : (Object.keys(value)[0] ?? '');
}

export function unsupportedFeatures(run: RunConfig, doc: RunConfigDocument): ConfigNote[] {
  const out: ConfigNote[] = [];
  const llm = run.model.LLM;

  if (doc.run_state !== undefined)
    out.push({ path: 'run_state', reason: "ignored: the relay keeps each run's state itself" });

  if (llm.architecture !== 'HfLlama')
    out.push({
      path: 'model.LLM.architecture',
      reason: `${llm.architecture} is not supported: meshtrain trains its own Llama graph (HfLlama) only`,
    });

  const cp = llm.checkpoint;
  const cpVariant = variantOf(cp);
  if (typeof cp === 'object' && ('Hub' in cp || 'Gcs' in cp || 'P2PGcs' in cp))
    out.push({
      path: `model.LLM.checkpoint.${cpVariant}`,
      reason: `${cpVariant} is not supported: ${CHECKPOINT_STORE}`,
    });
  if (typeof cp === 'object' && 'P2P' in cp)
    out.push({
      path: 'model.LLM.checkpoint.P2P.repo_id',
      reason: `the Hub fallback is not supported: peers and the relay's checkpoint store are the only sources`,
    });

  const data = llm.data_location;
  const dataVariant = variantOf(data);
  if (dataVariant !== 'Relay') {
    const path =
      typeof data === 'string' ? 'model.LLM.data_location' : `model.LLM.data_location.${dataVariant}`;
    out.push({ path, reason: `${dataVariant} data is not supported: ${DATA_PROVIDER_LATER}` });
  }

  if ('AdamW' in llm.optimizer)
    out.push({
      path: 'model.LLM.optimizer.AdamW',
      reason: 'AdamW is not supported for distributed runs: peers exchange DisTrO or SparseLoCo results only',
    });

  const m = run.meshtrain;
  const shapeKeys = [
    'hidden_size',
    'intermediate_size',
    'num_hidden_layers',
    'num_attention_heads',
    'num_key_value_heads',
    'vocab_size',
    'max_position_embeddings',
    'rms_norm_eps',
    'rope_theta',
    'tie_word_embeddings',
  ] as const;
  const fullShape = m.model !== undefined && shapeKeys.every((k) => m.model?.[k] !== undefined);
  if (m.preset === undefined && !fullShape)
    out.push({
      path: 'meshtrain.preset',
      reason:
        'not set: meshtrain builds the model from a preset (micro | tiny | 20m | 125m) and cannot read ' +
        'a model shape from a checkpoint yet',
    });
  return out;
}
