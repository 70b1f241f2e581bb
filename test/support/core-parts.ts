/**
 * Core's parts for plugin tests that check a document or a store against core's tables, or run a plugin's piece on
 * a bare bus without a kernel. Plugin code never imports these (the import-boundary lint rule).
 */
export { OPEN_FIELDS } from '../../core/sessions/open-fields';
export { createKeyv } from '../../core/kv';
export type { Keyv } from '../../core/kv';
export { CoreMediaBus } from '../../core/bus/media-bus';
