// Starts `turboquant serve` on a free loopback port for a test file and stops it afterwards.
// TQ_BIN: the binary (default build/release/src/cli/turboquant, then build/rel/...).
// TQ_SHARED_DIR: the shared data (default ../shared next to the repository).
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..', '..');

export function binaryPath() {
  if (process.env.TQ_BIN) return process.env.TQ_BIN;
  for (const b of ['build/release', 'build/rel', 'build/debug']) {
    const p = path.join(repoRoot, b, 'src/cli/turboquant');
    if (existsSync(p)) return p;
  }
  throw new Error('turboquant binary not found: build it or set TQ_BIN');
}

// The shared copy of a model, else (a bare clone, not under CI) the one shipped in models/.
export function modelDir(name = 'tq-llama-21m') {
  const shared = process.env.TQ_SHARED_DIR || path.resolve(repoRoot, '..', 'shared');
  const dir = path.join(shared, 'models', name);
  if (existsSync(path.join(dir, 'config.json'))) return dir;
  const shipped = path.join(repoRoot, 'models', name);
  if (process.env.CI !== 'true' && existsSync(path.join(shipped, 'config.json'))) return shipped;
  throw new Error(`model not found: ${dir}`);
}

// Resident set of a process in bytes (Linux /proc).
export function rssBytes(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

// Returns { url, baseURL, proc, stop() } once the server prints its URL.
export async function startServer(extraArgs = [], model = modelDir()) {
  const args = ['serve', '--model', model, '--host', '127.0.0.1', '--port', '0', ...extraArgs];
  const proc = spawn(binaryPath(), args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const url = await new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`server did not start in 60 s:\n${stderr}`)), 60000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/[\d.]+:\d+)/.exec(out);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    proc.on('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`cannot start ${binaryPath()}: ${e.message}`));
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${stderr}`));
    });
  });
  return {
    url,
    baseURL: `${url}/v1`,
    proc,
    stderr: () => stderr,
    async stop() {
      if (proc.exitCode !== null) return proc.exitCode;
      const done = new Promise((resolve) => proc.on('exit', (code, sig) => resolve(code ?? sig)));
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 10000);
      const code = await done;
      clearTimeout(t);
      return code;
    },
  };
}
