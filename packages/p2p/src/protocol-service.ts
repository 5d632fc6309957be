// A request/response protocol served on a host: `start` registers its stream handler once, `stop` removes it.
// The blob and checkpoint exchanges share this lifecycle and the two options that shape it.
import type { Stream } from '@libp2p/interface';
import type { ProtocolHost } from './host.ts';

export interface ProtocolServiceOptions {
  /** Serve and fetch over relayed (limited) connections too (default true: the relay is the guaranteed path). */
  allowLimitedConnections?: boolean;
  /** Concurrent inbound streams of the protocol per connection. */
  maxInboundStreams?: number;
}

export abstract class ProtocolService {
  protected readonly host: ProtocolHost;
  protected readonly allowLimited: boolean;
  private readonly protocol: string;
  private readonly maxInboundStreams: number;
  private started = false;

  constructor(
    host: ProtocolHost,
    protocol: string,
    options: ProtocolServiceOptions,
    defaultMaxInbound: number,
  ) {
    this.host = host;
    this.protocol = protocol;
    this.allowLimited = options.allowLimitedConnections ?? true;
    this.maxInboundStreams = options.maxInboundStreams ?? defaultMaxInbound;
  }

  async start(): Promise<void> {
    if (this.started) return;
    await this.host.handle(this.protocol, (stream) => this.serve(stream), {
      maxInboundStreams: this.maxInboundStreams,
      runOnLimitedConnection: this.allowLimited,
    });
    this.started = true;
  }

  async stop(): Promise<void> {
    if (!this.started) return;
    this.started = false;
    await this.host.unhandle(this.protocol);
  }

  /** Answers one inbound stream. */
  protected abstract serve(stream: Stream): Promise<void>;
}
