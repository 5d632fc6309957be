// GPU memory as the resident backend allocates it. Neither Dawn nor the driver reports memory in use to Node,
// but every buffer of the resident path (onnxruntime-web's, DisTrO's, ours) is created through one GPUDevice
// object, so counting at createBuffer and destroy() measures what the step holds on the GPU. A buffer
// released without destroy() (collected) stays counted: a high-water mark never undercounts.

/** Live and peak bytes from allocation events: pure bookkeeping, no device. */
export class AllocationLedger {
  private liveBytes = 0;
  private highBytes = 0;

  /** A new device: nothing of it is held yet. */
  restart(): void {
    this.liveBytes = 0;
    this.highBytes = 0;
  }

  created(bytes: number): void {
    this.liveBytes += bytes;
    if (this.liveBytes > this.highBytes) this.highBytes = this.liveBytes;
  }

  destroyed(bytes: number): void {
    this.liveBytes = Math.max(0, this.liveBytes - bytes);
  }

  get live(): number {
    return this.liveBytes;
  }

  /** Peak since the last `resetPeak()` or `restart()`. */
  get peak(): number {
    return this.highBytes;
  }

  resetPeak(): void {
    this.highBytes = this.liveBytes;
  }
}

/**
 * A peak meter (memory-probe.ts PeakMeter) over the GPU buffers of whichever device was attached last: probe
 * steps each open a fresh device and attach it before anything is allocated on it.
 */
export class GpuAllocationMeter {
  readonly what = 'GPU buffers of the resident backend (counted at createBuffer and destroy)';
  private readonly ledger = new AllocationLedger();

  /** Counts `device`'s buffers from now on; the previous device's (released with it) no longer count. */
  attach(device: GPUDevice): void {
    this.ledger.restart();
    const ledger = this.ledger;
    const create = device.createBuffer.bind(device);
    // An own property shadows the prototype's method for every caller, onnxruntime-web's wasm glue included.
    device.createBuffer = (descriptor: GPUBufferDescriptor): GPUBuffer => {
      const buffer = create(descriptor);
      const bytes = buffer.size;
      ledger.created(bytes);
      const destroy = buffer.destroy.bind(buffer);
      let gone = false;
      buffer.destroy = () => {
        if (!gone) {
          gone = true;
          ledger.destroyed(bytes);
        }
        destroy();
      };
      return buffer;
    };
  }

  reset(): void {
    this.ledger.resetPeak();
  }

  peak(): number {
    return this.ledger.peak;
  }

  /** Bytes held now on the attached device. */
  live(): number {
    return this.ledger.live;
  }
}
