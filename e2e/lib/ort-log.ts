// Reading onnxruntime's own log lines out of a page's console.
//
// ORT's wasm build writes every log line to stderr, which Emscripten maps to console.error, so a verbose session
// floods the console with "errors" that are really info. Lines look like
//   "2026-11-21 18:01:46.91 [V:onnxruntime:, session_state.cc:1377 VerifyEachNodeIsAssignedToAnEp] Node placements"
// with severity V(erbose), I(nfo), W(arning), E(rror), F(atal); errors may be wrapped in ANSI colour codes.

// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g;
const ORT_LINE = /\[([VIWEF]):onnxruntime:/;

/** Removes terminal colour codes ORT adds to error lines. */
export function stripAnsi(text: string): string {
  return text.replace(ANSI, '');
}

/** ORT's severity letter for a console line it printed, or undefined for anything else. */
export function ortSeverity(text: string): 'V' | 'I' | 'W' | 'E' | 'F' | undefined {
  return ORT_LINE.exec(text)?.[1] as 'V' | 'I' | 'W' | 'E' | 'F' | undefined;
}

/** Nodes per execution provider for one session, as printed under "Node placements" (logSeverityLevel 0). */
export type NodePlacement = Record<string, number>;

/**
 * Parses every "Node placements" block in the given console texts, one record per session created, in order.
 * ORT prints either "All nodes placed on [WebGpuExecutionProvider]. Number of nodes: N" or one
 * "Node(s) placed on [EP]. Number of nodes: N" line per EP followed by the node list.
 */
export function parseNodePlacements(texts: readonly string[]): NodePlacement[] {
  const sessions: NodePlacement[] = [];
  let current: NodePlacement | undefined;
  for (const text of texts) {
    for (const line of stripAnsi(text).split('\n')) {
      if (line.includes('VerifyEachNodeIsAssignedToAnEp] Node placements')) {
        current = {};
        sessions.push(current);
        continue;
      }
      const m = /placed on \[(\w+)\]\. Number of nodes: (\d+)/.exec(line);
      if (m !== null && current !== undefined) {
        const ep = m[1] as string;
        current[ep] = (current[ep] ?? 0) + Number(m[2]);
      }
    }
  }
  return sessions;
}
