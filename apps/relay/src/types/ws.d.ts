// The part of `ws` (v8) the relay uses. The package ships no types and @types/ws is not installed; these
// match ws 8's documented API and what @hono/node-server expects of a WebSocketServer.
declare module 'ws' {
  import type { IncomingMessage } from 'node:http';
  import type { Duplex } from 'node:stream';

  export interface ServerOptions {
    noServer?: boolean;
    /** Largest message accepted; a bigger one closes the connection with 1009. */
    maxPayload?: number;
    perMessageDeflate?: boolean;
  }

  export interface ClientOptions {
    maxPayload?: number;
    perMessageDeflate?: boolean;
  }

  export type RawData = Buffer | ArrayBuffer | Buffer[];

  export class WebSocket {
    static readonly CONNECTING: 0;
    static readonly OPEN: 1;
    static readonly CLOSING: 2;
    static readonly CLOSED: 3;
    constructor(address: string, options?: ClientOptions);
    readonly readyState: 0 | 1 | 2 | 3;
    readonly bufferedAmount: number;
    readonly isPaused: boolean;
    readonly protocol: string;
    send(
      data: RawData | string | ArrayBufferView,
      options?: { binary?: boolean; compress?: boolean },
      cb?: (err?: Error) => void,
    ): void;
    close(code?: number, reason?: string): void;
    terminate(): void;
    pause(): void;
    resume(): void;
    on(event: 'message', listener: (data: RawData, isBinary: boolean) => void): this;
    on(event: 'close', listener: (code: number, reason: Buffer) => void): this;
    on(event: 'error', listener: (err: Error) => void): this;
    off(event: string, listener: (...args: never[]) => void): this;
    once(event: 'open', listener: () => void): this;
    once(event: 'close', listener: (code: number, reason: Buffer) => void): this;
    once(event: 'error', listener: (err: Error) => void): this;
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
      callback: (ws: WebSocket) => void,
    ): void;
    close(): void;
  }
}
