/** a worker process for worker-pool.test: says it is ready, then idles until killed */
process.send?.({ t: 'ready' });
setInterval(() => undefined, 60_000);
