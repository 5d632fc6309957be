// `/healthz` and the plain HTML status page at `/` (the web app replaces the page later).
import { Hono } from 'hono';
import type { Relay } from '../relay.ts';
import { runSummary } from './runs.ts';

function esc(v: unknown): string {
  return String(v).replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

export function statusRoutes(relay: Relay): Hono {
  const app = new Hono();
  app.get('/healthz', (c) => c.json({ ok: true }));
  app.get('/', (c) => {
    const rows = relay.runList().map((h) => {
      const s = runSummary(relay, h);
      return `<tr><td><a href="/api/runs/${encodeURIComponent(h.runId)}">${esc(h.runId)}</a></td><td>${esc(s.run_state)}</td><td>${esc(s.epoch)}</td><td>${esc(s.step)} / ${esc(s.total_steps)}</td><td>${esc(s.healthy_clients)}</td><td>${esc(s.members)}</td><td>${esc(s.connected)}</td><td><code>/ws/runs/${esc(h.runId)}</code></td></tr>`;
    });
    const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="2"><title>meshtrain relay</title>
<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}</style>
</head><body><h1>meshtrain relay</h1>
<table><thead><tr><th>run</th><th>phase</th><th>epoch</th><th>step</th><th>healthy clients</th><th>members</th><th>connected</th><th>WebSocket</th></tr></thead>
<tbody>${rows.join('\n') || '<tr><td colspan="8">no runs</td></tr>'}</tbody></table>
<p>API: <a href="/api/runs">/api/runs</a> · <a href="/healthz">/healthz</a></p>
</body></html>`;
    return c.html(html);
  });
  return app;
}
