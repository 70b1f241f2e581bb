/** Injection tokens of the kernel's container (tsyringe); a plugin-facing context is built from these. */
export const TOKENS = {
  Kernel: Symbol('Kernel'),
  Logger: Symbol('Logger'),
  Clock: Symbol('Clock'),
  Sessions: Symbol('Sessions'),
  Bus: Symbol('Bus'),
  Notices: Symbol('Notices'),
  Registry: Symbol('Registry'),
  /** in a plugin's child container: its name */
  PluginName: Symbol('PluginName'),
} as const;
