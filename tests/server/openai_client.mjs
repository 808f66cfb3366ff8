// The official openai npm client against `flashdesk-cli serve` (ctest server_openai_client):
// model list, a whole answer, a stream with reasoning_content and usage, a resent history's
// cached tokens, errors as the client's typed errors, an aborted stream, and eight clients at once.
// Usage: node openai_client.mjs FLASHDESK_CLI MODEL_DIR
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

const [cli, modelDir] = process.argv.slice(2);
if (!cli || !modelDir) {
  console.error('usage: node openai_client.mjs FLASHDESK_CLI MODEL_DIR');
  process.exit(2);
}
const apiKey = 'flashdesk-test-key';
const model = 'flash-tiny';

// The server's KV blocks: a folder of its own, removed at the end (not the home's data folder).
const dataDir = mkdtempSync(join(tmpdir(), 'flashdesk-openai-client-'));

// Starts the server on a free port (it prints the address on its first line).
function startServer() {
  const server = spawn(cli, ['serve', '--model', modelDir, '--port', '0', '--api-key', apiKey,
                             '--data-dir', dataDir],
                       { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = new Promise((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (data) => {
      out += data;
      const m = out.match(/:(\d+)\/v1/);
      if (m) resolve(Number(m[1]));
    });
    server.on('exit', (code) => reject(new Error(`serve exited (${code}) before listening`)));
  });
  return { server, port };
}

const { server, port } = startServer();
const baseURL = `http://127.0.0.1:${await port}/v1`;
const client = new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 120_000 });
const noThinking = { thinking: { type: 'disabled' } };

const checks = [];
function check(name, fn) { checks.push({ name, fn }); }

check('lists the model', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [model]);
  assert.equal((await client.models.retrieve(model)).id, model);
  await assert.rejects(client.models.retrieve('no-such-model'), (e) => e instanceof OpenAI.NotFoundError);
});

check('answers a whole completion', async () => {
  const r = await client.chat.completions.create({
    model, ...noThinking,
    messages: [{ role: 'user', content: 'Hi! My name is Quinn.' }],
  });
  assert.match(r.choices[0].message.content, /Quinn/);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage.prompt_tokens > 5 && r.usage.completion_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
});

check('streams reasoning_content, then content, then usage', async () => {
  const stream = await client.chat.completions.create({
    model, reasoning_effort: 'low', stream: true, stream_options: { include_usage: true },
    messages: [{ role: 'user', content: 'What is 4821 + 3377?' }],
  });
  let reasoning = '', content = '', finish = null, usage = null, reasoningAfterContent = false;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.delta.reasoning_content) {
      reasoning += choice.delta.reasoning_content;
      if (content) reasoningAfterContent = true;
    }
    if (choice.delta.content) content += choice.delta.content;
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  assert.ok(reasoning.length > 0, 'no reasoning_content');
  assert.ok(content.length > 0, 'no content');
  assert.ok(!reasoningAfterContent);
  assert.equal(finish, 'stop');
  assert.ok(usage && usage.completion_tokens_details.reasoning_tokens > 0);
});

check('a resent history costs only its new tokens', async () => {
  const messages = [];
  let previous = null;
  for (const text of ['Hi! My name is Quinn.', 'What is 12 + 30?', 'What is my name?']) {
    messages.push({ role: 'user', content: text });
    const r = await client.chat.completions.create({ model, ...noThinking, messages });
    const cached = r.usage.prompt_tokens_details.cached_tokens;
    // Chat mode: all of the last prompt and answer but the answer's last token.
    if (previous) assert.equal(cached, previous.prompt_tokens + previous.completion_tokens - 1);
    previous = r.usage;
    messages.push({ role: 'assistant', content: r.choices[0].message.content });
  }
  assert.match(messages.at(-1).content, /Quinn/);
});

check('errors are the client\'s typed errors', async () => {
  const wrongKey = new OpenAI({ apiKey: 'nope', baseURL, maxRetries: 0 });
  await assert.rejects(wrongKey.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
  const user = [{ role: 'user', content: 'hi' }];
  await assert.rejects(client.chat.completions.create({ model, messages: user, n: 2 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'n');
  await assert.rejects(client.chat.completions.create({ model, messages: user, temperature: 5 }),
                       (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
  await assert.rejects(client.chat.completions.create({ model: 'gpt-4o', messages: user }),
                       (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
});

check('an aborted stream leaves the server answering', async () => {
  const controller = new AbortController();
  const stream = await client.chat.completions.create({
    model, reasoning_effort: 'max', stream: true, max_tokens: 100000, temperature: 1,
    messages: [{ role: 'user', content: 'Write a very long story about a dragon.' }],
  }, { signal: controller.signal });
  let chunks = 0;
  try {  // the client ends the iteration quietly, or with its abort error
    for await (const _ of stream) if (++chunks === 20) controller.abort();
  } catch (e) {
    if (!(e instanceof OpenAI.APIUserAbortError) && e.name !== 'AbortError') throw e;
  }
  assert.equal(chunks, 20);
  const r = await client.chat.completions.create({
    model, ...noThinking, max_tokens: 8, messages: [{ role: 'user', content: 'Hi!' }],
  });
  assert.ok(r.choices[0].finish_reason);
});

check('eight clients at once are all answered', async () => {
  const ask = async (c, i) => {
    const body = { model, ...noThinking, max_tokens: 12,
                   messages: [{ role: 'user', content: `What is ${100 + c} + ${7 * c}?` }] };
    if (i % 2 === 0) return (await client.chat.completions.create(body)).choices[0];
    let content = '', finish = null;
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
      content += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    return { message: { content }, finish_reason: finish };
  };
  const clients = Array.from({ length: 8 }, async (_, c) => {
    const answers = [];
    for (let i = 0; i < 5; ++i) answers.push(await ask(c, i));
    return answers;
  });
  for (const answers of await Promise.all(clients)) {
    for (const a of answers) {
      assert.ok(['stop', 'length'].includes(a.finish_reason), JSON.stringify(a));
      assert.equal(a.message.content, answers[0].message.content);  // greedy: the same answer
    }
  }
});

let failed = 0;
for (const { name, fn } of checks) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    ++failed;
    console.log(`FAIL ${name}\n${e.stack ?? e}`);
  }
}
server.kill('SIGTERM');
if (server.exitCode === null && server.signalCode === null)
  await new Promise((resolve) => server.on('exit', resolve));
rmSync(dataDir, { recursive: true, force: true });
console.log(failed ? `${failed} of ${checks.length} failed` : `all ${checks.length} passed`);
process.exit(failed ? 1 : 0);
