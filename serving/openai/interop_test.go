package openai

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// nodeClient is the official OpenAI Node client's version the interop
// test installs (6.x runs on Node 18 and later; 7.x needs Node 22).
const nodeClient = "openai@6.49.0"

const nodeScript = `
const mod = require('openai');
const OpenAI = mod.OpenAI || mod.default || mod;
const client = new OpenAI({ baseURL: process.env.BASE + '/v1', apiKey: 'unused', maxRetries: 0 });
(async () => {
  const out = {};
  const stream = await client.completions.create({ model: 'fake-echo', prompt: 'node!', max_tokens: 12,
    stream: true, stream_options: { include_usage: true } });
  out.text = ''; out.chunks = 0;
  for await (const chunk of stream) {
    if (chunk.choices.length) { out.chunks++; out.text += chunk.choices[0].text; out.finish = chunk.choices[0].finish_reason || out.finish; }
    if (chunk.usage) out.usage = chunk.usage;
  }
  const chat = await client.chat.completions.create({ model: 'fake-echo', stream: true, max_tokens: 6,
    messages: [{ role: 'user', content: 'hi' }] });
  out.chat = '';
  for await (const chunk of chat) {
    const d = chunk.choices[0] && chunk.choices[0].delta;
    if (d && d.role) out.role = d.role;
    if (d && d.content) out.chat += d.content;
  }
  const plain = await client.completions.create({ model: 'fake-echo', prompt: 'abc', max_tokens: 4 });
  out.plain = plain.choices[0].text;
  out.models = (await client.models.list()).data.map(m => m.id);
  try { await client.completions.create({ model: 'fake-echo', prompt: 'é' }); }
  catch (e) { out.error = { status: e.status, param: e.param, code: e.code, message: e.message }; }
  console.log(JSON.stringify(out));
})().catch(e => { console.error(String(e)); process.exit(1); });
`

// TestNodeClient runs the official OpenAI Node client against the server:
// a streaming completion with usage, a streaming chat, a plain completion,
// the model list and a refusal, each read back as the client sees it.
func TestNodeClient(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the OpenAI Node client with npm")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: the OpenAI Node client cannot be installed")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--silent", "--prefix", dir, nodeClient)
	if out, err := install.CombinedOutput(); err != nil {
		t.Skipf("npm install %s failed (no registry here?): %v: %s", nodeClient, err, out)
	}
	script := filepath.Join(dir, "client.js")
	if err := os.WriteFile(script, []byte(nodeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFake()
	_, ts := newTestServer(t, f)
	run := exec.CommandContext(ctx, node, script)
	run.Env = append(os.Environ(), "BASE="+ts.URL, "NODE_PATH="+filepath.Join(dir, "node_modules"))
	run.Dir = dir
	out, err := run.Output()
	if err != nil {
		t.Fatalf("node client: %v: %s", err, stderrOf(err))
	}
	var got struct {
		Text, Finish, Chat, Role, Plain string
		Chunks                          int
		Usage                           Usage
		Models                          []string
		Error                           struct {
			Status      int
			Param, Code string
			Message     string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node client printed %q: %v", out, err)
	}
	t.Logf("node client: %s", out)
	if got.Text != "node!node!no" || got.Finish != "length" || got.Chunks != 12 || got.Usage != (Usage{5, 12, 17}) {
		t.Errorf("streamed completion: %+v; want \"node!node!no\" in 12 chunks, length, usage 5 + 12", got)
	}
	if got.Chat != "user: " || got.Role != "assistant" {
		t.Errorf("streamed chat %q role %q; want the template's first 6 characters \"user: \" and role assistant", got.Chat, got.Role)
	}
	if got.Plain != "abca" || len(got.Models) != 1 || got.Models[0] != "fake-echo" {
		t.Errorf("plain completion %q, models %v", got.Plain, got.Models)
	}
	if got.Error.Status != 400 || got.Error.Param != "prompt" || got.Error.Code != "invalid_prompt" {
		t.Errorf("refusal as the client sees it: %+v; want 400, param prompt, code invalid_prompt", got.Error)
	}
	waitFree(t, f)
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
