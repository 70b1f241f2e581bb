import assert from 'node:assert/strict';
import 'reflect-metadata';
import { IsArray, IsBoolean, IsInt, IsNumber, IsObject, IsOptional, IsString, Max, Min } from 'class-validator';
import { BootError, buildConfig, checkEnvNames, envNameFor, type EnvScope } from '../../core/config';
import { GatewayConfig } from '../../core/gateway-config';

class Sample {
  @IsInt() @Min(0) @Max(65535) port = 7081;
  @IsOptional() @IsInt() publicPort: number | undefined = undefined;
  @IsOptional() @IsString() password: string | undefined = undefined;
  @IsBoolean() udp = true;
  @IsNumber() ratio = 0.5;
  @IsArray() @IsString({ each: true }) schemes: string[] = ['http'];
  @IsObject() store: Record<string, unknown> = { kind: 'memory' };
  @IsArray() tokens: unknown[] = [];
  @IsOptional() @IsArray() extra: unknown[] | undefined = undefined;
}

describe('config: defaults, site values, environment overrides', () => {
  const where = { where: 'site.json: plugin sample', envPrefix: 'GW_SAMPLE' };
  const build = (env: Record<string, string>) => buildConfig(Sample, {}, { ...where, env });
  const refused = (env: Record<string, string>, re: RegExp) =>
    assert.throws(
      () => build(env),
      (e: Error) => {
        assert.ok(e instanceof BootError, String(e));
        assert.match(e.message, re);
        return true;
      },
    );

  it('names environment variables GW_<PLUGIN>_<KEY> in upper snake case', () => {
    assert.equal(envNameFor('GW_JT1078_INGEST', 'livePort2013'), 'GW_JT1078_INGEST_LIVE_PORT2013');
    assert.equal(envNameFor('GW', 'httpPort'), 'GW_HTTP_PORT');
  });

  it('environment beats the site file; types follow the default, or the validators for optional keys', () => {
    const c = buildConfig(
      Sample,
      { port: 1 },
      {
        ...where,
        env: {
          GW_SAMPLE_PORT: '2',
          GW_SAMPLE_PUBLIC_PORT: '8081',
          GW_SAMPLE_PASSWORD: '1234',
          GW_SAMPLE_UDP: 'off',
          GW_SAMPLE_RATIO: '1.25',
          GW_SAMPLE_SCHEMES: '["http","ws"]',
          GW_SAMPLE_STORE: '{"kind":"sqlite"}',
          GW_SAMPLE_EXTRA: '[1]',
        },
      },
    );
    assert.deepEqual(
      { ...c },
      {
        port: 2,
        publicPort: 8081,
        password: '1234',
        udp: false,
        ratio: 1.25,
        schemes: ['http', 'ws'],
        store: { kind: 'sqlite' },
        tokens: [],
        extra: [1],
      },
    );
  });

  it("a value that is not of the key's type says what it should be, naming the key and the variable", () => {
    refused({ GW_SAMPLE_PORT: 'abc' }, /^site\.json: plugin sample: key port \(GW_SAMPLE_PORT\): 'abc' is not an integer$/);
    refused({ GW_SAMPLE_PORT: '' }, /key port \(GW_SAMPLE_PORT\): '' is not an integer$/);
    refused({ GW_SAMPLE_PORT: '80.5' }, /key port \(GW_SAMPLE_PORT\): '80\.5' is not an integer$/);
    refused({ GW_SAMPLE_PUBLIC_PORT: 'eighty' }, /key publicPort \(GW_SAMPLE_PUBLIC_PORT\): 'eighty' is not an integer$/);
    refused({ GW_SAMPLE_RATIO: 'half' }, /key ratio \(GW_SAMPLE_RATIO\): 'half' is not a number$/);
    refused({ GW_SAMPLE_UDP: 'maybe' }, /key udp \(GW_SAMPLE_UDP\): 'maybe' is not a boolean/);
    refused({ GW_SAMPLE_SCHEMES: 'http,ws' }, /key schemes \(GW_SAMPLE_SCHEMES\): 'http,ws' is not a JSON array/);
    refused({ GW_SAMPLE_SCHEMES: '{"a":1}' }, /key schemes \(GW_SAMPLE_SCHEMES\): '\{"a":1\}' is not a JSON array/);
    refused({ GW_SAMPLE_EXTRA: '42' }, /key extra \(GW_SAMPLE_EXTRA\): '42' is not a JSON array/);
    refused({ GW_SAMPLE_STORE: '[1]' }, /key store \(GW_SAMPLE_STORE\): '\[1\]' is not a JSON object/);
    // never the range message a number that parsed would get
    assert.throws(
      () => build({ GW_SAMPLE_PORT: 'abc' }),
      (e: Error) => !/greater|less/.test(e.message),
    );
  });

  it("a typed value out of range still gets the validator's message, with the variable", () => {
    refused({ GW_SAMPLE_PORT: '99999' }, /key port: port must not be greater than 65535 \(got 99999 from GW_SAMPLE_PORT\)/);
  });

  it('values of secret-bearing keys stay hidden, whether the type or the validator refuses them', () => {
    assert.throws(
      () => buildConfig(Sample, { password: 42 }, { ...where, env: {} }),
      (e: Error) => /key password: .*\(got \(value hidden\)\)/.test(e.message) && !e.message.includes('42'),
    );
    assert.throws(
      () => build({ GW_SAMPLE_TOKENS: '[{"secret":"s3cr3t"' }),
      (e: Error) => /key tokens \(GW_SAMPLE_TOKENS\): the value \(hidden\) is not a JSON array/.test(e.message) && !e.message.includes('s3cr3t'),
    );
  });

  it('an unknown key in the site file stops boot', () => {
    assert.throws(() => buildConfig(Sample, { prot: 1 }, { ...where, env: {} }), /key prot: unknown key/);
  });
});

describe('config: GW_ variables that configure nothing', () => {
  class FlvOut {
    @IsInt() port = 7081;
    @IsOptional() @IsInt() publicPort: number | undefined = undefined;
  }
  class Flv {
    @IsInt() window = 3;
  }
  class Ingest {
    @IsInt() livePort2013 = 7612;
    @IsInt() reorderMs = 200;
  }
  const flvOut = { name: 'flv-out', config: FlvOut, env: { port: 'GW_FLV_PORT' } };
  const ingest = { name: 'jt1078-ingest', config: Ingest };
  const check = (env: Record<string, string>, plugins: EnvScope[] = [flvOut, ingest]) => checkEnvNames(env, 'site.json', GatewayConfig, plugins);
  const stops = (env: Record<string, string>, plugins: EnvScope[], message: string) =>
    assert.throws(
      () => check(env, plugins),
      (e: Error) => {
        assert.ok(e instanceof BootError, String(e));
        assert.equal(e.message, message);
        return true;
      },
    );

  it('accepts kernel keys, plugin keys, aliases and the variables read outside config', () => {
    const env = {
      GW_HTTP_PORT: '1',
      GW_DATA_DIR: '/d',
      GW_APPLICATIONS: '[]',
      GW_STORE: '{}',
      GW_FLV_OUT_PORT: '1',
      GW_FLV_OUT_PUBLIC_PORT: '2',
      GW_FLV_PORT: '3',
      GW_JT1078_INGEST_LIVE_PORT2013: '0',
      GW_SITE: 'default',
      GW_DEBUG: '1',
      GW_TEST_LOG: '1',
      GW_CHROMIUM: '/c',
      GW_FIXTURES_DIR: '/f',
      PATH: '/bin',
      HOME: '/root',
      GWX: '1',
    };
    assert.deepEqual(check(env), []);
  });

  it("a misspelt variable under a plugin's prefix stops boot naming the variable, the plugin and the closest key", () => {
    stops({ GW_FLV_OUT_PROT: '7081' }, [flvOut], "site.json: GW_FLV_OUT_PROT: no key 'prot' in plugin flv-out (did you mean GW_FLV_OUT_PORT?)");
    stops(
      { GW_JT1078_INGEST_LIVE_PORT: '1' },
      [ingest],
      "site.json: GW_JT1078_INGEST_LIVE_PORT: no key 'livePort' in plugin jt1078-ingest (did you mean GW_JT1078_INGEST_LIVE_PORT2013?)",
    );
    stops(
      { GW_FLV_OUT_COLOUR: 'red' },
      [flvOut],
      "site.json: GW_FLV_OUT_COLOUR: no key 'colour' in plugin flv-out (its variables: GW_FLV_OUT_PORT, GW_FLV_OUT_PUBLIC_PORT, GW_FLV_PORT)",
    );
    stops({ GW_PROBE_X: '1' }, [{ name: 'probe' }], "site.json: GW_PROBE_X: no key 'x' in plugin probe (it has no config keys)");
  });

  it('nested prefixes: the longest prefix of a plugin on the site decides', () => {
    const flv = { name: 'flv', config: Flv };
    stops({ GW_FLV_OUT_PROT: '1' }, [flv, flvOut], "site.json: GW_FLV_OUT_PROT: no key 'prot' in plugin flv-out (did you mean GW_FLV_OUT_PORT?)");
    stops({ GW_FLV_WINDOWS: '1' }, [flv, flvOut], "site.json: GW_FLV_WINDOWS: no key 'windows' in plugin flv (did you mean GW_FLV_WINDOW?)");
    // flv-out's own alias is under flv's prefix, and is known
    assert.deepEqual(check({ GW_FLV_PORT: '1', GW_FLV_WINDOW: '2', GW_FLV_OUT_PORT: '3' }, [flv, flvOut]), []);
    // without flv-out on the site, its variables fall under flv's prefix
    stops({ GW_FLV_OUT_PORT: '1' }, [flv], "site.json: GW_FLV_OUT_PORT: no key 'outPort' in plugin flv (its variables: GW_FLV_WINDOW)");
  });

  it('a variable of no plugin on the site and no kernel key is only returned, for a warning', () => {
    const stray = check({ GW_RECORDER_MAX_TOTAL_BYTES: '1', GW_HTTP_PROT: '1', GW_FLV_PORT: '1' }, [ingest]);
    assert.deepEqual(
      stray.map((s) => s.name),
      ['GW_FLV_PORT', 'GW_HTTP_PROT', 'GW_RECORDER_MAX_TOTAL_BYTES'],
    );
    assert.match(stray[1]!.message, /GW_HTTP_PROT sets no gateway key and no key of a plugin on this site: ignored \(did you mean GW_HTTP_PORT\?\)/);
    assert.doesNotMatch(stray[2]!.message, /did you mean/);
  });
});
