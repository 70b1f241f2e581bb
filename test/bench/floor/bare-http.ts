/**
 * The floor for HLS serving: a bare node HTTP/1.1 server that answers every GET with one body of a fixed size, with
 * the headers hls-out sends (type, length, no-cache, CORS), and nothing else: no routing, no token, no segmenter.
 * What node's own HTTP machinery costs a request on this machine, which no HLS server written on it can go under.
 *
 *   node dist/test/bench/floor/bare-http.js <port> <bodyBytes>
 */
import * as http from 'node:http';

const port = Number(process.argv[2]);
const body = Buffer.alloc(Number(process.argv[3]), 0x47);
const headers = ['Access-Control-Allow-Origin', '*', 'Content-Type', 'video/mp4', 'Cache-Control', 'no-cache', 'Content-Length', String(body.length)];

http
  .createServer((_req, res) => {
    res.writeHead(200, headers);
    res.end(body);
  })
  .listen(port, '127.0.0.1', () => process.stdout.write('listening\n'));
