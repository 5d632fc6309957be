// The part of `ws` (v8) the relay uses. The package ships no types and @types/ws is not installed; these
// match ws 8's documented API and what @hono/node-server expects of a WebSocketServer.
declare module 'ws' {
  import type { IncomingMessage } from 'node:http';
  import type { Duplex } from 'node:stream';
  import type { WebSocketLike } from '@hono/node-server';

  export interface ServerOptions {
    noServer?: boolean;
    /** Largest message accepted; a bigger one closes the connection with 1009. */
    maxPayload?: number;
  }

  export class WebSocketServer {
    constructor(options: ServerOptions);
    readonly options: ServerOptions;
    readonly clients: Set<{ terminate(): void }>;
    on(event: string, listener: (...args: never[]) => void): this;
    off(event: string, listener: (...args: never[]) => void): this;
    emit(event: string, ...args: unknown[]): boolean;
    handleUpgrade(
      request: IncomingMessage,
      socket: Duplex,
      head: Buffer,
      callback: (ws: WebSocketLike) => void,
    ): void;
    close(): void;
  }
}
