// Dedicated module worker: answers the page's forwarded scenario calls (see page.ts) with scenarios.ts.
import { scenarios } from './scenarios.ts';
import type { WorkerReply, WorkerRequest } from './protocol.ts';

const table = scenarios as unknown as Record<string, (args: unknown) => Promise<unknown>>;

self.onmessage = async (ev: MessageEvent<WorkerRequest>) => {
  const { id, name, args } = ev.data;
  let reply: WorkerReply;
  try {
    const run = table[name];
    if (run === undefined) throw new Error(`no scenario "${name}"`);
    reply = { id, ok: true, value: await run(args) };
  } catch (err) {
    reply = { id, ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) };
  }
  self.postMessage(reply);
};
