// Requests over one relay connection: the relay numbers every frame a connection sends (1, 2, …) and answers
// each with an Ack or a ControlError carrying that number, so the link counts its own sends and matches
// replies by number.

/** A refusal from the relay: `code` is its ControlError code (core's coordinator codes included). */
export class RelayRefusal extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(`${code}: ${message}`);
    this.name = 'RelayRefusal';
    this.code = code;
  }
}

interface Pending {
  resolve: () => void;
  reject: (e: Error) => void;
}

/** The requests of the current connection that wait for their Ack or ControlError. */
export class PendingRequests {
  private sent = 0;
  private readonly pending = new Map<number, Pending>();

  /** A new connection numbers its frames from 1 again. */
  restartNumbering(): void {
    this.sent = 0;
  }

  /** Sends `frame` as the connection's next request; resolves on its Ack, rejects on its ControlError. */
  send(ws: WebSocket, frame: Uint8Array): Promise<void> {
    const id = ++this.sent;
    const p = new Promise<void>((resolve, reject) => this.pending.set(id, { resolve, reject }));
    ws.send(frame as Uint8Array<ArrayBuffer>);
    return p;
  }

  /** The relay's answer to request `id`: an Ack (null) or a refusal. Unknown ids are ignored. */
  settle(id: number, err: Error | null): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (err) p.reject(err);
    else p.resolve();
  }

  /** The connection ended: no answer will come to anything still pending. */
  failAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}
