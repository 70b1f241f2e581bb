/**
 * A gateway with rtmp and the other outputs (flv-out, hls-out, rtsp-out, audio-aac) and a stand-in ingest, ffmpeg as
 * an RTMP encoder and as a player, and a bare RTMP client for what ffmpeg would never send.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as net from 'node:net';
import * as path from 'node:path';
import { definePlugin } from '../../../plugin-sdk';
import { startTestGateway, stubMediaPlugin, type TestGateway } from '../../../plugin-sdk/testkit';
import { requireTool } from '../../../test/support/tools';
import { RTMP_SERVER, type RtmpService } from '../service';
import { scratchDir } from '../../../test/support/paths';
import { runProcess } from '../../../test/support/run-process';
import { countFrames, probeFile, type Probed, type ProbedStream } from '../../../test/support/ffprobe';
import { waitFor } from '../../../test/support/until';

export const HOST = '127.0.0.1';
export const KEY = 'demo-publish-key';

export interface RtmpGateway {
  gw: TestGateway;
  rtmp: RtmpService;
  port: number;
  stop(): Promise<void>;
}

export async function startRtmpGateway(
  rtmpConfig: Record<string, unknown> = {},
  opts: { outputs?: boolean; captureLogs?: boolean } = {},
): Promise<RtmpGateway> {
  let rtmp: RtmpService | undefined;
  const probe = definePlugin({
    name: 'rtmp-probe',
    requires: ['rtmp'],
    uses: [RTMP_SERVER],
    setup(ctx) {
      rtmp = ctx.services.get(RTMP_SERVER);
    },
  });
  const outputs = opts.outputs === false ? [] : [{ name: 'flv-out' }, { name: 'hls-out' }, { name: 'rtsp-out' }];
  const gw = await startTestGateway({
    plugins: [
      stubMediaPlugin({ fmts: [] }),
      { name: 'audio-aac' },
      ...outputs,
      { name: 'rtmp', config: { publishKeys: [{ appId: 'demo', key: KEY }], ...rtmpConfig } },
      { name: probe.name, def: probe as never },
    ],
    captureLogs: opts.captureLogs,
  });
  return { gw, rtmp: rtmp!, port: rtmp!.port, stop: () => gw.stop() };
}

/**
 * ffmpeg as an RTMP encoder: a 320x240 test pattern in H.264 (a key frame a second) and a 440 Hz tone in AAC, in real
 * time, until killed (or `seconds`).
 */
export function ffmpegPublish(url: string, opts: { seconds?: number; codec?: 'h264' | 'h265'; audio?: 'aac' | 'none' } = {}): ChildProcess {
  const video =
    opts.codec === 'h265'
      ? ['-c:v', 'libx265', '-preset', 'ultrafast', '-x265-params', 'log-level=error:keyint=25']
      : ['-c:v', 'libx264', '-preset', 'ultrafast', '-tune', 'zerolatency', '-g', '25', '-pix_fmt', 'yuv420p'];
  const audioIn = opts.audio === 'none' ? [] : ['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=44100'];
  const audioOut = opts.audio === 'none' ? ['-an'] : ['-c:a', 'aac', '-b:a', '64k'];
  const args = [
    '-v',
    'error',
    '-re',
    '-f',
    'lavfi',
    '-i',
    'testsrc=size=320x240:rate=25',
    ...audioIn,
    ...(opts.seconds ? ['-t', String(opts.seconds)] : []),
    ...video,
    ...audioOut,
    '-f',
    'flv',
    url,
  ];
  const child = spawn(requireTool('ffmpeg', 'ffmpeg'), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr!.on('data', () => undefined);
  return child;
}

/** ffmpeg as a receiving RTMP server (`-listen 1`): what it receives is copied into `file`; `exited` once it ends */
export function ffmpegListen(url: string, file: string): { exited: Promise<number | null>; kill(): void } {
  const ffmpeg = spawn(requireTool('ffmpeg', 'ffmpeg'), ['-v', 'error', '-listen', '1', '-i', url, '-c', 'copy', '-f', 'flv', file], {
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  return { exited: new Promise((resolve) => ffmpeg.on('close', resolve)), kill: () => ffmpeg.kill('SIGKILL') };
}

/** the video stream ffprobe finds in a file, its frames counted */
/** the file's video stream, its frames counted */
export async function probeVideo(file: string): Promise<ProbedStream | undefined> {
  return (await countFrames(file)).streams.find((x) => x.codec_type === 'video');
}

/** ffmpeg copies `seconds` of a URL into a NUT file; ffprobe counts its frames and ffmpeg decodes them all */
export async function recordAndProbe(url: string, seconds: number, input: string[] = []): Promise<Probed & { file: string }> {
  const dir = scratchDir('rtmp-test');
  const file = path.join(dir, 'out.nut');
  const r = await runProcess(
    requireTool('ffmpeg', 'ffmpeg'),
    ['-v', 'error', ...input, '-i', url, '-t', String(seconds), '-c', 'copy', '-f', 'nut', file],
    40_000,
  );
  assert.equal(r.code, 0, `ffmpeg could not read ${url.replace(/token=[^&]*/, 'token=…')}: ${r.stderr}`);
  return { ...(await probeFile(file)), file };
}

/** A bare RTMP client: the simple handshake, then whatever bytes a test wants to send. */
export class RawRtmp {
  readonly socket: net.Socket;
  private got = Buffer.alloc(0);
  closed = false;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on('data', (b: Buffer) => {
      this.got = Buffer.concat([this.got, b]);
    });
    socket.on('close', () => {
      this.closed = true;
    });
    socket.on('error', () => undefined);
  }

  static async connect(port: number): Promise<RawRtmp> {
    const s = net.connect(port, HOST);
    await new Promise<void>((resolve, reject) => {
      s.once('connect', resolve);
      s.once('error', reject);
    });
    const c = new RawRtmp(s);
    const c1 = Buffer.alloc(1536);
    c1.writeUInt32BE(0, 0);
    s.write(Buffer.concat([Buffer.from([3]), c1]));
    await waitFor('S0S1S2', () => c.got.length >= 1 + 1536 * 2, 5000);
    s.write(c.got.subarray(1, 1537)); // C2 echoes S1
    c.got = c.got.subarray(1 + 1536 * 2);
    return c;
  }

  /** one chunk of type 0 on chunk stream `cid`: the whole message when it fits the default chunk size */
  static message(cid: number, type: number, payload: Buffer, streamId = 0, length = payload.length): Buffer {
    const h = Buffer.alloc(12);
    h[0] = cid;
    h.writeUIntBE(0, 1, 3);
    h.writeUIntBE(length, 4, 3);
    h[7] = type;
    h.writeUInt32LE(streamId, 8);
    return Buffer.concat([h, payload]);
  }

  write(b: Buffer): void {
    this.socket.write(b);
  }

  async waitClosed(timeoutMs = 5000): Promise<boolean> {
    try {
      await waitFor('the server to close', () => this.closed, timeoutMs);
      return true;
    } catch {
      return false;
    }
  }

  destroy(): void {
    this.socket.destroy();
  }
}
