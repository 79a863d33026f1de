// The BullMQ peer of `make bench`: BullMQ's end-to-end throughput, measured as
// BenchmarkAsynqJobs (bench/peers) and BenchmarkBusJobs (bench/) measure theirs. For each
// concurrency, N jobs with the same small JSON payload are enqueued before the timer starts
// (addBulk, 1,000 per call, removeOnComplete and removeOnFail so a finished job leaves nothing,
// as an EchoMQ complete retires its row), then a Worker with that concurrency and a no-op
// processor starts, and the timer stops at the N-th "completed" event. It prints one line per
// concurrency in `go test -bench` format, which bench/cmd/benchreport reads:
//
//	BenchmarkBullMQJobs/c=20-2  4000  76923 ns/op  13000 jobs/s
//
// Usage: VALKEY_ADDR=host:port node jobs.mjs N 1,8,20,100
import os from 'node:os';
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';

const [host, port] = (process.env.VALKEY_ADDR || '127.0.0.1:6379').split(':');
const n = parseInt(process.argv[2] || '4000', 10);
const concurrencies = (process.argv[3] || '1,8,20,100').split(',').map((c) => parseInt(c, 10));
const procs = os.availableParallelism();
// BullMQ 6 takes its Redis client from the caller in an ES module: ioredis, as BullMQ's own
// docs set it up (a Worker's blocking connection needs maxRetriesPerRequest: null).
const newConnection = () => new IORedis({ host, port: parseInt(port, 10), maxRetriesPerRequest: null });
const data = { order_id: 123456, action: 'settle', amount: 4200 };

async function measure(c) {
  const name = `bullmq-bench-${process.pid}-${c}-${Date.now()}`;
  const qconn = newConnection();
  const wconn = newConnection();
  const queue = new Queue(name, { connection: qconn });
  for (let i = 0; i < n; i += 1000) {
    const jobs = Array.from({ length: Math.min(1000, n - i) }, () => ({
      name: 'noop',
      data,
      opts: { removeOnComplete: true, removeOnFail: true },
    }));
    await queue.addBulk(jobs);
  }
  let done = 0;
  let finish;
  const finished = new Promise((resolve) => { finish = resolve; });
  const start = process.hrtime.bigint();
  const worker = new Worker(name, async () => {}, { connection: wconn, concurrency: c });
  worker.on('completed', () => {
    done++;
    if (done === n) finish();
  });
  const timeout = setTimeout(() => finish(new Error(`${done} of ${n} jobs completed in 5 minutes`)), 5 * 60 * 1000);
  const err = await finished;
  const elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  clearTimeout(timeout);
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  await Promise.all([qconn.quit(), wconn.quit()]);
  if (err) throw err;
  return elapsed;
}

let failed = false;
for (const c of concurrencies) {
  const bench = `BenchmarkBullMQJobs/c=${c}`;
  try {
    const elapsed = await measure(c);
    console.log(`${bench}-${procs}\t${n}\t${Math.round((elapsed * 1e9) / n)} ns/op\t${Math.round(n / elapsed)} jobs/s`);
  } catch (e) {
    failed = true;
    console.log(`--- FAIL: ${bench}\n    ${String(e && e.message ? e.message : e).split('\n')[0]}`);
  }
}
process.exit(failed ? 1 : 0);
