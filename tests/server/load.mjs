// load.mjs: bounded load test of `tern serve` on loopback (no dependencies: Node's fetch).
//   node tests/server/load.mjs --tern ./tern --model M.gguf [--soak-model S.gguf] [--clients 16]
//        [--seconds 60] [--sweep 1,2,4,8] [--sweep-seconds 20] [--max-tokens 64]
//        [--sweep-max-tokens 128] [--threads 2] [--skip-soak 1] [--label TEXT]
// 1. Soak (on --soak-model, default --model): one server (--parallel 4), `clients` streaming
//    clients for `seconds` (short chat prompts, max_tokens 64); counts errors (non-200, missing
//    [DONE], bad JSON), and the server's RSS after a warm-up vs at the end. Clients stop starting
//    requests at the deadline and wait for the ones in flight (bounded by max_tokens).
// 2. Sweep (on --model): for each P, a server with --parallel P and P closed-loop streaming
//    clients for sweep-seconds, each request a chat prompt of realistic length (a system prompt and
//    a numbered question: 150-190 tokens on the synthetic byte-level vocabulary, the system prompt
//    shared, so a slot reuses it from its previous request as a real deployment would) and
//    max_tokens 128 (the synthetic model never stops early). Reported per P:
//    - steady-state decode tokens/s: the server's pure decode steps (/metrics
//      tern_decode_only_tokens_total / tern_decode_only_seconds_total: steps that carried no prompt
//      chunk, whole step timed: sampling, output and the batched forward), and its ratio to P = 1:
//      what "aggregate at P sequences vs a single stream" means once every stream is decoding;
//    - end-to-end tokens/s: generated tokens of the requests / wall (prefills of joining requests,
//      queueing and the last requests' tail included), and its ratio;
//    - TTFT and TPOT percentiles, the server's per-request figures from the "timings" of the last
//      stream chunk (ttft_ms: submission -> first generated token; TPOT: predicted_ms /
//      (predicted_n - 1), so the passes that carried other requests' prompt chunks count), not the
//      arrival times of text chunks: the synthetic models' random tokens mostly have no text;
//    - mean decode batch (sequences per decode pass) and mixed steps (decode passes that carried
//      a prompt chunk);
//    - the ceiling of the steady-state ratio, P / cost(P), where cost(P) is the forward of P
//      columns in single decode steps (`tern bench-spec --cost`, measured first in the same run),
//      and the ratio as a % of it (how much the scheduler loses to the kernels' limit).
// Prints a markdown report; exits non-zero on any error or if RSS grew by more than 10%.
import { spawn, spawnSync } from 'node:child_process';
import http from 'node:http';
import { readFileSync } from 'node:fs';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith('--') ? [...a, [v.slice(2), all[i + 1]]] : a), []));
const tern = args.tern ?? './tern';
const model = args.model;
const clients = +(args.clients ?? 16), seconds = +(args.seconds ?? 60);
const sweep = (args.sweep ?? '1,2,4,8').split(',').map(Number);
const sweepSeconds = +(args['sweep-seconds'] ?? 20);
let maxTokens = +(args['max-tokens'] ?? 64);
const sweepMaxTokens = +(args['sweep-max-tokens'] ?? 128);
const skipSoak = args['skip-soak'] === '1';
const label = args.label ?? '';
const soakModel = args['soak-model'] ?? args.model;
const threads = args.threads ?? '2';
if (!model) { console.error('--model is required'); process.exit(2); }

const prompts = ['Once upon a time', 'The little dog ran', 'Write a poem about the sea', 'Explain how rain forms',
  'List three colours', 'A story about a robot', 'Why is the sky blue?', 'Describe a busy market'];
// Sweep requests: a system prompt and a question of realistic length (150-190 tokens in all).
const system = 'You are a helpful assistant. Answer clearly and briefly, use plain words, and say so when you are not sure.';
const questions = ['Explain how rain forms and why some clouds give rain while others do not.',
  'I have a small garden with poor soil. Which three vegetables should I plant first, and why?',
  'Summarise the difference between a list and a tuple in Python, with one short example of each.',
  'My bread came out dense and flat. What are the most likely causes and how do I fix them next time?'];
let sweeping = false;

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

// POST with node:http (no client-side timeouts: fetch's 300 s header/body timeouts can fail every
// request of a P = 8 level on a heavily loaded host, whose queued prefills take longer than that).
function post(url, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' } },
      (res) => resolve({ status: res.statusCode, body: res }));
    req.on('error', reject);
    req.end(body);
  });
}

// One streaming request: {ok, ttft, tpot, tokens}
async function request(url, i) {
  const t0 = performance.now();
  try {
    const r = await post(url, JSON.stringify({ messages: sweeping ? [{ role: 'system', content: system }, { role: 'user', content: `(question ${i}) ${questions[i % questions.length]}` }]
        : [{ role: 'user', content: prompts[i % prompts.length] }], max_tokens: maxTokens,
        temperature: 0.8, seed: i, stream: true, stream_options: { include_usage: true } }));
    if (r.status !== 200) { r.body.resume(); return { ok: false, why: `status ${r.status}` }; }
    const dec = new TextDecoder();
    let buf = '', tokens = 0, done = false, timings = null, promptTotal = 0;
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
        if (j.usage) { tokens = j.usage.completion_tokens; promptTotal = j.usage.prompt_tokens; }
        if (j.timings) timings = j.timings;
      }
    }
    if (!done) return { ok: false, why: 'no [DONE]' };
    if (!timings) return { ok: false, why: 'no timings in the last chunk' };
    const ttft = timings.ttft_ms;
    const tpot = timings.predicted_n > 1 ? timings.predicted_ms / (timings.predicted_n - 1) : 0;
    return { ok: true, ttft, tpot, tokens, promptN: timings.prompt_n, promptTotal, wall: performance.now() - t0 };
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
    const m = /^([a-z_]+) ([0-9.e+-]+)$/.exec(line);   // counters and gauges (histogram lines have labels)
    if (m) out[m[1]] = +m[2];
  }
  return out;
}

const pct = (xs, p) => { if (!xs.length) return 0; const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p / 100 * s.length))]; };
const ms = (x) => x.toFixed(1);

let failed = false;
// ---- soak ----
if (!skipSoak) {
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
sweeping = true;
console.log(`\n## aggregate throughput${label ? ' (' + label + ')' : ''}: P closed-loop streaming clients on --parallel P, ` +
  `${sweepSeconds} s each, chat prompts of realistic length, max_tokens ${maxTokens}, -t ${threads}, ${model}\n`);
// The ceiling of the steady-state ratio: a batched forward of P columns costs cost(P) single
// decode steps (tern bench-spec --cost, same model, threads and build, measured here), so P
// streams decoding together can at best give P / cost(P) times one stream's tokens/s.
const maxP = Math.max(...sweep);
const cost = {};
{
  const r = spawnSync(tern, ['bench-spec', '-m', model, '--cost', '-t', threads, '--reps', '5', '--draft-max', String(Math.max(1, maxP - 1)),
    '-c', '512'], { encoding: 'utf8', timeout: 120000 });
  for (const line of (r.stdout ?? '').split('\n')) {
    const m = /^\s+(\d+)\s+\d+\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s*$/.exec(line);
    if (m) cost[+m[1]] = +m[3];
  }
  const c = sweep.filter((p) => cost[p]).map((p) => `${p}: ${cost[p].toFixed(2)}`).join(', ');
  console.log(`forward cost of P columns in single decode steps (tern bench-spec --cost -t ${threads} --reps 5): ${c || 'not measured: ' + (r.stderr ?? '').trim()}\n`);
}
console.log('| parallel | ceiling P / cost(P) | steady-state decode tokens/s | x single | % of ceiling | end-to-end tokens/s | x single | ' +
  'mean decode batch (all / decode-only steps) | mixed steps | requests | prompt tokens (mean uncached) | TTFT p50 / p90 / p99 ms | TPOT p50 / p90 / p99 ms | errors |');
console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|');
let single = 0, singleE2e = 0;
for (const p of sweep) {
  const s = await startServer(p);
  const w = await request(s.url, 100000);            // warm-up: the weights' pages, one request (its own question)
  if (!w.ok) { console.log(`warm-up failed: ${w.why}`); failed = true; }
  const m0 = await metrics(s.url);
  const { res, wall } = await drive(s.url, p, sweepSeconds);
  const m1 = await metrics(s.url);
  await stopServer(s);
  const d = (k) => m1[k] - m0[k];
  const steps = d('tern_decode_steps_total');
  const batch = steps > 0 ? d('tern_decode_sequences_total') / steps : 0;
  const decodeTps = d('tern_decode_only_seconds_total') > 0 ? d('tern_decode_only_tokens_total') / d('tern_decode_only_seconds_total') : 0;
  const ok = res.filter((r) => r.ok);
  const tps = ok.reduce((a, r) => a + r.tokens, 0) / wall;
  if (p === 1) { single = decodeTps; singleE2e = tps; }
  const tt = ok.map((r) => r.ttft), tp = ok.map((r) => r.tpot).filter((x) => x > 0);
  const pt = ok.map((r) => r.promptTotal), pn = ok.map((r) => r.promptN);
  const mean = (xs) => xs.reduce((a, x) => a + x, 0) / Math.max(1, xs.length);
  const ceil = cost[p] ? p / cost[p] : 0, x = single ? decodeTps / single : 0;
  const dsteps = d('tern_decode_only_steps_total'), dbatch = dsteps > 0 ? d('tern_decode_only_tokens_total') / dsteps : 0;
  console.log(`| ${p} | ${ceil ? ceil.toFixed(2) : '-'} | ${decodeTps.toFixed(1)} | ${single ? x.toFixed(2) : '-'} | ` +
    `${ceil && single ? (100 * x / ceil).toFixed(0) + '%' : '-'} | ${tps.toFixed(1)} | ${singleE2e ? (tps / singleE2e).toFixed(2) : '-'} | ` +
    `${batch.toFixed(2)} / ${dbatch.toFixed(2)} | ${d('tern_mixed_steps_total')} | ${res.length} | ` +
    `${pt.length ? Math.min(...pt) + '-' + Math.max(...pt) + ' (' + mean(pn).toFixed(0) + ')' : '-'} | ` +
    `${ms(pct(tt, 50))} / ${ms(pct(tt, 90))} / ${ms(pct(tt, 99))} | ${ms(pct(tp, 50))} / ${ms(pct(tp, 90))} / ${ms(pct(tp, 99))} | ${res.length - ok.length} |`);
  if (res.length !== ok.length) {
    failed = true;
    console.log(`errors at P = ${p}: ${[...new Set(res.filter((r) => !r.ok).map((r) => r.why))].join('; ')}`);
  }
}
process.exit(failed ? 1 : 0);
