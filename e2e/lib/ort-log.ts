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

/** Where one session's nodes went, from the "Node placements" block ORT prints at logSeverityLevel 0. */
export interface NodePlacement {
  /** Node count per execution provider, e.g. { WebGpuExecutionProvider: 563, CPUExecutionProvider: 2 }. */
  counts: Record<string, number>;
  /**
   * "OpType (node name)" per execution provider. ORT lists nodes only when they are split across providers;
   * with "All nodes placed on [EP]" the list is empty.
   */
  nodes: Record<string, string[]>;
}

/**
 * Parses every "Node placements" block in the given console texts, one record per session created, in order.
 * ORT prints either "All nodes placed on [WebGpuExecutionProvider]. Number of nodes: N" or, per provider,
 * "Node(s) placed on [EP]. Number of nodes: N" followed by one "  OpType (node name)" line per node.
 */
export function parseNodePlacements(texts: readonly string[]): NodePlacement[] {
  const sessions: NodePlacement[] = [];
  let current: NodePlacement | undefined;
  let ep: string | undefined;
  for (const text of texts) {
    for (const line of stripAnsi(text).split('\n')) {
      if (!line.includes('VerifyEachNodeIsAssignedToAnEp]')) {
        // The block is contiguous; anything else ends it.
        ep = undefined;
        continue;
      }
      if (line.endsWith('] Node placements')) {
        current = { counts: {}, nodes: {} };
        sessions.push(current);
        ep = undefined;
        continue;
      }
      if (current === undefined) continue;
      const header = /placed on \[(\w+)\]\. Number of nodes: (\d+)/.exec(line);
      if (header !== null) {
        ep = header[1] as string;
        current.counts[ep] = (current.counts[ep] ?? 0) + Number(header[2]);
        current.nodes[ep] ??= [];
        continue;
      }
      const node = /VerifyEachNodeIsAssignedToAnEp\]\s+(\S+ \(.*\))\s*$/.exec(line);
      if (node !== null && ep !== undefined) current.nodes[ep]?.push(node[1] as string);
    }
  }
  return sessions;
}
