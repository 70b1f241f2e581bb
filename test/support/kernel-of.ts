import type { Kernel } from '../../core/kernel';
import { KERNEL, type TestGateway } from '../../plugin-sdk/testkit';

/** The kernel behind a test gateway: for core's tests, which look at what plugins cannot (connections, registry). */
export function kernelOf(gw: TestGateway): Kernel {
  return (gw as unknown as Record<symbol, Kernel>)[KERNEL];
}
