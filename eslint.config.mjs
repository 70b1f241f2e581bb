// Lint for the gateway: typescript-eslint's type-checked rules over core, plugins, plugin-sdk and test,
// and the plugin import boundary (plugins and SDK examples reach the SDK only through its entry points).
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

/** tests and their support code, wherever they live */
const TEST_FILES = ['test/**', '**/test/**', '**/*.test.ts'];
/** code run only by developers (tests, and a plugin's tools such as the terminal simulator and cost probes) */
const DEV_FILES = [...TEST_FILES, '**/tools/**'];

/** the modules every frame passes through: reads, the ingest stages, the bus, the SDK's formats, flv-out */
const MEDIA_PATH = [
  'core/net/*.ts',
  'core/bus/*.ts',
  'plugin-sdk/*.ts',
  'plugin-sdk/formats/*.ts',
  'plugins/jt1078-ingest/src/*.ts',
  'plugins/flv-out/src/*.ts',
];

/**
 * How a boundary crossing counts: an error, so `npm test` fails on a plugin import that crosses it.
 */
const BOUNDARY_SEVERITY = 'error';

/** the SDK entry points a plugin may import, as the boundary message names them */
const ENTRY_POINTS = ['plugin-sdk', 'plugin-sdk/formats', 'plugin-sdk/codecs', 'plugin-sdk/rtsp', 'plugin-sdk/rtp', 'plugin-sdk/worker', 'plugin-sdk/router'];
const TEST_ENTRY_POINTS = ['plugin-sdk/testkit'];

const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The boundary as no-restricted-imports settings for the files `depth` folders below a plugin's own folder.
 * An import that climbs out of the plugin's folder (depth + 1 times '../') crosses the boundary unless it names an
 * entry point exactly; `up` is how many '../' from that folder reach the repository root (2 for plugins/<name>,
 * 3 for plugin-sdk/examples/<name>). Tests may also reach the test kit and the repository's test/ support.
 */
function boundary(depth, up, inTests) {
  const toRoot = '../'.repeat(depth + up);
  const entries = [...ENTRY_POINTS, ...(inTests ? TEST_ENTRY_POINTS : [])];
  const allowed = entries.flatMap((e) => {
    const p = toRoot + e;
    return [p, `${p}/index`];
  });
  // from an example, '../..' (and deeper forms of it) is plugin-sdk itself, without its name in the path
  if (up === 3) {
    const toSdk = '../'.repeat(depth + 2);
    allowed.push(
      toSdk.slice(0, -1),
      `${toSdk}index`,
      ...entries.slice(1).flatMap((e) => [toSdk + e.slice('plugin-sdk/'.length), `${toSdk}${e.slice('plugin-sdk/'.length)}/index`]),
    );
  }
  // an integration test may run another plugin (its index), its tools (the terminal simulator), its parts (the
  // packer that makes a terminal's packets) or its test helpers
  const otherPlugin = `(?:\\.\\./){${depth + 1}}[a-z0-9-]+/(?:index|(?:src|tools|test)/.*)`;
  const testSupport = inTests ? `|${escapeRe(toRoot)}test/.*|${otherPlugin}` : '';
  const allowedRe = allowed.map(escapeRe).join('|');
  const names = [...ENTRY_POINTS, ...TEST_ENTRY_POINTS.map((e) => `${e} (tests only)`)].join(', ');
  return {
    patterns: [
      {
        regex: `^(?!(?:${allowedRe}${testSupport})$)(?:\\.\\./){${depth + 1}}`,
        message: `A plugin imports only the SDK entry points: ${names}. It does not import core/, another plugin, or any other plugin-sdk module.`,
      },
    ],
  };
}

/** one config object per folder depth: the regex counts the '../' that leave the plugin's own folder */
function boundaryConfigs(root, up) {
  const configs = [];
  for (let depth = 0; depth <= 8; depth++) {
    const files = [`${root}/*/${'*/'.repeat(depth)}*.ts`];
    configs.push({ files, rules: { 'no-restricted-imports': [BOUNDARY_SEVERITY, boundary(depth, up, false)] } });
    // the test kit and the repository's test support are open to developers' code only
    configs.push({ files: DEV_FILES.map((t) => [files[0], t]), rules: { 'no-restricted-imports': [BOUNDARY_SEVERITY, boundary(depth, up, true)] } });
  }
  return configs;
}

export default defineConfig(
  { ignores: ['dist/', 'node_modules/', 'data/', '.test-tmp/'] },
  { linterOptions: { reportUnusedDisableDirectives: 'error' } },
  {
    files: ['**/*.ts'],
    extends: [js.configs.recommended, tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      // tsconfig.eslint.json is the build's tsconfig with noUncheckedIndexedAccess: the type-aware rules then
      // know that an index or a regex group may be undefined, and do not call its guard unnecessary
      parserOptions: { project: './tsconfig.eslint.json', tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unnecessary-condition': 'error',
      // an async function without await is how an implementation returns a promise and turns a throw into a
      // rejection; the rule asks to rewrite those without finding bugs
      '@typescript-eslint/require-await': 'off',
      // a redundant `!` or cast changes no behaviour; removing ~300 of them is churn across every folder
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
      // an exhaustive switch names the impossible value in its error, typed never on purpose
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNever: true }],
      // `import x = require()` is TypeScript's CommonJS import; a bare require() call still needs its reason
      '@typescript-eslint/no-require-imports': ['error', { allowAsImport: true }],
      // passing on a caught value (typed unknown) is how a rejection goes through unchanged
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true }],
      // a `let` read by a callback before its one assignment cannot be const (the callback would hit its TDZ)
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // tsc's noUnusedLocals covers locals; a leading underscore marks a parameter or binding kept for its position
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },
  {
    files: TEST_FILES,
    rules: {
      // tests read untyped JSON answers and probe output and assert on their fields: typing each one would
      // not find bugs, and any such field the test reads wrong fails the test
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      // hooks guard values a failed before() leaves unset (`after(() => gw?.stop())`), which the types cannot say,
      // and assertions narrow values that later lines still guard: in tests the rule asks to remove those guards
      '@typescript-eslint/no-unnecessary-condition': 'off',
      // failure messages print Buffers (a child's stderr), arrays and URLSearchParams for their text
      '@typescript-eslint/restrict-template-expressions': 'off',
    },
  },
  {
    // the console's browser modules: plain JavaScript, no types
    files: ['plugins/console/web/**/*.js'],
    extends: [js.configs.recommended],
    languageOptions: {
      sourceType: 'module',
      globals: Object.fromEntries(
        [
          'window',
          'document',
          'navigator',
          'location',
          'console',
          'fetch',
          'URL',
          'URLSearchParams',
          'WebSocket',
          'MediaSource',
          'performance',
          'setTimeout',
          'clearTimeout',
          'setInterval',
          'clearInterval',
          'crypto',
          'btoa',
          'TextEncoder',
          'TextDecoder',
          'Blob',
          'AudioContext',
          'RTCPeerConnection',
          'MediaStream',
          'Node',
          'Hls',
          'mpegts',
          'SwaggerUIBundle',
        ].map((g) => [g, 'readonly']),
      ),
    },
  },
  {
    files: ['*.mjs'],
    extends: [js.configs.recommended],
  },
  ...boundaryConfigs('plugins', 2),
  ...boundaryConfigs('plugin-sdk/examples', 3),
  {
    // The media path: Node 20's globalThis.Buffer and .performance are getters, so each use in optimised code was a
    // LoadGlobalIC that ran the getter (test/bench/README.md, 2026-12-01); an import is a plain property load.
    files: MEDIA_PATH,
    ignores: DEV_FILES,
    rules: {
      'no-restricted-globals': [
        'error',
        { name: 'Buffer', message: "On the media path, import { Buffer } from 'node:buffer': Node's global is a getter, run on every use." },
        { name: 'performance', message: "On the media path, import { performance } from 'node:perf_hooks': Node's global is a getter, run on every use." },
      ],
    },
  },
);
