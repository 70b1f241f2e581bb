// Intercom from the page (live, dataTyp 2): the microphone goes to the request's taUrl as 16-bit little-endian mono
// PCM at 8 kHz (decisions.md "Intercom"), and the terminal's voice, which comes back on the same socket in the same
// form, is played through Web Audio. The taUrl carries its own authorisation (reqId and token in its query).
'use strict';

const RATE = 8000;

export class Talk {
  /** @param {(state: {sent: number, heard: number, closed?: string}) => void} onState */
  constructor(onState) {
    this.onState = onState;
    this.ws = null;
    this.ctx = null;
    this.mic = null;
    this.proc = null;
    this.sent = 0;
    this.heard = 0;
    this.playAt = 0;
  }

  get active() {
    return !!this.ws;
  }

  /** asks for the microphone, then connects; throws when either is refused */
  async start(taUrl) {
    this.stop();
    this.mic = await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: true, noiseSuppression: true, channelCount: 1 } });
    this.ctx = new AudioContext();
    const ws = new WebSocket(taUrl);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    await new Promise((ok, fail) => {
      ws.onopen = ok;
      ws.onerror = () => fail(new Error('The talk connection failed.'));
    });
    ws.onclose = (e) => {
      if (this.ws !== ws) return;
      this.stop();
      this.onState({ sent: this.sent, heard: this.heard, closed: `closed: ${e.code} ${e.reason}` });
    };
    ws.onmessage = (e) => this.#playDownlink(e.data);
    const src = this.ctx.createMediaStreamSource(this.mic);
    // ScriptProcessor (deprecated, but in every browser and without a worklet module): 4096 frames ≈ 85 ms at 48 kHz
    const proc = this.ctx.createScriptProcessor(4096, 1, 1);
    const step = this.ctx.sampleRate / RATE;
    let pos = 0;
    let acc = 0;
    let n = 0;
    proc.onaudioprocess = (e) => {
      const f = e.inputBuffer.getChannelData(0);
      const out = new Int16Array(Math.ceil(f.length / step) + 1);
      let k = 0;
      // to 8 kHz: each output sample is the mean of the input over its period (a box filter: enough for speech)
      for (let i = 0; i < f.length; i++) {
        acc += f[i];
        n++;
        if (++pos >= step) {
          pos -= step;
          out[k++] = Math.max(-32768, Math.min(32767, Math.round((acc / n) * 32767)));
          acc = 0;
          n = 0;
        }
      }
      if (ws.readyState === WebSocket.OPEN && k > 0) {
        ws.send(out.subarray(0, k).slice().buffer);
        this.sent += k;
        this.onState({ sent: this.sent, heard: this.heard });
      }
    };
    src.connect(proc);
    // a ScriptProcessor runs only while connected to the destination; it writes silence there
    proc.connect(this.ctx.destination);
    this.proc = proc;
  }

  /** the terminal's voice: PCM16 8 kHz, played in order a little behind to ride out the network's jitter */
  #playDownlink(data) {
    if (!this.ctx || !(data instanceof ArrayBuffer) || data.byteLength < 2) return;
    const pcm = new Int16Array(data, 0, data.byteLength >> 1);
    const buf = this.ctx.createBuffer(1, pcm.length, RATE);
    const ch = buf.getChannelData(0);
    for (let i = 0; i < pcm.length; i++) ch[i] = pcm[i] / 32768;
    const node = this.ctx.createBufferSource();
    node.buffer = buf;
    node.connect(this.ctx.destination);
    const now = this.ctx.currentTime;
    if (this.playAt < now + 0.05) this.playAt = now + 0.1;
    node.start(this.playAt);
    this.playAt += buf.duration;
    this.heard += pcm.length;
    this.onState({ sent: this.sent, heard: this.heard });
  }

  stop() {
    const ws = this.ws;
    this.ws = null;
    if (ws && ws.readyState <= WebSocket.OPEN) ws.close(1000, 'talk ended');
    this.proc?.disconnect();
    this.proc = null;
    this.mic?.getTracks().forEach((t) => t.stop());
    this.mic = null;
    this.ctx?.close().catch(() => undefined);
    this.ctx = null;
    this.playAt = 0;
  }
}
