// load.mjs: bounded load test of `tern serve` on loopback (no dependencies: Node's fetch).
//   node tests/server/load.mjs --tern ./tern --model M.gguf [--soak-model S.gguf] [--clients 16]
//        [--seconds 60] [--sweep 1,2,4,8] [--sweep-seconds 20] [--max-tokens 64]
//        [--sweep-max-tokens 16] [--threads 2]
// 1. Soak (on --soak-model, default --model): one server (--parallel 4), `clients` streaming
//    clients for `seconds`; counts errors (non-200, missing [DONE], bad JSON), and the server's
//    RSS after a warm-up vs at the end. Clients stop starting requests at the deadline and wait
//    for the ones in flight (bounded by max_tokens).
// 2. Sweep (on --model): for each P, a server with --parallel P and P streaming clients:
//    aggregate generated tokens/s, TTFT and TPOT percentiles, and the server's mean decode batch
//    (/metrics: sequences per decode pass).
// TTFT and TPOT are the server's per-request figures from the "timings" of the last stream chunk
// (ttft_ms: submission -> first generated token; TPOT: predicted_ms / (predicted_n - 1)), not the
// arrival times of text chunks: the synthetic models' random tokens mostly have no text (a
// synthetic vocabulary), so a client clock on text chunks saw one chunk per request (TPOT 0).
// Prints a markdown report; exits non-zero on any error or if RSS grew by more than 10%.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith('--') ? [...a, [v.slice(2), all[i + 1]]] : a), []));
const tern = args.tern ?? './tern';
const model = args.model;
const clients = +(args.clients ?? 16), seconds = +(args.seconds ?? 60);
const sweep = (args.sweep ?? '1,2,4,8').split(',').map(Number);
const sweepSeconds = +(args['sweep-seconds'] ?? 15);
let maxTokens = +(args['max-tokens'] ?? 64);
const sweepMaxTokens = +(args['sweep-max-tokens'] ?? 32);
const soakModel = args['soak-model'] ?? args.model;
const threads = args.threads ?? '2';
if (!model) { console.error('--model is required'); process.exit(2); }

const prompts = ['Once upon a time', 'The little dog ran', 'Write a poem about the sea', 'Explain how rain forms',
  'List three colours', 'A story about a robot', 'Why is the sky blue?', 'Describe a busy market'];

function startServer(parallel, m = model) {
  return new Promise((resolve, reject) => {
    const p = spawn(tern, ['serve', '-m', m, '--port', '0', '--parallel', String(parallel), '--ctx', '1024',
      '--queue', '64', '-t', threads], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    const timer = setTimeout(() => reject(new Error('server did not start: ' + err)), 120000);
    p.stderr.on('data', (d) => {
      err += d;
      const m = /listening on (http:\/\/[^ ]+:\d+)/.exec(err);
      if (m) { clearTimeout(timer); resolve({ proc: p, url: m[1] }); }
    });
    p.on('exit', (code) => reject(new Error(`server exited (${code}): ${err}`)));
  });
}

function stopServer(s) {
  return new Promise((resolve) => { s.proc.removeAllListeners('exit'); s.proc.on('exit', resolve); s.proc.kill('SIGTERM'); });
}

function rssKiB(pid) {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? +m[1] : 0;
}

// One streaming request: {ok, ttft, tpot, tokens}
async function request(url, i) {
  const t0 = performance.now();
  try {
    const r = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: prompts[i % prompts.length] }], max_tokens: maxTokens,
        temperature: 0.8, seed: i, stream: true, stream_options: { include_usage: true } }),
    });
    if (r.status !== 200) return { ok: false, why: `status ${r.status}` };
    const dec = new TextDecoder();
    let buf = '', tokens = 0, done = false, timings = null;
    for await (const chunk of r.body) {
      buf += dec.decode(chunk, { stream: true });
      let k;
      while ((k = buf.indexOf('\n\n')) >= 0) {
        const ev = buf.slice(0, k); buf = buf.slice(k + 2);
        if (!ev.startsWith('data: ')) continue;
        const data = ev.slice(6);
        if (data === '[DONE]') { done = true; continue; }
        const j = JSON.parse(data);
        if (j.error) return { ok: false, why: j.error.message };
        if (j.usage) tokens = j.usage.completion_tokens;
        if (j.timings) timings = j.timings;
      }
    }
    if (!done) return { ok: false, why: 'no [DONE]' };
    if (!timings) return { ok: false, why: 'no timings in the last chunk' };
    const ttft = timings.ttft_ms;
    const tpot = timings.predicted_n > 1 ? timings.predicted_ms / (timings.predicted_n - 1) : 0;
    return { ok: true, ttft, tpot, tokens, wall: performance.now() - t0 };
  } catch (e) {
    return { ok: false, why: String(e) };
  }
}

async function drive(url, n, secs) {
  const end = performance.now() + secs * 1000;
  const res = [];
  let id = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: n }, async () => {
    while (performance.now() < end) res.push(await request(url, id++));
  }));
  return { res, wall: (performance.now() - t0) / 1000 };
}

async function metrics(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out = {};
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+) ([0-9.e+-]+)$/.exec(line);
    if (m) out[m[1]] = +m[2];
  }
  return out;
}

const pct = (xs, p) => { if (!xs.length) return 0; const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p / 100 * s.length))]; };
const ms = (x) => x.toFixed(1);

let failed = false;
// ---- soak ----
{
  const s = await startServer(4, soakModel);
  await drive(s.url, 4, 5);                          // warm-up: allocations settle
  const rss0 = rssKiB(s.proc.pid);
  const { res, wall } = await drive(s.url, clients, seconds);
  const rss1 = rssKiB(s.proc.pid);
  await stopServer(s);
  const errors = res.filter((r) => !r.ok);
  const tokens = res.reduce((a, r) => a + (r.tokens || 0), 0);
  const growth = (rss1 - rss0) / rss0;
  console.log(`## soak: ${clients} streaming clients for ${seconds} s, --parallel 4, max_tokens ${maxTokens}, ${soakModel}`);
  console.log(`requests ${res.length}, errors ${errors.length}${errors.length ? ' (' + errors[0].why + ')' : ''}, ` +
    `generated tokens ${tokens} (${(tokens / wall).toFixed(1)} tokens/s), RSS ${(rss0 / 1024).toFixed(1)} -> ${(rss1 / 1024).toFixed(1)} MiB (${(100 * growth).toFixed(1)}%)`);
  if (errors.length || growth > 0.10) failed = true;
}
// ---- sweep ----
maxTokens = sweepMaxTokens;
console.log(`\n## aggregate throughput (P streaming clients on --parallel P, ${sweepSeconds} s each, max_tokens ${maxTokens}, ${model})\n`);
console.log('| parallel | requests | tokens/s (aggregate) | x single | mean decode batch | TTFT p50 / p90 / p99 ms | TPOT p50 / p90 / p99 ms | errors |');
console.log('|---:|---:|---:|---:|---:|---|---|---:|');
let single = 0;
for (const p of sweep) {
  const s = await startServer(p);
  await drive(s.url, p, 2);
  const m0 = await metrics(s.url);
  const { res, wall } = await drive(s.url, p, sweepSeconds);
  const m1 = await metrics(s.url);
  await stopServer(s);
  const steps = m1.tern_decode_steps_total - m0.tern_decode_steps_total;
  const batch = steps > 0 ? (m1.tern_decode_sequences_total - m0.tern_decode_sequences_total) / steps : 0;
  const ok = res.filter((r) => r.ok);
  const tps = ok.reduce((a, r) => a + r.tokens, 0) / wall;
  if (p === 1) single = tps;
  const tt = ok.map((r) => r.ttft), tp = ok.map((r) => r.tpot).filter((x) => x > 0);
  console.log(`| ${p} | ${res.length} | ${tps.toFixed(1)} | ${single ? (tps / single).toFixed(2) : '-'} | ${batch.toFixed(2)} | ` +
    `${ms(pct(tt, 50))} / ${ms(pct(tt, 90))} / ${ms(pct(tt, 99))} | ${ms(pct(tp, 50))} / ${ms(pct(tp, 90))} / ${ms(pct(tp, 99))} | ${res.length - ok.length} |`);
  if (res.length !== ok.length) failed = true;
}
process.exit(failed ? 1 : 0);
