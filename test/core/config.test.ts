import assert from 'node:assert/strict';
import 'reflect-metadata';
import { IsBoolean, IsInt, IsOptional, IsString } from 'class-validator';
import { BootError, buildConfig, envNameFor } from '../../core/config';

class Sample {
  @IsInt() port = 7081;
  @IsOptional() @IsInt() publicPort: number | undefined = undefined;
  @IsOptional() @IsString() password: string | undefined = undefined;
  @IsBoolean() udp = true;
}

describe('config: defaults, site values, environment overrides', () => {
  const where = { where: 'site.json: plugin sample', envPrefix: 'GW_SAMPLE' };

  it('names environment variables GW_<PLUGIN>_<KEY> in upper snake case', () => {
    assert.equal(envNameFor('GW_JT1078_INGEST', 'livePort2013'), 'GW_JT1078_INGEST_LIVE_PORT2013');
    assert.equal(envNameFor('GW', 'httpPort'), 'GW_HTTP_PORT');
  });

  it('environment beats the site file; types follow the default, or the validators for optional keys', () => {
    const c = buildConfig(Sample, { port: 1 }, { ...where, env: { GW_SAMPLE_PORT: '2', GW_SAMPLE_PUBLIC_PORT: '8081', GW_SAMPLE_PASSWORD: '1234', GW_SAMPLE_UDP: 'false' } });
    assert.deepEqual({ ...c }, { port: 2, publicPort: 8081, password: '1234', udp: false });
  });

  it('a bad value names the key and the variable, and hides secret-bearing values', () => {
    assert.throws(() => buildConfig(Sample, {}, { ...where, env: { GW_SAMPLE_PORT: 'abc' } }), (e: Error) => e instanceof BootError && /key port: .*"abc".*GW_SAMPLE_PORT/.test(e.message));
    assert.throws(() => buildConfig(Sample, { password: 42 }, { ...where, env: {} }), (e: Error) => /key password: .*\(got \(value hidden\)\)/.test(e.message) && !e.message.includes('42'));
    assert.throws(() => buildConfig(Sample, { prot: 1 }, { ...where, env: {} }), /key prot: unknown key/);
  });
});
