import * as path from 'node:path';

/**
 * Names for readers that gave none (ReaderOptions.reader) and whose sinks cannot say when they are done with
 * payloads (no MediaReader.holdsPayloads): such a reader turns payload memory reuse off for its stream, and the log
 * and /metrics say which reader it was. Readers are not subscribed through a plugin's own view of the bus (a plugin
 * gets streams from sessions, stages and `ctx.bus` alike), so the bus finds the plugin from the code that called
 * subscribe: one stack capture at such a reader's subscribe, never per unit.
 */

/** a plugin's folder: plugins/<name>/, or an SDK example's */
const PLUGIN_DIR = /[\\/](?:plugins|plugin-sdk[\\/]examples)[\\/]([^\\/]+)[\\/]/;
/** the bus and the SDK subscribe on a plugin's behalf (a stage's helper, a via): the caller is further out */
const ON_BEHALF = /[\\/](?:core[\\/]bus|plugin-sdk)[\\/]/;
const PACKAGE = /[\\/]node_modules[\\/]((?:@[^\\/]+[\\/])?[^\\/]+)[\\/]/;
/** frames followed: subscribe is called a few calls deep (a via's stage, an SDK helper) */
const FRAMES = 24;

/** The plugin (or else the file) whose code is calling now, from outside the bus and the SDK. */
export function callerName(): string {
  // eslint-disable-next-line @typescript-eslint/unbound-method -- V8's hook, put back as it was; it is never called through this name
  const prepare = Error.prepareStackTrace;
  const limit = Error.stackTraceLimit;
  let files: string[] = [];
  try {
    Error.stackTraceLimit = FRAMES;
    // the call sites' file names, without formatting the whole trace
    Error.prepareStackTrace = (_err, sites) => sites.map((s) => s.getFileName() ?? '');
    const holder: { stack?: unknown } = {};
    Error.captureStackTrace(holder, callerName);
    // V8 prepares the trace when it is first read
    const stack = holder.stack;
    if (Array.isArray(stack)) files = stack as string[];
  } finally {
    Error.prepareStackTrace = prepare;
    Error.stackTraceLimit = limit;
  }
  return nameFromFiles(files);
}

/**
 * The first file of `files` (innermost first) outside the bus and the SDK, as a name: its plugin's folder name
 * (plugins/hls-out/src/forms.js: 'hls-out'), its npm package, or its own name; 'unnamed' when there is none.
 */
export function nameFromFiles(files: readonly string[]): string {
  for (const f of files) {
    // Node's own modules ('node:internal/...') and frames without a file
    if (f === '' || f.startsWith('node:') || !/[\\/]/.test(f)) continue;
    const plugin = PLUGIN_DIR.exec(f);
    if (plugin) return plugin[1];
    if (ON_BEHALF.test(f)) continue;
    const pkg = PACKAGE.exec(f);
    if (pkg) return pkg[1].replace(/\\/g, '/');
    return path.basename(f).replace(/\.[cm]?[jt]s$/, '');
  }
  return 'unnamed';
}
