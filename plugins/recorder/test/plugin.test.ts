/**
 * The recorder plugin in a real gateway with its embedded SQLite catalog: the shared plugin-level suite
 * (plugin-suite.ts), which plugin-postgres.test.ts runs against PostgreSQL as well.
 */
import { recorderPluginSuite, sqliteBackend } from './plugin-suite';

describe('recorder plugin (SQLite catalog)', function () {
  recorderPluginSuite(sqliteBackend);
});
