// Small pure helpers for the console's tables.
'use strict';

/** an element with attributes and children; text always goes in as text (no HTML from data, ever) */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'className') e.className = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== undefined && c !== null) e.append(c instanceof Node ? c : String(c));
  return e;
}

export function bytes(n) {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

export function bitrate(bitsPerSec) {
  if (bitsPerSec === undefined) return '–';
  if (bitsPerSec < 1000) return `${Math.round(bitsPerSec)} bit/s`;
  if (bitsPerSec < 1e6) return `${(bitsPerSec / 1000).toFixed(0)} kbit/s`;
  return `${(bitsPerSec / 1e6).toFixed(2)} Mbit/s`;
}

export function age(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

export function codecs(list) {
  if (!list || !list.length) return '–';
  return list.map((c) => (c.kind === 'video' ? `${c.codec} ${c.width ?? '?'}x${c.height ?? '?'}` : `${c.codec} ${c.sampleRate ?? '?'} Hz`)).join(', ');
}

/** `yyyy-mm-ddTHH:mm:ss±hh:mm` of a datetime-local value, in the browser's zone (the recorder reads the offset) */
export function withOffset(local) {
  const withSec = local.length === 16 ? `${local}:00` : local;
  const d = new Date(withSec);
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? '+' : '-';
  const a = Math.abs(off);
  return `${withSec}${sign}${String(Math.floor(a / 60)).padStart(2, '0')}:${String(a % 60).padStart(2, '0')}`;
}

/** a datetime-local value (seconds included) for a Date, in the browser's zone */
export function localInput(d) {
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** Prometheus text → sum of each metric's samples (labels added up), for a few figures */
export function metricSums(text) {
  const sums = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const v = Number(m[2]);
    if (Number.isFinite(v)) sums.set(m[1], (sums.get(m[1]) ?? 0) + v);
  }
  return sums;
}
