import { getMetadataStorage, validateSync, type ValidationError } from 'class-validator';

/** A boot-stopping configuration problem; its message is the one line the operator sees. */
export class BootError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BootError';
  }
}

export function envNameFor(prefix: string, key: string): string {
  const snake = key.replace(/([a-z0-9])([A-Z])/g, '$1_$2').replace(/[^A-Za-z0-9]+/g, '_');
  return `${prefix}_${snake}`.toUpperCase();
}

function validatorNames(cls: new () => object, key: string): Set<string> {
  return new Set<string>(
    getMetadataStorage()
      .getTargetValidationMetadatas(cls, '', true, false)
      .filter((m) => m.propertyName === key)
      .map((m) => m.name ?? ''),
  );
}

/**
 * A key without a default (optional) takes its type from its validators, so `GW_FLV_OUT_PUBLIC_PORT=8081` is a number
 * while an optional string key keeps "1234" a string.
 */
function sampleFromValidators(names: Set<string>): unknown {
  if (names.has('isInt') || names.has('isNumber') || names.has('min') || names.has('max')) return 0;
  if (names.has('isBoolean')) return false;
  if (names.has('isArray')) return [];
  if (names.has('isObject')) return {};
  return undefined;
}

type Coerced = { ok: true; value: unknown } | { ok: false; expected: string };

/**
 * Environment strings take the type of the key's default so `GW_X_PORT=7081` validates as a number. A string that
 * cannot become that type is refused here, by what it should have been: left to the validators, `abc` for a port
 * would read "must not be greater than 65535".
 */
function coerce(raw: string, sample: unknown, integer: boolean): Coerced {
  if (typeof sample === 'number') {
    const n = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(n)) return { ok: false, expected: integer ? 'an integer' : 'a number' };
    if (integer && !Number.isInteger(n)) return { ok: false, expected: 'an integer' };
    return { ok: true, value: n };
  }
  if (typeof sample === 'boolean') {
    if (/^(true|1|yes|on)$/i.test(raw.trim())) return { ok: true, value: true };
    if (/^(false|0|no|off)$/i.test(raw.trim())) return { ok: true, value: false };
    return { ok: false, expected: 'a boolean (true/false, yes/no, on/off, 1/0)' };
  }
  if (Array.isArray(sample)) {
    const v = parseJson(raw);
    return Array.isArray(v) ? { ok: true, value: v } : { ok: false, expected: 'a JSON array (e.g. ["a","b"])' };
  }
  if (sample !== null && typeof sample === 'object') {
    const v = parseJson(raw);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? { ok: true, value: v } : { ok: false, expected: 'a JSON object (e.g. {"a":1})' };
  }
  // an untyped optional key: JSON when it looks like JSON, else the string as given
  if (sample === undefined && /^[[{]/.test(raw.trim())) {
    const v = parseJson(raw);
    return { ok: true, value: v === undefined ? raw : v };
  }
  return { ok: true, value: raw };
}

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}

/** values of secret-bearing keys stay out of messages: they end up in terminals and service logs */
const SECRET_KEY = /pass|secret|token|url|key/i;

function firstProblem(errors: ValidationError[], path = ''): { key: string; text: string; value: unknown } | undefined {
  for (const e of errors) {
    const key = path ? `${path}.${e.property}` : e.property;
    if (e.constraints) {
      const text = Object.values(e.constraints)[0];
      return { key, text, value: e.value };
    }
    if (e.children?.length) {
      const inner = firstProblem(e.children, key);
      if (inner) return inner;
    }
  }
  return undefined;
}

export interface ConfigSource {
  /** e.g. "sites/default/site.json: plugin flv-out" */
  where: string;
  /** e.g. GW_FLV_OUT */
  envPrefix: string;
  /** extra env names per key */
  envAliases?: Record<string, string | undefined>;
  env: NodeJS.ProcessEnv;
}

/**
 * Builds a config object: class defaults, then the site file's values, then environment overrides,
 * validated with class-validator. Unknown keys and bad values throw a BootError naming the key.
 */
export function buildConfig<C extends object>(cls: new () => C, fileValues: unknown, src: ConfigSource): C {
  const inst = new cls() as Record<string, unknown>;
  const known = new Set(Object.keys(inst));
  const origin = new Map<string, string>();
  if (fileValues !== undefined && fileValues !== null) {
    if (typeof fileValues !== 'object' || Array.isArray(fileValues)) {
      throw new BootError(`${src.where}: config must be a JSON object`);
    }
    for (const [k, v] of Object.entries(fileValues as Record<string, unknown>)) {
      if (!known.has(k)) throw new BootError(`${src.where}: key ${k}: unknown key (known: ${[...known].join(', ') || 'none'})`);
      inst[k] = v;
    }
  }
  for (const k of known) {
    const names = [src.envAliases?.[k], envNameFor(src.envPrefix, k)].filter((n): n is string => !!n);
    for (const name of names) {
      const raw = src.env[name];
      if (raw === undefined) continue;
      const validators = validatorNames(cls, k);
      const c = coerce(raw, inst[k] === undefined ? sampleFromValidators(validators) : inst[k], validators.has('isInt'));
      if (!c.ok) {
        const shown = SECRET_KEY.test(k) ? 'the value (hidden)' : `'${raw.length > 60 ? `${raw.slice(0, 60)}…` : raw}'`;
        throw new BootError(`${src.where}: key ${k} (${name}): ${shown} is not ${c.expected}`);
      }
      inst[k] = c.value;
      origin.set(k, name);
      break;
    }
  }
  const errors = validateSync(inst, { forbidUnknownValues: false });
  const p = firstProblem(errors);
  if (p) {
    const top = p.key.split('.')[0];
    const from = origin.has(top) ? ` from ${origin.get(top)}` : '';
    const shown = SECRET_KEY.test(p.key) ? '(value hidden)' : JSON.stringify(p.value);
    throw new BootError(`${src.where}: key ${p.key}: ${p.text} (got ${shown}${from})`);
  }
  return inst as C;
}

/** `GW_` variables that configure no key but are read elsewhere (site choice, debugging, test tools) */
export const NON_CONFIG_ENV: readonly string[] = [
  'GW_SITE',
  'GW_DEBUG',
  'GW_TEST_LOG',
  'GW_CHROMIUM',
  'GW_FIXTURES_DIR',
  'GW_FUZZ_VERBOSE',
  'GW_POISON_PAYLOADS',
];

/** What `checkEnvNames` needs of a plugin on the site: a `PluginDefinition` will do. */
export interface EnvScope {
  name: string;
  config?: new () => object;
  /** extra variable names per key (flv-out's GW_FLV_PORT) */
  env?: Partial<Record<string, string>>;
}

/** A `GW_` variable that configures nothing on this site; the kernel logs `message` as a warning. */
export interface StrayEnv {
  name: string;
  message: string;
}

/** `PUBLIC_PROT` -> `publicProt`: the key a variable's tail would name */
function keyOf(tail: string): string {
  return tail.toLowerCase().replace(/_+([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length]!;
}

/** the candidate nearest to `name`, when near enough to be the one meant */
function closest(name: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of candidates) {
    const d = distance(name, c);
    if (d < bestD) [best, bestD] = [c, d];
  }
  return best !== undefined && bestD <= Math.max(2, Math.floor(name.length / 4)) ? best : undefined;
}

/**
 * Checks the environment's `GW_` names against the site, as `buildConfig` checks the site file's keys. A variable
 * under a plugin's prefix (`GW_FLV_OUT_`) that names none of its keys or aliases is a typo that would otherwise be
 * ignored in silence: it stops boot. Prefixes can nest (plugins `flv` and `flv-out`): the longest one of a plugin on
 * the site decides. A variable under no plugin's prefix that is no kernel key may be meant for a plugin this site
 * does not run, so it is only returned, for the kernel to log once its logger exists.
 */
export function checkEnvNames(env: NodeJS.ProcessEnv, siteFile: string, gateway: new () => object, plugins: ReadonlyArray<EnvScope>): StrayEnv[] {
  const known = new Set<string>(NON_CONFIG_ENV);
  const kernelNames = Object.keys(new gateway()).map((k) => envNameFor('GW', k));
  for (const n of kernelNames) known.add(n);
  const scopes = plugins.map((p) => {
    const prefix = envNameFor('GW', p.name);
    const names = new Set<string>();
    for (const k of p.config ? Object.keys(new p.config()) : []) names.add(envNameFor(prefix, k));
    for (const alias of Object.values(p.env ?? {})) if (alias) names.add(alias);
    for (const n of names) known.add(n);
    return { plugin: p.name, prefix: `${prefix}_`, names };
  });
  const stray: StrayEnv[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith('GW_') || known.has(name)) continue;
    const scope = scopes.filter((s) => name.startsWith(s.prefix)).sort((a, b) => b.prefix.length - a.prefix.length)[0];
    if (scope) {
      const key = keyOf(name.slice(scope.prefix.length));
      const near = closest(name, scope.names);
      const hint = near ? `did you mean ${near}?` : scope.names.size ? `its variables: ${[...scope.names].join(', ')}` : 'it has no config keys';
      throw new BootError(`${siteFile}: ${name}: no key '${key}' in plugin ${scope.plugin} (${hint})`);
    }
    const near = closest(name, [...kernelNames, ...scopes.flatMap((s) => [...s.names])]);
    stray.push({
      name,
      message: `environment variable ${name} sets no gateway key and no key of a plugin on this site: ignored${near ? ` (did you mean ${near}?)` : ''}`,
    });
  }
  return stray;
}

/** `port`, `httpPort`, `livePort2013`, `replayPort2019`, ...: the keys a plugin binds a listener with */
const PORT_KEY = /(^p|P)ort(2013|2019)?$/;

/**
 * The port-like keys of a config class that have a numeric default, each set to 0 (a free port). Keys named
 * `public…` are left out: they say what is advertised (a NAT or TLS front), not what is bound, and follow the
 * bound port when unset.
 */
export function freePortOverrides(cls: (new () => object) | undefined): Record<string, number> {
  if (!cls) return {};
  const defaults = new cls() as Record<string, unknown>;
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(defaults)) {
    if (typeof v === 'number' && PORT_KEY.test(k) && !k.startsWith('public')) out[k] = 0;
  }
  return out;
}
