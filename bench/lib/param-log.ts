// Which parameters a client's train steps ran at: a TrainingBackend wrapper that hashes every parameter set it
// is given, noting how many client events came before, so that a `trained` or `verified` event can be matched
// with the parameters its gradient was computed at (the last load before the event). bench:integrity uses it
// to check the premise of verification: a verifier holds exactly the parameters the trainer trained on.
import type { ClientEvent, ParameterMap, TrainingBackend } from '@meshtrain/client';

export interface ParamLoad {
  /** events.length when the parameters were loaded. */
  at: number;
  hash: string;
}

/** FNV-1a over the float bits of every parameter, in name order: equal exactly when the parameters are. */
export function paramsHash(params: ParameterMap): string {
  let h = 0x811c9dc5;
  for (const name of [...params.keys()].sort()) {
    const v = params.get(name) as Float32Array;
    const bits = new Uint32Array(v.buffer, v.byteOffset, v.length);
    for (let i = 0; i < bits.length; i++) {
      h ^= bits[i] as number;
      h = Math.imul(h, 0x01000193);
    }
  }
  return (h >>> 0).toString(16).padStart(8, '0');
}

export function loggingBackend(
  backend: TrainingBackend,
  events: readonly ClientEvent[],
  loads: ParamLoad[],
): TrainingBackend {
  const out: TrainingBackend = {
    description: backend.description,
    maxRows: backend.maxRows,
    loadParams: async (p) => {
      loads.push({ at: events.length, hash: paramsHash(p) });
      return backend.loadParams(p);
    },
    trainStep: (tokens, rows) => backend.trainStep(tokens, rows),
  };
  if (backend.evalLoss) out.evalLoss = backend.evalLoss.bind(backend);
  return out;
}

/** The parameters loaded last before event `index` of the same client. */
export function paramsBefore(loads: readonly ParamLoad[], index: number): string | null {
  let out: string | null = null;
  for (const l of loads) if (l.at <= index) out = l.hash;
  return out;
}
