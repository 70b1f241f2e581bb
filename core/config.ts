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

/**
 * A key without a default (optional) takes its type from its validators, so `GW_FLV_OUT_PUBLIC_PORT=8081` is a number
 * while an optional string key keeps "1234" a string.
 */
function sampleFromValidators(cls: new () => object, key: string): unknown {
  const names = new Set(
    getMetadataStorage().getTargetValidationMetadatas(cls, '', true, false).filter((m) => m.propertyName === key).map((m) => m.name),
  );
  if (names.has('isInt') || names.has('isNumber') || names.has('min') || names.has('max')) return 0;
  if (names.has('isBoolean')) return false;
  if (names.has('isArray') || names.has('isObject')) return {};
  return undefined;
}

/** Environment strings take the type of the key's default so `GW_X_PORT=7081` validates as a number. */
function coerce(raw: string, sample: unknown): unknown {
  if (typeof sample === 'number') {
    const n = Number(raw);
    return raw.trim() !== '' && Number.isFinite(n) ? n : raw;
  }
  if (typeof sample === 'boolean') {
    if (/^(true|1|yes|on)$/i.test(raw)) return true;
    if (/^(false|0|no|off)$/i.test(raw)) return false;
    return raw;
  }
  if (sample !== null && typeof sample === 'object') {
    try { return JSON.parse(raw); } catch { return raw; }
  }
  if (sample === undefined && /^[[{]/.test(raw.trim())) {
    try { return JSON.parse(raw); } catch { return raw; }
  }
  return raw;
}

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
      if (raw !== undefined) {
        inst[k] = coerce(raw, inst[k] === undefined ? sampleFromValidators(cls, k) : inst[k]);
        origin.set(k, name);
        break;
      }
    }
  }
  const errors = validateSync(inst, { forbidUnknownValues: false });
  const p = firstProblem(errors);
  if (p) {
    const top = p.key.split('.')[0];
    const from = origin.has(top) ? ` from ${origin.get(top)}` : '';
    // values of secret-bearing keys stay out of the message: it ends up in terminals and service logs
    const shown = /pass|secret|token|url|key/i.test(p.key) ? '(value hidden)' : JSON.stringify(p.value);
    throw new BootError(`${src.where}: key ${p.key}: ${p.text} (got ${shown}${from})`);
  }
  return inst as C;
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
