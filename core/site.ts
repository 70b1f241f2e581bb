import * as fs from 'node:fs';
import * as path from 'node:path';
import { BootError } from './config';

export interface PluginEntry {
  name: string;
  /** a module path for plugins outside plugins/ (relative to the site folder) */
  module?: string;
  config: unknown;
}

export interface SiteSpec {
  name: string;
  /** site file path as given/relative to cwd, for messages */
  file: string;
  dir: string;
  gateway: unknown;
  plugins: PluginEntry[];
}

/**
 * Finds and reads a site: an argument may be a site name (sites/<name>), a folder, or a site.json path.
 * The repository root is where sites/ lives, whatever the working directory.
 */
export function loadSite(arg: string | undefined, repoRoot: string): SiteSpec {
  const chosen = arg && arg.length ? arg : 'default';
  let file: string;
  if (chosen.endsWith('.json')) file = path.resolve(chosen);
  else if (fs.existsSync(path.resolve(chosen, 'site.json'))) file = path.resolve(chosen, 'site.json');
  else file = path.join(repoRoot, 'sites', chosen, 'site.json');
  const shown = path.relative(process.cwd(), file) || file;
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    throw new BootError(`${shown}: site file not found (site '${chosen}'; give a site name under sites/, a folder or a site.json path)`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new BootError(`${shown}: not valid JSON (${(err as Error).message})`);
  }
  if (!doc || typeof doc !== 'object' || Array.isArray(doc)) throw new BootError(`${shown}: must be a JSON object with "gateway" and "plugins"`);
  const d = doc as Record<string, unknown>;
  for (const k of Object.keys(d)) {
    if (!['gateway', 'plugins', 'description'].includes(k)) throw new BootError(`${shown}: key ${k}: unknown key (known: gateway, plugins, description)`);
  }
  if (!Array.isArray(d.plugins)) throw new BootError(`${shown}: key plugins: must be an array of {"name", "config"}`);
  const seen = new Set<string>();
  const plugins = d.plugins.map((p, i): PluginEntry => {
    if (!p || typeof p !== 'object' || Array.isArray(p)) throw new BootError(`${shown}: key plugins[${i}]: must be an object with "name"`);
    const e = p as Record<string, unknown>;
    if (typeof e.name !== 'string' || !/^[a-z][a-z0-9-]*$/.test(e.name)) throw new BootError(`${shown}: key plugins[${i}].name: must be a plugin name`);
    for (const k of Object.keys(e)) {
      if (!['name', 'module', 'config'].includes(k)) throw new BootError(`${shown}: plugin ${e.name}: key ${k}: unknown key (known: name, module, config)`);
    }
    if (seen.has(e.name)) throw new BootError(`${shown}: plugin ${e.name}: listed twice`);
    seen.add(e.name);
    if (e.module !== undefined && typeof e.module !== 'string') throw new BootError(`${shown}: plugin ${e.name}: key module: must be a path`);
    return { name: e.name, module: e.module as string | undefined, config: e.config ?? {} };
  });
  return { name: path.basename(path.dirname(file)), file: shown, dir: path.dirname(file), gateway: d.gateway ?? {}, plugins };
}
