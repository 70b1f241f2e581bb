import assert from 'node:assert/strict';
import { ESLint } from 'eslint';
import { configs } from 'typescript-eslint';
import { repoRoot } from '../support/paths';

/**
 * The plugin import boundary of eslint.config.mjs: a plugin (plugins/<name>/, plugin-sdk/examples/<name>/) imports
 * the SDK only through its entry points, and never core/ or another plugin. Each case lints a line of source as if
 * it sat at the given path (the file need not exist); type-aware rules are off, so no TypeScript program is built.
 */
const eslint = new ESLint({ cwd: repoRoot, overrideConfig: [{ files: ['**/*.ts'], ...configs.disableTypeChecked }] });

/** the boundary's messages for `code` linted as `file` (relative to the repository) */
async function crossings(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: `${repoRoot}/${file}` });
  assert.ok(result, `a lint result for ${file}`);
  return result.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

const ENTRY_POINTS =
  'plugin-sdk, plugin-sdk/formats, plugin-sdk/codecs, plugin-sdk/rtsp, plugin-sdk/rtp, plugin-sdk/worker, plugin-sdk/router, plugin-sdk/testkit (tests only)';

describe('plugin import boundary (eslint)', function () {
  // loading the config and the TypeScript parser once takes a few seconds on a busy machine
  this.timeout(60_000);

  it('refuses a deep SDK import in a plugin, naming the entry points', async () => {
    const found = await crossings(
      'plugins/some-plugin/src/reader.ts',
      "import { parseH264Sps } from '../../../plugin-sdk/formats/h264';\nexport { parseH264Sps };\n",
    );
    assert.equal(found.length, 1);
    assert.ok(found[0]?.includes(`A plugin imports only the SDK entry points: ${ENTRY_POINTS}.`), found[0]);
  });

  it('refuses core/, another plugin, and SDK modules outside the entry points, at any depth', async () => {
    const cases: Array<[string, string]> = [
      ['plugins/some-plugin/index.ts', '../../core/kernel'],
      ['plugins/some-plugin/index.ts', '../flv-out/index'],
      ['plugins/some-plugin/src/a/b.ts', '../../../../plugin-sdk/media'],
      ['plugins/some-plugin/src/a/b.ts', '../../../flv-out/src/flv-format'],
      ['plugins/some-plugin/src/x.ts', '../../../plugin-sdk/testkit'],
      ['plugin-sdk/examples/some-example/index.ts', '../../stages'],
      ['plugin-sdk/examples/some-example/index.ts', '../other-example/index'],
      ['plugin-sdk/examples/some-example/index.ts', '../../../core/kernel'],
    ];
    for (const [file, from] of cases) {
      const found = await crossings(file, `import * as m from '${from}';\nexport { m };\n`);
      assert.equal(found.length, 1, `${file} importing ${from}`);
    }
  });

  it('lets a plugin import the entry points, its own files, and packages', async () => {
    const cases: Array<[string, string]> = [
      ['plugins/some-plugin/index.ts', '../../plugin-sdk'],
      ['plugins/some-plugin/index.ts', './src/server'],
      ['plugins/some-plugin/src/x.ts', '../../../plugin-sdk/formats'],
      ['plugins/some-plugin/src/x.ts', '../../../plugin-sdk/codecs/index'],
      ['plugins/some-plugin/src/x.ts', '../../../plugin-sdk/rtsp'],
      ['plugins/some-plugin/src/x.ts', '../../../plugin-sdk/rtp'],
      ['plugins/some-plugin/src/x.ts', '../../../plugin-sdk/worker'],
      ['plugins/some-plugin/src/x.ts', '../index'],
      ['plugins/some-plugin/src/x.ts', 'node:net'],
      ['plugins/some-plugin/test/x.test.ts', '../../../plugin-sdk/testkit'],
      ['plugins/some-plugin/test/x.test.ts', '../../../test/support/paths'],
      ['plugin-sdk/examples/some-example/index.ts', '../..'],
      ['plugin-sdk/examples/some-example/index.ts', '../../formats'],
      ['plugin-sdk/examples/some-example/test/x.test.ts', '../../../testkit'],
    ];
    for (const [file, from] of cases) {
      assert.deepEqual(await crossings(file, `import * as m from '${from}';\nexport { m };\n`), [], `${file} importing ${from}`);
    }
  });

  it('leaves core and the SDK itself free to import their own modules', async () => {
    assert.deepEqual(await crossings('core/bus/x.ts', "import * as m from '../../plugin-sdk/media';\nexport { m };\n"), []);
    assert.deepEqual(await crossings('plugin-sdk/formats/x.ts', "import * as m from '../media';\nexport { m };\n"), []);
  });
});
