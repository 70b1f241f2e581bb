import * as v8 from 'node:v8';
import * as vm from 'node:vm';

/**
 * A full garbage collection on demand, for tests that check what is still held rather than what the collector has
 * not reached yet. (--expose-gc set at run time, then `gc` taken from a fresh context, where V8 installs it.)
 */
export function collector(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}
